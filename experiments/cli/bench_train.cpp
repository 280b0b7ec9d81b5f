// `ponder bench train`: training throughput of a config's model on its corpus for the inner-loop
// variants the issue names (dual form K=1, iterative path K=1, iterative prefix mode K = 1, 2, 4, 8),
// at each thread count: tokens/s, GFLOP/s from the engine's counters, the fraction of a 512³ sgemm
// measured in the same run, peak RSS, and where the time and FLOPs go. --variants picks rows; a variant
// whose step would not fit in memory (estimated from a batch-1 probe step) is skipped with a message;
// --profile adds the time per kernel kind and per kernel (tensor/profile.h). --device cuda trains on the GPU:
// the reference is then a cuBLAS f32 GEMM measured in the same run, memory is the device's peak, and each row
// also gives MFU against the device's dense bf16 tensor-core peak.
#include <algorithm>
#include <cblas.h>
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/model/device.h"
#include "experiments/model/training.h"
#include "tensor/cpu/runtime.h"
#include "tensor/cuda/cuda.h"
#include "tensor/kernels.h"
#include "tensor/precision.h"
#include "tensor/profile.h"
#include "ttt/ttt_layer.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace cmd_bench_train {
namespace {

constexpr int kSgemmN = 512;
constexpr int kCublasN = 4096;  // the GPU's reference GEMM: large enough to reach cuBLAS's plateau
constexpr double kBusyCpus = 0.2;  // "others" above this flags a row as disturbed

struct BenchTrainArgs {
  std::string config = "tiny";
  std::vector<int> threads{1, 2};
  int64_t steps = 3;  // timed steps per repetition, after one warm-up step
  int64_t reps = 1;   // timed repetitions of `steps` steps per variant; the fastest is reported
  std::vector<std::string> variants{"dual", "iter-1", "prefix-1", "prefix-2", "prefix-4", "prefix-8"};
  bool json = false;
  bool profile = false;  // time kernels by kind (tensor/profile.h)
  double mem_limit_mb = 0;  // memory a variant may use; 0 = MemAvailable less the block cache's limit
  std::string device = "cpu";
  std::string precision = "f32";  // float32 matmul operands: f32, tf32 or bf16 (tensor/precision.h)
};

constexpr double kCacheMb = 1024;  // the CPU block cache's default limit (tensor/cpu/backend.cpp)

struct Variant {
  std::string name;  // "dual", "iterative", "prefix" or "pfx-closed" (the table's variant column)
  ttt::InnerPath path;
  ttt::StepMode mode;
  int k;
  // Fused ops run as their compositions in this variant: "dual-composed" the TTT mini-batch's kernels (the
  // reference), "dual-only" every other one (norms, gated products, AdamW: what their kernels save).
  std::vector<FusedOp> composed = {};
  // The backend's scan kernel for the dual form; "dual-units": its one-unit kernel called unit by unit.
  bool scan = true;
  // A chunk of plain dual steps as one scan op; "dual-loop": one dual op per unit (ttt::set_scan_op).
  bool scan_op = true;
};

// The dual form's kernels, TTT-Linear's and TTT-MLP's (a config uses one of the two).
std::vector<FusedOp> dual_ops() {
  return {FusedOp::TttLinearDual, FusedOp::TttLinearDualBackward, FusedOp::TttMlpDual, FusedOp::TttMlpDualBackward};
}
std::vector<FusedOp> prefix_ops() { return {FusedOp::TttPrefixSteps, FusedOp::TttPrefixStepsBackward}; }
std::vector<FusedOp> all_but_dual() {
  const std::vector<FusedOp> dual = dual_ops();
  std::vector<FusedOp> ops;
  for (int i = 0; i < int(FusedOp::Count); ++i)
    if (std::find(dual.begin(), dual.end(), FusedOp(i)) == dual.end()) ops.push_back(FusedOp(i));
  return ops;
}

// "dual" (dual form, K = 1), "iter-K" or "iterative" (iterative path, carry mode, K steps; "iterative"
// is iter-1), "prefix-K" (iterative path, prefix mode, K steps) and "prefix-closed-K" (prefix mode on the dual
// path: the same steps with closed-form inner gradients; "prefix-composed-K" with its K-step kernel off, the
// steps as their composition of ops).
Variant parse_variant(const std::string& text) {
  auto steps_after = [&](const std::string& prefix) {
    const std::string k = text.substr(prefix.size());
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(k, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (k.empty() || used != k.size() || v < 1)
      throw std::invalid_argument("bench train: --variants entry '" + text + "' needs a step count >= 1 after '" +
                                  prefix + "'");
    return v;
  };
  if (text == "dual") return {"dual", ttt::InnerPath::Dual, ttt::StepMode::Carry, 1};
  if (text == "dual-composed" || text == "dual-comp")
    return {"dual-comp", ttt::InnerPath::Dual, ttt::StepMode::Carry, 1, dual_ops()};
  if (text == "dual-units") return {"dual-units", ttt::InnerPath::Dual, ttt::StepMode::Carry, 1, {}, false};
  if (text == "dual-loop") return {"dual-loop", ttt::InnerPath::Dual, ttt::StepMode::Carry, 1, {}, true, false};
  if (text == "dual-only") return {"dual-only", ttt::InnerPath::Dual, ttt::StepMode::Carry, 1, all_but_dual()};
  if (text == "iterative") return {"iterative", ttt::InnerPath::Iterative, ttt::StepMode::Carry, 1};
  if (text.rfind("iter-", 0) == 0)
    return {"iterative", ttt::InnerPath::Iterative, ttt::StepMode::Carry, steps_after("iter-")};
  if (text.rfind("prefix-closed-", 0) == 0)
    return {"pfx-closed", ttt::InnerPath::Dual, ttt::StepMode::Prefix, steps_after("prefix-closed-")};
  if (text.rfind("prefix-composed-", 0) == 0)
    return {"pfx-comp", ttt::InnerPath::Dual, ttt::StepMode::Prefix, steps_after("prefix-composed-"), prefix_ops()};
  if (text.rfind("prefix-", 0) == 0)
    return {"prefix", ttt::InnerPath::Iterative, ttt::StepMode::Prefix, steps_after("prefix-")};
  throw std::invalid_argument("bench train: unknown variant '" + text +
                              "' in --variants (expected dual, dual-units, dual-loop, dual-composed, dual-only, iterative, "
                              "iter-K, prefix-K, prefix-closed-K or prefix-composed-K)");
}

// GFLOP/s of one 512³ cblas_sgemm at the current thread count: the machine's attainable GEMM rate.
double sgemm_gflops() {
  Generator gen(0);
  const Tensor a = gen.uniform({kSgemmN, kSgemmN}, -1, 1), b = gen.uniform({kSgemmN, kSgemmN}, -1, 1);
  const Tensor c = Tensor::empty({kSgemmN, kSgemmN});
  const Rate r = measure(
      [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kSgemmN, kSgemmN, kSgemmN, 1.0f, a.data<float>(),
                    kSgemmN, b.data<float>(), kSgemmN, 0.0f, c.data<float>(), kSgemmN);
      },
      2.0 * kSgemmN * kSgemmN * kSgemmN, 5, 0.05);
  return r.best / 1e9;
}

// GFLOP/s of one kCublasN³ f32 cuBLAS GEMM on contiguous device buffers (TF32 when the engine's products use
// it; at bf16 still the f32 GEMM, as cuda_gemm_direct has no bf16 form).
double cublas_gflops() {
  Generator gen(0);
  const Tensor a = raw::to_device(gen.uniform({kCublasN, kCublasN}, -1, 1), Device::CUDA);
  const Tensor b = raw::to_device(gen.uniform({kCublasN, kCublasN}, -1, 1), Device::CUDA);
  const Tensor c = Tensor::empty({kCublasN, kCublasN}, DType::F32, Device::CUDA);
  const Rate r = measure_on(Device::CUDA, [&] { cuda_gemm_direct(c, a, b); }, 2.0 * kCublasN * kCublasN * kCublasN,
                            5, 0.05);
  return r.best / 1e9;
}

// The attainable GEMM rate the rows are measured against, on the device the model trains on.
double reference_gflops(Device dev) { return dev == Device::CUDA ? cublas_gflops() : sgemm_gflops(); }

// A field of /proc/self/status in MB: VmHWM, the peak resident memory since the last reset_peak_rss(), or VmRSS.
double status_mb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return 0;
}
// Each variant reports its own peak: freed heap memory a previous variant left with the process goes
// back to the system first (glibc keeps it otherwise), then writing 5 to clear_refs resets VmHWM to
// the current RSS.
void reset_peak_rss() {
  cpu::release_alloc_cache();
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
}

