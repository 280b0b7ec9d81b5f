// `ponder bench matmul`: GEMM throughput of the engine's raw::matmul, used as the forward product and as
// the two products the autograd rule computes in backward (transposed views, which the engine hands to
// BLAS without copying), against direct cblas_sgemm calls on the same buffers. Every output is checked
// against the naive reference before anything is timed, where the reference is affordable. With --precision
// bf16 or tf32 the engine's products round their operands (tensor/precision.h) and are checked against the naive
// product of rounded operands, while the sgemm column stays the float32 product they stand in for.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/kernels.h"
#include "tensor/precision.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace cmd_bench {
namespace {

constexpr double kMinRepSeconds = 0.05;
constexpr double kTolerance = 1e-3;               // max |out − ref| relative to max |ref|
constexpr double kBusyCpus = 0.2;                 // "others" above this flags a row as disturbed
constexpr int64_t kMaxChecked = 512 * 512 * 512;  // batch·m·k·n beyond which the naive reference is too slow

// batch × [m×k]·[k×n]; batch 1 means plain 2-D operands.
struct Case {
  std::string name;
  int64_t batch, m, k, n;
};

const std::vector<Case> kCases = {
    {"256x256x256", 1, 256, 256, 256},
    {"512x512x512", 1, 512, 512, 512},
    {"1024x1024x1024", 1, 1024, 1024, 1024},
    // The small config's gated MLP: 8 × 256 tokens, d 256, hidden 704 (its backward's bwd_b sums over the tokens).
    {"2048x256x704", 1, 2048, 256, 704},
    // TTT inner loop of the tiny config: batch 4 × 2 heads × 8 mini-batches of [16×64]·[64×64].
    {"64x(16x64x64)", 64, 16, 64, 64},
};

// One product as the engine sees it (x·y on views) and as BLAS sees it (trans flags and leading dims
// over the same contiguous buffers).
struct Gemm {
  const char* op;
  Tensor x, y;  // engine operands, possibly transposed views
  CBLAS_TRANSPOSE tx, ty;
  int rows, cols, inner, ldx, ldy;
};

Tensor operand(Generator& gen, int64_t batch, int64_t rows, int64_t cols) {
  return batch == 1 ? gen.uniform({rows, cols}, -1, 1) : gen.uniform({batch, rows, cols}, -1, 1);
}

// fwd: a·b; bwd_a: g·bᵀ (gradient of a); bwd_b: aᵀ·g (gradient of b).
std::vector<Gemm> products(const Case& c, Generator& gen) {
  const Tensor a = operand(gen, c.batch, c.m, c.k), b = operand(gen, c.batch, c.k, c.n);
  const Tensor g = operand(gen, c.batch, c.m, c.n);
  const int m = int(c.m), k = int(c.k), n = int(c.n);
  return {
      {"fwd", a, b, CblasNoTrans, CblasNoTrans, m, n, k, k, n},
      {"bwd_a", g, raw::transpose(b, -1, -2), CblasNoTrans, CblasTrans, m, k, n, n, n},
      {"bwd_b", raw::transpose(a, -1, -2), g, CblasTrans, CblasNoTrans, k, n, m, k, n},
  };
}

Tensor out_like(const Gemm& p, int64_t batch) {
  return batch == 1 ? Tensor::empty({p.rows, p.cols}) : Tensor::empty({batch, p.rows, p.cols});
}

// Direct BLAS on the operands' storage: one sgemm per batch element, the loop over the batch either
// serial (BLAS may still thread inside a call) or split across OpenMP threads.
void sgemm_batch(const Gemm& p, int64_t batch, const Tensor& out, bool omp_loop) {
  // A transposed view starts where its base buffer starts, so data() is the buffer BLAS reads.
  const float* x = p.x.data<float>();
  const float* y = p.y.data<float>();
  float* c = out.data<float>();
  const int64_t sx = int64_t(p.rows) * p.inner, sy = int64_t(p.inner) * p.cols, sc = int64_t(p.rows) * p.cols;
#pragma omp parallel for schedule(static) if (omp_loop)
  for (int64_t bi = 0; bi < batch; ++bi)
    cblas_sgemm(CblasRowMajor, p.tx, p.ty, p.rows, p.cols, p.inner, 1.0f, x + bi * sx, p.ldx, y + bi * sy, p.ldy,
                0.0f, c + bi * sc, p.cols);
}

double check(const char* who, const Gemm& p, const Case& c, int threads, const Tensor& out, const Tensor& ref) {
  const double err = max_rel_err(out, ref);
  if (!(err <= kTolerance)) {
    char msg[256];
    std::snprintf(msg, sizeof msg, "bench matmul: %s %s on %s with %d threads differs from the naive reference: "
                  "max relative error %.3g > %.0e", who, p.op, c.name.c_str(), threads, err, kTolerance);
    throw std::runtime_error(msg);
  }
  return err;
}

struct Row {
  const Case* c;
  const char* op;
  int threads;
  Rate engine, sgemm;
  std::optional<Rate> sgemm_omp;  // batched shapes only
  std::optional<double> err;      // worst checked error, when checked
  double other_cpus = 0;          // CPUs other processes kept busy while this row was timed
};

struct MatmulBenchArgs {
  std::string device = "cpu";
  std::vector<int> threads{1, 2};
  int reps = 5;
  bool json = false;
  std::string precision = "f32";  // the engine's float32 matmul operands (tensor/precision.h)
};

// Which CPU path the engine's products take at this precision (tensor/cpu/matmul.cpp).
const char* engine_kernel(const MatmulBenchArgs& o) {
  return cpu::matmul_path(parse_matmul_precision(o.precision, "bench matmul: --precision"));
}

// The naive product of x's and y's values rounded as `prec` rounds matmul operands (float32 values as they are).
Tensor rounded_reference(const Gemm& p, int64_t batch, MatmulPrecision prec) {
  auto rounded = [&](const Tensor& t) {
    std::vector<double> v = raw::contiguous(t).to_vector();
    for (double& x : v) x = round_mantissa(float(x), mantissa_bits(prec));
    return Tensor::from_vector(v, t.shape(), DType::F32);
  };
  Tensor ref = out_like(p, batch);
  cpu::matmul_naive(ref, rounded(p.x), rounded(p.y));
  return ref;
}

void print_json(const Row& r, const MatmulBenchArgs& o, const MachineInfo& mi) {
  nlohmann::ordered_json j = {
      {"bench", "matmul"}, {"shape", r.c->name}, {"batch", r.c->batch}, {"m", r.c->m}, {"k", r.c->k},
      {"n", r.c->n}, {"op", r.op}, {"dtype", "f32"}, {"precision", o.precision},
      {"engine_kernel", engine_kernel(o)}, {"device", o.device}, {"threads", r.threads},
      {"engine_gflops", r.engine.best / 1e9}, {"sgemm_gflops", r.sgemm.best / 1e9},
      {"ratio", r.engine.best / r.sgemm.best}, {"engine_gflops_median", r.engine.median / 1e9},
      {"sgemm_gflops_median", r.sgemm.median / 1e9}, {"sgemm_omp_gflops", nullptr}, {"timing", "best"},
      {"reps", o.reps}, {"min_rep_ms", kMinRepSeconds * 1e3}, {"checked", r.err.has_value()},
      {"max_rel_err", nullptr}, {"other_cpus", r.other_cpus}, {"nproc", mi.nproc}, {"cpu_model", mi.cpu_model},
      {"blas", mi.blas}, {"commit", git_commit()}, {"build_type", build_type()}, {"version", version()}};
  if (r.sgemm_omp) j["sgemm_omp_gflops"] = r.sgemm_omp->best / 1e9;
  if (r.err) j["max_rel_err"] = *r.err;
  std::cout << j.dump() << std::endl;  // flushed per line so a long run can be followed
}

void print_text_header(const MatmulBenchArgs& o, const MachineInfo& mi) {
  std::printf("matmul f32 on %s (%d CPUs), %s\ncommit %s, %s build\n", mi.cpu_model.c_str(), mi.nproc,
              mi.blas.c_str(), git_commit(), build_type());
  if (o.precision != "f32")
    std::printf("engine: operands rounded to %s, float32 sums (%s), checked against the rounded operands' naive "
                "product; sgemm: float32\n", o.precision.c_str(), engine_kernel(o));
  std::printf("GFLOP/s = 2*m*k*n*batch / time, best of %d reps of >= %.0f ms each; ratio = engine / sgemm.\n"
              "sgemm loops serially over a batch; sgemm-omp splits that loop over OpenMP threads.\n"
              "checked: outputs matched the naive reference within %.0e (larger shapes are not checked).\n"
              "others: CPUs kept busy by other processes while the row was timed (should be near 0).\n\n",
              o.reps, kMinRepSeconds * 1e3, kTolerance);
  std::printf("%-16s %-6s %7s %10s %10s %7s %10s %8s %7s\n", "shape", "op", "threads", "engine", "sgemm", "ratio",
              "sgemm-omp", "checked", "others");
}

void print_text(const Row& r) {
  char omp[16] = "-";
  if (r.sgemm_omp) std::snprintf(omp, sizeof omp, "%.1f", r.sgemm_omp->best / 1e9);
  std::printf("%-16s %-6s %7d %10.1f %10.1f %7.2f %10s %8s %7.2f\n", r.c->name.c_str(), r.op, r.threads,
              r.engine.best / 1e9, r.sgemm.best / 1e9, r.engine.best / r.sgemm.best, omp, r.err ? "yes" : "no",
              r.other_cpus);
  std::fflush(stdout);
}

void run_matmul(const MatmulBenchArgs& o) {
  const MatmulPrecision prec = parse_matmul_precision(o.precision, "bench matmul: --precision");
  if (o.device == "cuda") return run_bench_matmul_cuda(o.reps, prec, o.json);
  const MachineInfo mi = machine_info();
  const int saved_threads = cpu::num_threads();
  if (!o.json) print_text_header(o, mi);
  Generator gen(0);
  int busy_rows = 0;
  auto engine = [&](const Gemm& p) {
    const MatmulPrecisionScope scope(prec);
    return raw::matmul(p.x, p.y);
  };
  for (const Case& c : kCases) {
    const double flops = 2.0 * double(c.batch * c.m * c.k * c.n);
    const bool checkable = c.batch * c.m * c.k * c.n <= kMaxChecked;
    for (const Gemm& p : products(c, gen)) {
      Tensor ref, ref_engine;
      if (checkable) {
        ref = out_like(p, c.batch);
        cpu::matmul_naive(ref, p.x, p.y);
        ref_engine = prec == MatmulPrecision::F32 ? ref : rounded_reference(p, c.batch, prec);
      }
      for (int t : o.threads) {
        cpu::set_num_threads(t);
        Row row{&c, p.op, t, {}, {}, {}, {}};
        const Tensor out = out_like(p, c.batch);
        if (checkable) {
          double err = check("engine", p, c, t, engine(p), ref_engine);
          sgemm_batch(p, c.batch, out, false);
          err = std::max(err, check("sgemm", p, c, t, out, ref));
          if (c.batch > 1) {
            sgemm_batch(p, c.batch, out, true);
            err = std::max(err, check("sgemm-omp", p, c, t, out, ref));
          }
          row.err = err;
        }
        const OtherLoad load;
        row.engine = measure([&] { engine(p); }, flops, o.reps, kMinRepSeconds);
        row.sgemm = measure([&] { sgemm_batch(p, c.batch, out, false); }, flops, o.reps, kMinRepSeconds);
        if (c.batch > 1)
          row.sgemm_omp = measure([&] { sgemm_batch(p, c.batch, out, true); }, flops, o.reps, kMinRepSeconds);
        row.other_cpus = load.cpus();
        busy_rows += row.other_cpus > kBusyCpus;
        o.json ? print_json(row, o, mi) : print_text(row);
      }
    }
  }
  cpu::set_num_threads(saved_threads);
  if (busy_rows > 0)
    std::fprintf(stderr, "bench matmul: warning: other processes used more than %.2f CPUs during %d rows; their "
                 "timings understate both engine and sgemm (rerun on a quiet machine)\n", kBusyCpus, busy_rows);
}

}  // namespace
}  // namespace cmd_bench

