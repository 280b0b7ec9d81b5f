// `ponder bench matmul --device cuda`: GEMM throughput of the engine's raw::matmul on the GPU (the forward
// product and the two products of its backward rule, which reach cuBLAS as transposed views without
// copies) next to one textbook cuBLAS call of the same shape on contiguous buffers and the device's
// CUDA-core peak. Every engine output is checked against the CPU product first, where affordable.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/model/device.h"
#include "tensor/cuda/cuda.h"
#include "tensor/kernels.h"
#include "tensor/precision.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace cmd_bench_cuda {
namespace {

constexpr double kMinRepSeconds = 0.05;
constexpr int64_t kMaxChecked = int64_t(1) << 31;  // batch·m·k·n beyond which the CPU product takes too long

// batch × [m×k]·[k×n]; batch 1 means plain 2-D operands.
struct Case {
  std::string name;
  int64_t batch, m, k, n;
};

const std::vector<Case> kCases = {
    {"1024x1024x1024", 1, 1024, 1024, 1024},
    {"2048x2048x2048", 1, 2048, 2048, 2048},
    {"4096x4096x4096", 1, 4096, 4096, 4096},
    {"8192x8192x8192", 1, 8192, 8192, 8192},
    // TTT inner loop of the tiny config (batch 4 × 2 heads × 8 mini-batches of [16×64]·[64×64]), and larger.
    {"64x(16x64x64)", 64, 16, 64, 64},
    {"1024x(64x64x64)", 1024, 64, 64, 64},
};

// Max error against the CPU product at the same operand precision, relative to its largest value. bf16 operands
// are rounded alike on both sides (tensor/cuda/matmul.cu's conversion is round-to-nearest-even, as on the CPU), so
// only the order of the f32 sums differs; TF32 operands are rounded by the tensor cores, whose rounding may differ.
double check_tolerance(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::F32: return 1e-4;
    case MatmulPrecision::TF32: return 1e-2;
    case MatmulPrecision::BF16: return 1e-3;
  }
  return 1e-4;
}

Shape dims(int64_t batch, int64_t rows, int64_t cols) {
  return batch == 1 ? Shape{rows, cols} : Shape{batch, rows, cols};
}

struct Product {
  const char* op;
  Tensor x, y;            // engine operands, possibly transposed views
  int64_t rows, inner, cols;
};

Tensor operand(Generator& gen, const Case& c, int64_t rows, int64_t cols) {
  return raw::to_device(gen.uniform(dims(c.batch, rows, cols), -1, 1), Device::CUDA);
}

// fwd: a·b; bwd_a: g·bᵀ (gradient of a); bwd_b: aᵀ·g (gradient of b).
std::vector<Product> products(const Case& c, Generator& gen) {
  const Tensor a = operand(gen, c, c.m, c.k), b = operand(gen, c, c.k, c.n), g = operand(gen, c, c.m, c.n);
  return {{"fwd", a, b, c.m, c.k, c.n},
          {"bwd_a", g, raw::transpose(b, -1, -2), c.m, c.n, c.k},
          {"bwd_b", raw::transpose(a, -1, -2), g, c.k, c.m, c.n}};
}

struct Row {
  const Case* c;
  const char* op;
  Rate engine, cublas;
  std::optional<double> err;
};

struct Setup {
  int reps;
  bool json;
  double peak_gflops;  // 0: unknown
  std::string device;
};

void print_json(const Row& r, const Setup& s) {
  nlohmann::ordered_json j = {
      {"bench", "matmul"}, {"shape", r.c->name}, {"batch", r.c->batch}, {"m", r.c->m}, {"k", r.c->k},
      {"n", r.c->n}, {"op", r.op}, {"dtype", "f32"}, {"device", "cuda"},
      {"matmul_precision", precision_name(matmul_precision())},
      {"engine_gflops", r.engine.best / 1e9}, {"cublas_gflops", r.cublas.best / 1e9},
      {"ratio", r.engine.best / r.cublas.best}, {"engine_gflops_median", r.engine.median / 1e9},
      {"cublas_gflops_median", r.cublas.median / 1e9}, {"peak_gflops", nullptr}, {"timing", "best"},
      {"reps", s.reps}, {"min_rep_ms", kMinRepSeconds * 1e3}, {"checked", r.err.has_value()},
      {"max_rel_err", nullptr}, {"gpu", s.device}, {"commit", git_commit()}, {"build_type", build_type()},
      {"version", version()}};
  if (s.peak_gflops > 0) j["peak_gflops"] = s.peak_gflops;
  if (r.err) j["max_rel_err"] = *r.err;
  std::cout << j.dump() << std::endl;
}