struct Row {
  const Variant* v = nullptr;
  Device dev = Device::CPU;
  int threads = 0;
  double seconds = 0, forward_s = 0, backward_s = 0, optim_s = 0;
  int64_t tokens = 0;
  FlopCounts flops;  // forward, backward and optimiser
  prof::Totals kernels;  // time inside kernels by kind (with --profile)
  std::vector<prof::LabelTotal> labels;  // … and by kernel
  int64_t steps = 0;
  // peak_mb: on the CPU the process's peak resident memory while the variant ran; base_mb: what was resident before
  // its trainer existed (code, libraries — a CUDA build's add about 150 MB —, the dataset), so peak − base is the
  // training's own
  double peak_mb = 0, base_mb = 0, estimated_mb = 0, other_cpus = 0, loss = 0;
  std::vector<double> rep_tokens_per_s;  // every repetition's tokens/s, in the order they ran
  double tokens_per_s() const { return double(tokens) / seconds; }
  double gflops() const { return double(flops.total()) / seconds / 1e9; }
};

ttt::TrainConfig variant_config(const RunConfig& cfg, const Variant& v, int64_t steps) {
  ttt::TrainConfig tc = cfg.train;
  tc.step_options = {v.k};
  tc.path = v.path;
  tc.mode = v.mode;
  tc.steps = std::max(tc.steps, steps + 1);
  return tc;
}