void register_bench(CLI::App& app) {
  using namespace cmd_bench;
  CLI::App* bench = app.add_subcommand("bench", "Micro-benchmarks of engine kernels against their references");
  bench->require_subcommand(1);
  auto opts = std::make_shared<MatmulBenchArgs>();
  CLI::App* mm = bench->add_subcommand("matmul", "GEMM GFLOP/s: engine (forward and backward products) vs sgemm");
  mm->add_option("--device", opts->device, "Device to benchmark")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  mm->add_option("--threads-list", opts->threads, "Comma-separated thread counts to run with")
      ->delimiter(',')
      ->check(kPositive)
      ->capture_default_str();
  mm->add_option("--reps", opts->reps, "Timed repetitions per measurement (best is reported)")
      ->check(kPositive)
      ->capture_default_str();
  mm->add_flag("--json", opts->json, "One JSON object per line instead of a table");
  mm->add_option("--precision", opts->precision,
                 "The engine's float32 products with operands rounded to tf32 or bf16 and f32 sums (CUDA: tensor "
                 "cores; CPU: AVX512-BF16 dot products where the CPU has them, else sgemm on rounded copies)")
      ->check(CLI::IsMember({"f32", "tf32", "bf16"}))
      ->capture_default_str();
  mm->callback([opts] { run_matmul(*opts); });
}

PONDER_COMMAND(bench, register_bench);

}  // namespace ponder::cli
