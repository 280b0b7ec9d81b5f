// `ponder bench dual`: the fused TTT-Linear dual-form kernel on one mini-batch of every head, forward and backward,
// at a model's shape (default: the 125M config's at batch 16: 16 × 12 heads, mini-batch 16, head dim 64), in µs per
// call and GFLOP/s from the engine's own FLOP counts. On a GPU every result is first checked against the CPU kernel,
// then the kernel's variants are timed (a head's intermediates in the block's shared memory at each unroll of the
// products, with 2 × 2 tiles of outputs and with the products on the tensor cores; in global memory), and the backward phase by phase: the kernel run with
// only its first n phases, n = 0 … all, so each phase's cost is the difference of two rows measured in the same run.
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <tuple>

#include "autograd/fused.h"
#include "experiments/bench/dual_options.h"
#include "experiments/bench/mlp_dual.h"
#include "experiments/bench/scan_dual.h"
#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/model/device.h"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/ttt_dual_body.h"
#include "tensor/flops.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace cmd_bench_dual {
namespace {

constexpr double kMinRepSeconds = 0.05;
constexpr double kEps = 1e-5;
constexpr double kTolerance = 1e-3;  // float32 against the CPU kernel, relative to the largest value


// W (B, H, f, f), bias (B, H, 1, f), xq, xk, xv (B, H, b, f), η (B, H, b, b) lower triangle, γ, β (1, H, 1, f), as a
// TTT-Linear layer passes them (xq, xk, xv as views of (B, b, H, f) projections: rows H·f apart, as a mini-batch's
// slice of the (B, H, N, f) heads); the upstream dy of the packed output.
struct Operands {
  Tensor W, bias, xq, xk, xv, eta, gamma, beta, dy;
};

Operands make(const DualBenchOptions& o) {
  Generator gen(7);
  const int64_t B = o.batch, H = o.heads, b = o.mini_batch, f = o.head_dim;
  auto n = [&](Shape s, double sd, double mean = 0) { return gen.normal(s, mean, sd, DType::F32); };
  auto proj = [&] { return raw::permute(n({B, b, H, f}, 1), {0, 2, 1, 3}); };
  Operands x{n({B, H, f, f}, 0.02), n({B, H, 1, f}, 0.02), proj(), proj(), proj(),
             gen.uniform({B, H, b, b}, 0, 1.0 / double(b), DType::F32),
             n({1, H, 1, f}, 0.1, 1), n({1, H, 1, f}, 0.1), Tensor()};
  x.dy = n({B, H, b + f + 1, f}, 1);
  return x;
}

Operands to(const Operands& x, Device d) {
  auto t = [d](const Tensor& v) { return raw::to_device_keep_layout(v, d); };  // views stay views
  return {t(x.W), t(x.bias), t(x.xq), t(x.xk), t(x.xv), t(x.eta), t(x.gamma), t(x.beta), t(x.dy)};
}

struct Outputs {
  Tensor y, saved;
  std::array<Tensor, 8> grads;
};

Outputs run(const Operands& x) {
  Outputs r;
  std::tie(r.y, r.saved) = raw::ttt_linear_dual(x.W, x.bias, x.xq, x.xk, x.xv, x.eta, x.gamma, x.beta, kEps);
  r.grads = raw::ttt_linear_dual_backward(x.W, x.bias, x.xq, x.xk, x.xv, x.eta, x.gamma, x.beta, r.saved, x.dy, kEps);
  return r;
}

// The largest relative error of any output against the CPU kernel's; throws past the tolerance, naming it.
double check(const Outputs& got, const Outputs& want, const std::string& mode) {
  static const char* const names[8] = {"dW", "dbias", "dxq", "dxk", "dxv", "deta", "dgamma", "dbeta"};
  double worst = 0;
  auto one = [&](const Tensor& g, const Tensor& w, const std::string& name) {
    worst = std::max(worst, checked_rel_err(g, w, kTolerance, "bench dual: " + name + " (" + mode + ")"));
  };
  one(got.y, want.y, "y");
  one(got.saved, want.saved, "saved intermediates");
  for (size_t i = 0; i < 8; ++i) one(got.grads[i], want.grads[i], names[i]);
  return worst;
}

// FLOPs the engine counts for one forward and one backward call: the fused op's rules (autograd/fused.h), as a
// training step books them.
std::pair<double, double> counted_flops(const Operands& x) {
  const bool bcast = x.gamma.shape() != x.xq.shape();
  FlopScope fs;
  for (int phase = 0; phase < 4; ++phase) fused::count(FusedOp::TttLinearDual, fused::dual_sizes(x.xq), bcast, phase);
  const double fwd = double(fs.counts().total());
  fused::count(FusedOp::TttLinearDualBackward, fused::dual_sizes(x.xq), bcast);
  return {fwd, double(fs.counts().total()) - fwd};
}

struct Row {
  std::string pass, mode;
  int phases;  // -1: all
  double us, gflops, err;  // err < 0: not checked (a partial kernel)
};

void print(const Row& r, const DualBenchOptions& o, const std::string& where, bool json) {
  if (json) {
    using J = nlohmann::ordered_json;
    J j = {{"bench", "dual"}, {"pass", r.pass}, {"scratch", r.mode},
           {"phases", r.phases < 0 ? J("all") : J(r.phases)}, {"us_per_call", r.us}, {"gflops", r.gflops},
           {"max_rel_err", nullptr}, {"batch", o.batch}, {"heads", o.heads}, {"mini_batch", o.mini_batch},
           {"head_dim", o.head_dim}, {"device", where}, {"commit", git_commit()}, {"build_type", build_type()}};
    if (r.err >= 0) j["max_rel_err"] = r.err;
    std::cout << j.dump() << std::endl;
    return;
  }
  char err[16] = "-";
  if (r.err >= 0) std::snprintf(err, sizeof err, "%.1e", r.err);
  const std::string ph = r.phases < 0 ? "all" : std::to_string(r.phases);
  std::printf("%-9s %-9s %6s %12.1f %10.1f %9s\n", r.pass.c_str(), r.mode.c_str(), ph.c_str(), r.us, r.gflops, err);
  std::fflush(stdout);
}

void run_bench(const DualBenchOptions& o) {
  if (o.units > 0) return run_bench_scan_dual(o);
  if (o.inner == "mlp") return run_bench_mlp_dual(o);
  if (o.check_only && o.device != "cuda")
    throw std::invalid_argument("bench dual: --check-only needs --device cuda (on the CPU the kernel is the reference)");
  const Device d = use_device(o.device);
  const std::string where = describe_device(d);
  const Operands host = make(o), x = to(host, d);
  const Outputs want = run(host);
  const auto [ffwd, fbwd] = counted_flops(host);
  if (!o.json) {
    std::printf("bench dual: TTT-Linear dual form, %lld x %lld heads, mini-batch %lld, head dim %lld, float32, on %s\n"
                "commit %s, %s build\n"
                "us = microseconds per call (all heads), best of %d reps of >= %.0f ms; GFLOP/s from the engine's FLOP "
                "counts (%.3g forward, %.3g backward per call)\n",
                (long long)o.batch, (long long)o.heads, (long long)o.mini_batch, (long long)o.head_dim, where.c_str(),
                git_commit(), build_type(), o.reps, kMinRepSeconds * 1e3, ffwd, fbwd);
    if (d == Device::CUDA)
      std::printf("scratch: a head's intermediates in the block's shared memory or in global memory, /uN: N outputs "
                  "in flight per thread in the products, /tiles: 2 x 2 tiles of outputs sharing their loads, /mma: the "
                  "products on the tensor cores (three TF32 products a term); checked: "
                  "max error against the CPU kernel, relative to its largest value\n");
    std::printf("\n%-9s %-9s %6s %12s %10s %9s\n", "pass", "scratch", "phases", "us/call", "GFLOP/s", "checked");
  }
  auto time = [&](const std::function<void()>& fn) {
    return 1e6 / measure_on(d, fn, 1.0, o.reps, kMinRepSeconds).best;
  };
  auto fwd = [&] { raw::ttt_linear_dual(x.W, x.bias, x.xq, x.xk, x.xv, x.eta, x.gamma, x.beta, kEps); };
  if (d == Device::CPU) {
    const Tensor saved = want.saved;
    auto bwd = [&] {
      raw::ttt_linear_dual_backward(x.W, x.bias, x.xq, x.xk, x.xv, x.eta, x.gamma, x.beta, saved, x.dy, kEps);
    };
    const double tf = time(fwd), tb = time(bwd);
    print({"forward", "-", -1, tf, ffwd / tf / 1e3, -1}, o, where, o.json);
    print({"backward", "-", -1, tb, fbwd / tb / 1e3, -1}, o, where, o.json);
    return;
  }
  const CudaDualOptions keep = cuda_dual_options();
  struct Restore {
    CudaDualOptions o;
    ~Restore() { cuda_set_dual_options(o); }
  } restore{keep};
  // Shared scratch at each unroll, then global scratch at the run's unroll; the backward phase by phase at the
  // run's settings (cuda_dual_options: the default or PONDER_CUDA_DUAL_UNROLL).
  const std::vector<std::pair<bool, int>> variants = {
      {true, 1}, {true, 2}, {true, 4}, {true, kDualTiles}, {true, kDualMma}, {false, keep.unroll}};
  for (const auto& [shared, unroll] : variants) {
    CudaDualOptions opt = keep;
    opt.shared_scratch = shared;
    opt.unroll = unroll;
    cuda_set_dual_options(opt);
    const std::string mode = std::string(shared ? "shared" : "global") +
                             (unroll == kDualTiles ? "/tiles"
                              : unroll == kDualMma ? "/mma"
                                                   : "/u" + std::to_string(unroll));
    const Outputs got = run(x);
    const double err = check(got, want, mode);
    if (o.check_only) {  // under compute-sanitizer, say: each variant run once, no timing
      print({"checked", mode, -1, 0, 0, err}, o, where, o.json);
      continue;
    }
    auto bwd = [&] {
      raw::ttt_linear_dual_backward(x.W, x.bias, x.xq, x.xk, x.xv, x.eta, x.gamma, x.beta, got.saved, x.dy, kEps);
    };
    const double tf = time(fwd), tb = time(bwd);
    print({"forward", mode, -1, tf, ffwd / tf / 1e3, err}, o, where, o.json);
    print({"backward", mode, -1, tb, fbwd / tb / 1e3, err}, o, where, o.json);
    if (!o.phases || !shared || unroll != keep.unroll) continue;
    for (int n = 0; n < cuda::dual::kBackwardPhases; ++n) {  // the backward cut after phase n (0: the launch alone)
      opt.backward_phases = n;
      cuda_set_dual_options(opt);
      print({"backward", mode, n, time(bwd), 0, -1}, o, where, o.json);
    }
  }
}

}  // namespace
}  // namespace cmd_bench_dual