// Memory one training step of `v` needs, in MB: the peak of tensor storage during one step at batch size
// 1 (a probe), times the batch size. Activations grow linearly with the batch; parameters and AdamW
// moments do not, so this errs high. The probe costs 1/batch of a step.
double estimate_step_mb(const RunConfig& cfg, const Dataset& ds, const Variant& v, Device dev) {
  ttt::TrainConfig tc = variant_config(cfg, v, 1);
  tc.batch_size = 1;
  const int64_t live0 = memory_stats(dev).live_bytes;
  reset_peak_memory(dev);
  {
    ttt::Trainer probe(cfg.model, tc, ds.train, dev);
    probe.step();
  }
  const double probe_mb = double(memory_stats(dev).peak_bytes - live0) / (1024.0 * 1024.0);
  return probe_mb * double(cfg.train.batch_size);
}

// One timed repetition of `steps` training steps.
Row time_steps(ttt::Trainer& trainer, const Variant& v, int threads, int64_t steps, Device dev) {
  Row row;
  row.v = &v;
  row.dev = dev;
  row.threads = threads;
  const OtherLoad load;
  const prof::Totals k0 = prof::snapshot();
  const std::vector<prof::LabelTotal> l0 = prof::label_snapshot();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    const ttt::StepStats s = trainer.step();
    row.forward_s += s.forward_s;
    row.backward_s += s.backward_s;
    row.optim_s += s.optim_s;
    row.tokens += s.tokens;
    row.flops += s.flops;
    row.flops += s.optim_flops;
    row.loss = s.loss;
  }
  if (dev == Device::CUDA) cuda_synchronize();
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  row.kernels = prof::snapshot() - k0;
  row.labels = prof::label_diff(prof::label_snapshot(), l0);
  row.steps = steps;
  row.other_cpus = load.cpus();
  return row;
}