void print_text(const Row& r, const Setup& s) {
  char peak[16] = "unknown";
  if (s.peak_gflops > 0) std::snprintf(peak, sizeof peak, "%.1f%%", 100 * r.engine.best / 1e9 / s.peak_gflops);
  char err[16] = "-";
  if (r.err) std::snprintf(err, sizeof err, "%.1e", *r.err);
  std::printf("%-16s %-6s %10.1f %10.1f %7.2f %9s %9s\n", r.c->name.c_str(), r.op, r.engine.best / 1e9,
              r.cublas.best / 1e9, r.engine.best / r.cublas.best, peak, err);
  std::fflush(stdout);
}

}  // namespace
}  // namespace cmd_bench_cuda

void run_bench_matmul_cuda(int reps, MatmulPrecision precision, bool json) {
  using namespace cmd_bench_cuda;
  const Device d = use_device("cuda");
  const CudaDeviceInfo info = cuda_device_info();
  const MatmulPrecisionScope scope(precision);  // the CPU reference products below round their operands alike
  const bool f32 = precision == MatmulPrecision::F32;
  Setup s{reps, json, f32 ? info.peak_fp32_gflops : info.peak_bf16_dense_gflops, describe_device(d)};
  const double tolerance = check_tolerance(precision);
  if (!json) {
    std::printf("matmul f32 on %s\ncommit %s, %s build; operands %s, f32 accumulation\n", s.device.c_str(),
                git_commit(), build_type(), precision_name(precision));
    if (s.peak_gflops > 0)
      std::printf("peak: %.0f GFLOP/s (%s)\n", s.peak_gflops,
                  f32 ? "f32 CUDA cores: SMs x lanes x 2 x boost clock"
                      : "dense bf16 tensor cores; TF32 runs at half of it");
    else
      std::printf("peak: unknown (sm_%d%d is not in the table of tensor/cuda/backend.cu)\n", info.cc_major,
                  info.cc_minor);
    std::printf("GFLOP/s = 2*m*k*n*batch / time, best of %d reps of >= %.0f ms, %d calls queued per wait.\n"
                "engine: raw::matmul on the views below (bf16: with the operands' conversion); cublas: one\n"
                "cublasSgemmStridedBatched call of the same shape on contiguous f32 buffers (TF32 as the engine).\n"
                "checked: max error against the CPU product at the same operand precision, relative to its\n"
                "largest value, within %.0e (unchecked where the CPU product is too slow).\n\n",
                reps, kMinRepSeconds * 1e3, kQueuedCalls, tolerance);
    std::printf("%-16s %-6s %10s %10s %7s %9s %9s\n", "shape", "op", "engine", "cublas", "ratio", "of peak",
                "checked");
  }
  Generator gen(0);
  for (const Case& c : kCases) {
    const double flops = 2.0 * double(c.batch * c.m * c.k * c.n);
    for (const Product& p : products(c, gen)) {
      Row row{&c, p.op, {}, {}, {}};
      if (c.batch * c.m * c.k * c.n <= kMaxChecked) {
        const double err = max_rel_err(raw::matmul(p.x, p.y),
                                       raw::matmul(raw::to_device(p.x, Device::CPU), raw::to_device(p.y, Device::CPU)));
        if (!(err <= tolerance))
          throw std::runtime_error("bench matmul: engine " + std::string(p.op) + " on " + c.name +
                                   " differs from the CPU product: max relative error " + std::to_string(err));
        row.err = err;
      }
      const Tensor a = Tensor::empty(dims(c.batch, p.rows, p.inner), DType::F32, d);
      const Tensor b = Tensor::empty(dims(c.batch, p.inner, p.cols), DType::F32, d);
      const Tensor out = Tensor::empty(dims(c.batch, p.rows, p.cols), DType::F32, d);
      raw::copy_(a, p.x);
      raw::copy_(b, p.y);
      row.engine = measure_on(d, [&] { raw::matmul(p.x, p.y); }, flops, reps, kMinRepSeconds);
      row.cublas = measure_on(d, [&] { cuda_gemm_direct(out, a, b); }, flops, reps, kMinRepSeconds);
      json ? print_json(row, s) : print_text(row, s);
    }
  }
}

}  // namespace ponder::cli