void register_bench_dual(CLI::App& bench) {
  using namespace cmd_bench_dual;
  auto opts = std::make_shared<DualBenchOptions>();
  CLI::App* sub = bench.add_subcommand(
      "dual", "The fused TTT dual-form kernel (TTT-Linear, or TTT-MLP with --inner mlp): us per call, GFLOP/s, checked "
              "against the CPU, phase by phase");
  sub->add_option("--device", opts->device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  sub->add_option("--batch", opts->batch, "Sequences")->check(kPositive)->capture_default_str();
  sub->add_option("--heads", opts->heads, "Heads")->check(kPositive)->capture_default_str();
  sub->add_option("--mini-batch", opts->mini_batch, "Tokens per mini-batch (b)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--head-dim", opts->head_dim, "Head dimension (f)")->check(kPositive)->capture_default_str();
  sub->add_option("--inner", opts->inner, "Inner model: linear (TTT-Linear) or mlp (TTT-MLP; no phase rows)")
      ->check(CLI::IsMember({"linear", "mlp"}))
      ->capture_default_str();
  sub->add_option("--hidden", opts->hidden, "TTT-MLP's hidden width (default 4 x head dim)")->check(kPositive);
  sub->add_option("--units", opts->units,
                  "The dual form over this many units (mini-batches) per call, as a layer's scan runs it: the backend's "
                  "scan kernel against the one-unit kernel called unit by unit")
      ->check(kPositive);
  sub->add_option("--reps", opts->reps, "Timed repetitions per row (best is reported)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_flag("!--no-phases", opts->phases, "Leave out the backward's phase-by-phase rows (GPU)");
  sub->add_flag("--check-only", opts->check_only,
                "Run each GPU variant once against the CPU kernel, without timing (for compute-sanitizer)");
  sub->add_flag("--json", opts->json, "One JSON object per line instead of a table");
  sub->callback([opts] { run_bench(*opts); });
}

PONDER_SUBCOMMAND(bench, dual, register_bench_dual);

}  // namespace ponder::cli