// After one warm-up step, `reps` repetitions of `steps` steps; the fastest is the row (on a shared machine the
// slower ones measured other processes as much as the engine), with every repetition's tokens/s beside it.
Row run_variant(const RunConfig& cfg, const Dataset& ds, const Variant& v, int threads, int64_t steps, int64_t reps,
                Device dev) {
  const ttt::TrainConfig tc = variant_config(cfg, v, steps * reps);
  struct Composed {  // the variant's fused ops as their compositions, for this variant only
    const Variant& v;
    explicit Composed(const Variant& x) : v(x) { set(false); }
    ~Composed() { set(true); }
    void set(bool k) const {
      for (FusedOp op : v.composed) raw::set_fused_kernel(op, k);
      if (!v.scan) raw::set_dual_scan(k);
      if (!v.scan_op) ttt::set_scan_op(k);
    }
  } composed(v);
  reset_peak_rss();
  reset_peak_memory(dev);
  const double base_mb = dev == Device::CUDA ? 0.0 : status_mb("VmRSS");
  ttt::Trainer trainer(cfg.model, tc, ds.train, dev);
  trainer.step();  // warm-up: first touch of buffers, thread start-up
  if (dev == Device::CUDA) cuda_synchronize();
  Row best;
  std::vector<double> all;
  for (int64_t r = 0; r < reps; ++r) {
    Row row = time_steps(trainer, v, threads, steps, dev);
    all.push_back(row.tokens_per_s());
    if (r == 0 || row.seconds < best.seconds) best = std::move(row);
  }
  best.rep_tokens_per_s = all;
  // On the GPU the memory that limits a step is the device's: the peak of its tensors.
  best.peak_mb = dev == Device::CUDA ? double(memory_stats(dev).peak_bytes) / (1024.0 * 1024.0) : status_mb("VmHWM");
  best.base_mb = base_mb;
  return best;
}

double share(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

// peak_bf16: the device's dense bf16 peak in GFLOP/s (0 on the CPU or where unknown): the MFU denominator.
void print_json(const Row& r, const BenchTrainArgs& o, const RunConfig& cfg, double sgemm, double peak_bf16) {
  const uint64_t total = r.flops.total();
  nlohmann::ordered_json j = {
      {"bench", "train"}, {"config", o.config}, {"variant", r.v->name}, {"mode", ttt::mode_name(r.v->mode)},
      {"path", ttt::path_name(r.v->path)}, {"K", r.v->k}, {"threads", r.threads},
      {"tokens_per_s", r.tokens_per_s()}, {"gflops", r.gflops()}, {"sgemm_gflops", sgemm},
      {"frac_sgemm", r.gflops() / sgemm}, {"peak_rss_mb", r.peak_mb}, {"base_rss_mb", r.base_mb},
      {"estimated_mb", r.estimated_mb},
      {"steps", o.steps}, {"reps", o.reps}, {"tokens_per_s_reps", r.rep_tokens_per_s},
      {"batch_size", cfg.train.batch_size}, {"seq_len", cfg.train.seq_len},
      {"flops_per_token", double(total) / double(r.tokens)},
      {"time_share", {{"forward", r.forward_s / r.seconds}, {"backward", r.backward_s / r.seconds},
                      {"optimizer", r.optim_s / r.seconds}}},
      {"flop_share", {{"matmul", share(r.flops.category(FlopCat::Matmul), total) / 100},
                      {"elementwise", share(r.flops.category(FlopCat::Elementwise), total) / 100},
                      {"reduction", share(r.flops.category(FlopCat::Reduction), total) / 100},
                      {"forward", share(r.flops.phase(Phase::Forward), total) / 100},
                      {"backward", share(r.flops.phase(Phase::Backward), total) / 100}}},
      {"loss", r.loss}, {"other_cpus", r.other_cpus}, {"commit", git_commit()}, {"build_type", build_type()},
      {"device", r.dev == Device::CUDA ? "cuda" : "cpu"}, {"matmul_precision", precision_name(matmul_precision())},
      {"reference_gemm", r.dev == Device::CUDA ? "cublas f32 4096^3" : "cblas_sgemm 512^3"}};
  const MachineInfo mi = machine_info();
  j["blas_core"] = mi.blas_core;
  j["omp_wait"] = mi.omp_wait;
  if (peak_bf16 > 0) {
    j["peak_bf16_dense_gflops"] = peak_bf16;
    j["mfu_bf16_dense"] = r.gflops() / peak_bf16;
  }
  if (o.profile) {
    nlohmann::ordered_json p;
    for (size_t k = 0; k < size_t(prof::Kind::Count); ++k)
      p[prof::kind_name(prof::Kind(k))] = {{"ms_per_step", 1e3 * r.kernels.seconds[k] / double(r.steps)},
                                           {"share", r.kernels.seconds[k] / r.seconds},
                                           {"calls_per_step", double(r.kernels.calls[k]) / double(r.steps)}};
    const double rest = r.seconds - r.kernels.total_seconds();
    p["framework"] = {{"ms_per_step", 1e3 * rest / double(r.steps)}, {"share", rest / r.seconds}};
    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
    for (const prof::LabelTotal& l : r.labels)
      kernels.push_back({{"kernel", l.label}, {"kind", prof::kind_name(l.kind)},
                         {"ms_per_step", 1e3 * l.seconds / double(r.steps)},
                         {"calls_per_step", double(l.calls) / double(r.steps)}});
    p["kernels"] = kernels;
    j["profile"] = p;
  }
  std::cout << j.dump() << std::endl;
}

void print_text(const Row& r, double sgemm, double peak_bf16) {
  const uint64_t total = r.flops.total();
  char base[16] = "-";
  if (r.dev == Device::CPU) std::snprintf(base, sizeof base, "%.1f", r.base_mb);
  std::printf("%-10s %2d %7d %9.0f %8.2f %7.1f%% %8.1f %8s %5.0f%% %5.0f%% %5.0f%% %6.1f%% %5.1f%% %5.1f%% %6.2f\n",
              r.v->name.c_str(), r.v->k, r.threads, r.tokens_per_s(), r.gflops(), 100 * r.gflops() / sgemm, r.peak_mb,
              base,
              100 * r.forward_s / r.seconds, 100 * r.backward_s / r.seconds, 100 * r.optim_s / r.seconds,
              share(r.flops.category(FlopCat::Matmul), total), share(r.flops.category(FlopCat::Elementwise), total),
              share(r.flops.category(FlopCat::Reduction), total), r.other_cpus);
  if (peak_bf16 > 0)
    std::printf("  MFU %.3f%% of the dense bf16 peak (%.0f GFLOP/s); loss %.4f\n", 100 * r.gflops() / peak_bf16,
                peak_bf16, r.loss);
  std::fflush(stdout);
}

// With --profile: ms per step (and share of the wall time) inside each kind of kernel, and the rest.
void print_profile(const Row& r) {
  std::printf("  ms/step:");
  for (size_t k = 0; k < size_t(prof::Kind::Count); ++k)
    std::printf(" %s %.2f (%.0f%%, %.0f calls)", prof::kind_name(prof::Kind(k)),
                1e3 * r.kernels.seconds[k] / double(r.steps), 100 * r.kernels.seconds[k] / r.seconds,
                double(r.kernels.calls[k]) / double(r.steps));
  const double rest = r.seconds - r.kernels.total_seconds();
  std::printf(" framework %.2f (%.0f%%); step %.2f\n", 1e3 * rest / double(r.steps), 100 * rest / r.seconds,
              1e3 * r.seconds / double(r.steps));
  std::printf("  top kernels (ms/step, calls/step):");
  for (size_t i = 0; i < r.labels.size() && i < 12; ++i)
    std::printf("%s %s %.2f/%.0f", i ? "," : "", r.labels[i].label.c_str(), 1e3 * r.labels[i].seconds / double(r.steps),
                double(r.labels[i].calls) / double(r.steps));
  std::printf("\n");
  std::fflush(stdout);
}

// MB a variant's step may use: --mem-limit-mb, else what the host has free less the block cache (CPU) or 90 % of
// the GPU's memory (the caching allocator keeps the rest for fragmentation).
double memory_limit_mb(const BenchTrainArgs& o, Device dev) {
  if (o.mem_limit_mb > 0) return o.mem_limit_mb;
  if (dev == Device::CUDA) return 0.9 * double(cuda_device_info().total_bytes) / (1024.0 * 1024.0);
  return std::max(0.0, available_memory_bytes() / (1024.0 * 1024.0) - kCacheMb);
}

// A variant whose step would not fit is reported as skipped instead of being killed by the OOM killer together
// with the rest of the table (prefix mode stores (B, H, b, b, f) per step).
void print_skip(const BenchTrainArgs& o, const RunConfig& cfg, const Variant& v, int t, double need_mb,
                double limit_mb) {
  const std::string why = "a step needs about " + std::to_string(int64_t(need_mb)) + " MB (a batch-1 probe " +
                          "times " + std::to_string(cfg.train.batch_size) + "), " + std::to_string(int64_t(limit_mb)) +
                          " MB " + (o.mem_limit_mb > 0 ? "allowed (--mem-limit-mb)" : "available");
  if (o.json) {
    nlohmann::ordered_json j = {{"bench", "train"}, {"config", o.config}, {"variant", v.name},
                                {"mode", ttt::mode_name(v.mode)}, {"path", ttt::path_name(v.path)},
                                {"K", v.k}, {"threads", t}, {"skipped", why},
                                {"estimated_mb", need_mb}, {"limit_mb", limit_mb}};
    std::cout << j.dump() << std::endl;
  } else {
    std::printf("%-10s %2d %7d skipped: %s\n", v.name.c_str(), v.k, t, why.c_str());
    std::fflush(stdout);
  }
}

void print_header(const BenchTrainArgs& o, const RunConfig& cfg, Device dev) {
  const MachineInfo mi = machine_info();
  std::printf("bench train: %s (d %lld, %lld layers, %lld heads, inner %s), batch %lld x seq %lld, %lld timed "
              "steps after 1 warm-up%s, on %s (%d CPUs; OpenBLAS %s kernels; OpenMP %s); commit %s, %s build\n",
              cfg.source.c_str(), (long long)cfg.model.d, (long long)cfg.model.layers, (long long)cfg.model.heads,
              cfg.model.inner.c_str(), (long long)cfg.train.batch_size, (long long)cfg.train.seq_len,
              (long long)o.steps,
              o.reps > 1 ? (", the fastest of " + std::to_string(o.reps) + " repetitions").c_str() : "",
              mi.cpu_model.c_str(), mi.nproc, mi.blas_core.c_str(), mi.omp_wait.c_str(),
              git_commit(), build_type());
  if (dev == Device::CUDA)
    std::printf("device %s; %%sgemm = of a cuBLAS f32 %d^3 GEMM, peak MB = the GPU's tensor peak\n",
                describe_device(dev).c_str(), kCublasN);
  std::printf("parameters and activations float32; matmul operands %s (tensor/precision.h)%s\n",
              precision_name(matmul_precision()),
              dev == Device::CPU && matmul_precision() != MatmulPrecision::F32
                  ? (std::string(": on the CPU ") + cpu::matmul_path(matmul_precision())).c_str()
                  : "");
  std::printf("GFLOP/s = engine FLOP counters (forward + backward + optimiser) / wall time; time and FLOP shares "
              "split the same steps; others = CPUs busy in other processes.\n");
  if (dev == Device::CPU)
    std::printf("peak MB = the process's peak resident memory while the variant ran; base MB = resident before its "
                "trainer existed (code, libraries, data): the step's own memory is the difference.\n");
  else  // the host queues kernels ahead of the GPU and waits only where it reads a number
    std::printf("fwd, bwd, optim = the host's time in each phase: the GPU's work lands in the phase that waits for it "
                "(a micro-batch's loss, the gradient norm in optim, so part of the backward shows under optim); "
                "--profile books device time by kernel.\n");
}

void run_bench_train(const BenchTrainArgs& o) {
  const Device dev = use_device(o.device);
  const MatmulPrecisionScope precision(parse_matmul_precision(o.precision, "bench train: --precision"));
  const RunConfig cfg = load_config(resolve_config(o.config));
  const Dataset ds = load_dataset(cfg.data);
  std::vector<Variant> variants;
  for (const std::string& v : o.variants) variants.push_back(parse_variant(v));
  const int saved_threads = cpu::num_threads();
  prof::set_enabled(o.profile);
  if (!o.json) print_header(o, cfg, dev);
  const double peak_bf16 = dev == Device::CUDA ? cuda_device_info().peak_bf16_dense_gflops : 0.0;
  // On the GPU the host's thread count hardly matters: one pass at the current count.
  const std::vector<int> threads = dev == Device::CUDA ? std::vector<int>{saved_threads} : o.threads;
  int busy_rows = 0;
  for (int t : threads) {
    cpu::set_num_threads(t);
    const double sgemm = reference_gflops(dev);
    if (!o.json) {
      std::printf("\n%d thread(s): %s %.1f GFLOP/s\n", t,
                  dev == Device::CUDA ? "cuBLAS f32 GEMM 4096^3" : "sgemm 512^3", sgemm);
      std::printf("%-10s %2s %7s %9s %8s %8s %8s %8s %6s %6s %6s %7s %6s %6s %6s\n", "variant", "K", "threads",
                  "tok/s", "GFLOP/s", "%sgemm", "peak MB", "base MB", "fwd", "bwd", "optim", "matmul", "elem", "reduce",
                  "others");
    }
    for (const Variant& v : variants) {
      const double need_mb = estimate_step_mb(cfg, ds, v, dev);
      const double limit_mb = memory_limit_mb(o, dev);
      if (limit_mb > 0 && need_mb > limit_mb) {
        print_skip(o, cfg, v, t, need_mb, limit_mb);
        continue;
      }
      Row row = run_variant(cfg, ds, v, t, o.steps, o.reps, dev);
      row.estimated_mb = need_mb;
      busy_rows += row.other_cpus > kBusyCpus;
      o.json ? print_json(row, o, cfg, sgemm, peak_bf16) : print_text(row, sgemm, peak_bf16);
      if (o.profile && !o.json) print_profile(row);
    }
  }
  cpu::set_num_threads(saved_threads);
  if (busy_rows > 0)
    std::fprintf(stderr, "bench train: warning: other processes used more than %.2f CPUs during %d rows; rerun on a "
                 "quiet machine\n", kBusyCpus, busy_rows);
}

}  // namespace
}  // namespace cmd_bench_train

void register_bench_train(CLI::App& bench) {
  using namespace cmd_bench_train;
  auto opts = std::make_shared<BenchTrainArgs>();
  CLI::App* sub = bench.add_subcommand("train", "Training tokens/s, GFLOP/s, sgemm fraction and peak RSS per variant");
  sub->add_option("--config", opts->config, "tiny, small, ci or a config file")->capture_default_str();
  sub->add_option("--threads-list", opts->threads, "Comma-separated thread counts to run with")
      ->delimiter(',')
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--steps", opts->steps, "Timed optimiser steps per repetition (after one warm-up step)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--reps", opts->reps,
                  "Timed repetitions of --steps steps per variant; the fastest is reported (JSON: every one's "
                  "tokens/s in tokens_per_s_reps)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--variants", opts->variants,
                  "Comma-separated variants to run: dual, dual-units (the dual form with its one-unit "
                  "kernel called unit by unit instead of the backend's scan kernel), dual-loop (the dual form as one "
                  "op per unit instead of one scan op per chunk), dual-composed (the dual form "
                  "with the fused TTT mini-batch "
                  "kernel off: its composition of ops, the reference), dual-only (the dual form's kernels alone fused: the norms, "
                  "gated products and AdamW as compositions), iter-K (iterative path, carry mode; "
                  "iterative = iter-1), prefix-K (iterative path, prefix mode), prefix-closed-K (prefix mode, dual path: "
                  "closed-form inner gradients), prefix-composed-K (the same with its K-step kernel off: the "
                  "composition of ops, the reference)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--mem-limit-mb", opts->mem_limit_mb,
                  "Skip a variant whose estimated step memory exceeds this many MB (default: MemAvailable less "
                  "the 1 GiB block cache)")
      ->check(kPositive);
  sub->add_flag("--json", opts->json, "One JSON object per line instead of a table");
  add_device_option(sub, opts->device);
  sub->add_option("--precision", opts->precision,
                  "Float32 matmul operands: f32, tf32 (10-bit mantissa) or bf16 (7-bit), accumulated in float32; on "
                  "the GPU the tensor cores; on the CPU bf16 dot products where it has AVX512-BF16, else f32 GEMMs on "
                  "rounded copies (a reference, slower)")
      ->check(CLI::IsMember({"f32", "tf32", "bf16"}))
      ->capture_default_str();
  sub->add_flag("--profile", opts->profile,
                "Also time the kernels by kind (matmul, element-wise, fused, reduction, copy, allocation) and "
                "report the rest as framework time");
  sub->callback([opts] { run_bench_train(*opts); });
}

PONDER_SUBCOMMAND(bench, train, register_bench_train);

}  // namespace ponder::cli
