// `ponder bench ops`: memory throughput of the engine's element-wise, reduction, scan and index kernels
// on the CPU or the GPU, next to a plain copy of the same bytes measured in the same run (memcpy, or
// cudaMemcpy device-to-device) and, on a GPU, the device's peak bandwidth. These kernels move far more
// bytes than they compute, so bytes per second against the copy is the number that says how good
// they are. On a GPU every result is checked against the CPU backend before it is timed.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/model/device.h"
#include "tensor/cuda/cuda.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace cmd_bench_ops {
namespace {

constexpr double kMinRepSeconds = 0.05;
constexpr int64_t kRow = 1024;  // row length of the 2-D views (softmax over a vocabulary-sized row, say)

struct BenchOpsArgs {
  std::string device = "cpu";
  std::string dtype = "f32";
  int64_t elements = int64_t(1) << 24;
  int reps = 5;
  bool json = false;
};

// One benchmarked call: `bytes` is the least traffic it needs (every input read once, every output
// written once), the convention under which a copy of n bytes moves 2n.
struct Op {
  std::string name;
  double bytes;
  std::function<Tensor(const std::vector<Tensor>&)> run;  // on {x, y, cond, x2d, row, idx}
};

// Inputs: x, y (n); cond (n, 0/1); x2d (n/kRow, kRow), a view of x; row (kRow); idx (n/kRow, a permutation).
std::vector<Op> ops(int64_t n, size_t es) {
  const double N = double(n) * double(es);
  auto un = [](UnaryOp op) { return [op](const std::vector<Tensor>& t) { return raw::unary(op, t[0]); }; };
  auto red = [](ReduceOp op, std::vector<int64_t> axes) {
    return [op, axes](const std::vector<Tensor>& t) { return raw::reduce(op, t[3], axes, false); };
  };
  return {
      {"clone (copy kernel)", 2 * N, [](const auto& t) { return raw::clone(t[0]); }},
      {"transpose to contiguous", 2 * N, [](const auto& t) { return raw::contiguous(raw::transpose(t[3], 0, 1)); }},
      {"fill", N,
       [](const auto& t) {
         raw::fill_(t[1], 1.0);
         return t[1];
       }},
      {"exp", 2 * N, un(UnaryOp::Exp)},
      {"gelu_tanh", 2 * N, un(UnaryOp::GeluTanh)},
      {"add", 3 * N, [](const auto& t) { return raw::binary(BinaryOp::Add, t[0], t[1]); }},
      {"mul (row broadcast)", 2 * N, [](const auto& t) { return raw::binary(BinaryOp::Mul, t[3], t[4]); }},
      {"where", 4 * N, [](const auto& t) { return raw::where(t[2], t[0], t[1]); }},
      {"sum (all)", N, [](const auto& t) { return raw::reduce(ReduceOp::Sum, t[0], {}, false); }},
      {"sum (rows of 1024)", N, red(ReduceOp::Sum, {1})},
      {"sum (columns)", N, red(ReduceOp::Sum, {0})},
      {"max (rows of 1024)", N, red(ReduceOp::Max, {1})},
      {"cumsum (rows of 1024)", 2 * N, [](const auto& t) { return raw::cumsum(t[3], 1, false); }},
      // Composed of several kernels, so its rate against the ideal 2 bytes per byte shows the cost of not fusing.
      {"softmax (rows of 1024)", 2 * N,
       [](const auto& t) {
         NoGradGuard ng;
         return softmax(t[3], -1);
       }},
      {"index_select (rows)", 2 * N, [](const auto& t) { return raw::index_select(t[3], 0, t[5]); }},
  };
}

// The reference: the same bytes copied by the C library or the CUDA runtime.
void plain_copy(Device d, const Tensor& dst, const Tensor& src) {
  if (d == Device::CUDA) return cuda_memcpy(dst, src);
  std::memcpy(dst.data<char>(), src.data<char>(), size_t(src.numel()) * dtype_size(src.dtype()));
}

void run_ops(const BenchOpsArgs& o) {
  const Device d = use_device(o.device);
  const DType dt = o.dtype == "f64" ? DType::F64 : DType::F32;
  if (o.elements % kRow != 0 || o.elements < kRow)
    throw std::invalid_argument("bench ops: --elements must be a positive multiple of " + std::to_string(kRow));
  const int64_t n = o.elements, rows = n / kRow;
  Generator gen(0);
  auto make = [&](const Tensor& host) { return raw::to_device(raw::to_dtype(host, dt), d); };
  const Tensor x = make(gen.uniform({n}, -2, 2, DType::F64)), y = make(gen.uniform({n}, -2, 2, DType::F64));
  const Tensor cond = make(raw::binary(BinaryOp::Gt, gen.uniform({n}, 0, 1, DType::F64), Tensor::scalar(0.5, DType::F64)));
  const Tensor row = make(gen.uniform({kRow}, -2, 2, DType::F64));
  const Tensor idx = raw::to_device(Tensor::from_ints(gen.permutation(rows), {rows}), d);
  const std::vector<Tensor> in = {x, y, cond, raw::reshape(x, {rows, kRow}), row, idx};
  const double peak = d == Device::CUDA ? cuda_device_info().peak_bandwidth_gbs : 0;
  const std::string where = describe_device(d);

  const Tensor dst = raw::empty_like(x);
  const double copy_bytes = 2.0 * double(n) * double(dtype_size(dt));
  const Rate copy = measure_on(d, [&] { plain_copy(d, dst, x); }, copy_bytes, o.reps, kMinRepSeconds);
  const char* copy_name = d == Device::CUDA ? "cudaMemcpy (device to device)" : "memcpy";
  if (!o.json) {
    const std::string queued = d == Device::CUDA ? " (" + std::to_string(kQueuedCalls) + " calls queued per wait)" : "";
    std::printf("bench ops: %lld %s elements on %s\ncommit %s, %s build\n", (long long)n, dtype_name(dt),
                where.c_str(), git_commit(), build_type());
    std::printf("GB/s = (bytes read + bytes written, each once) / time, best of %d reps of >= %.0f ms%s.\n"
                "vs copy: against %s of the same bytes, measured in this run%s.\n",
                o.reps, kMinRepSeconds * 1e3, queued.c_str(), copy_name,
                d == Device::CUDA ? "; vs peak: against the GPU's peak bandwidth" : "");
    if (d == Device::CUDA) {
      if (peak > 0) std::printf("peak bandwidth: %.0f GB/s (2 x memory clock x bus width)\n", peak);
      else std::printf("peak bandwidth: unknown\n");
      std::printf("checked: max error against the CPU backend, relative to its largest value\n");
    }
    std::printf("\n%-30s %9s %9s %8s %8s %9s\n", "op", "GB/s", "median", "vs copy", "vs peak", "checked");
  }
  auto report = [&](const std::string& name, const Rate& r, double err) {
    if (o.json) {
      nlohmann::ordered_json j = {{"bench", "ops"}, {"op", name}, {"device", o.device}, {"dtype", dtype_name(dt)},
                                  {"elements", n}, {"gbs", r.best / 1e9}, {"gbs_median", r.median / 1e9},
                                  {"copy_gbs", copy.best / 1e9}, {"peak_gbs", nullptr}, {"max_rel_err", nullptr},
                                  {"hardware", where}, {"commit", git_commit()}, {"build_type", build_type()}};
      if (peak > 0) j["peak_gbs"] = peak;
      if (err >= 0) j["max_rel_err"] = err;
      std::cout << j.dump() << std::endl;
      return;
    }
    char vs_peak[16] = "-", checked[16] = "-";
    if (peak > 0) std::snprintf(vs_peak, sizeof vs_peak, "%.0f%%", 100 * r.best / 1e9 / peak);
    if (err >= 0) std::snprintf(checked, sizeof checked, "%.1e", err);
    std::printf("%-30s %9.1f %9.1f %7.0f%% %8s %9s\n", name.c_str(), r.best / 1e9, r.median / 1e9,
                100 * r.best / copy.best, vs_peak, checked);
    std::fflush(stdout);
  };
  report(copy_name, copy, -1);

  std::vector<Tensor> host;
  if (d == Device::CUDA)
    for (const Tensor& t : in) host.push_back(raw::to_device(t, Device::CPU));
  for (const Op& op : ops(n, dtype_size(dt))) {
    double err = -1;
    if (d == Device::CUDA) {
      err = max_rel_err(op.run(in), op.run(host));
      if (!(err <= (dt == DType::F32 ? 1e-4 : 1e-10)))
        throw std::runtime_error("bench ops: " + op.name + " on the GPU differs from the CPU backend: max relative "
                                 "error " + std::to_string(err));
    }
    report(op.name, measure_on(d, [&] { op.run(in); }, op.bytes, o.reps, kMinRepSeconds), err);
  }
}

}  // namespace
}  // namespace cmd_bench_ops

void register_bench_ops(CLI::App& bench) {
  using namespace cmd_bench_ops;
  auto opts = std::make_shared<BenchOpsArgs>();
  CLI::App* sub = bench.add_subcommand(
      "ops", "GB/s of element-wise, reduction, scan and index kernels vs a plain copy of the same bytes");
  add_device_option(sub, opts->device);
  sub->add_option("--dtype", opts->dtype, "Element type")->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  sub->add_option("--elements", opts->elements, "Elements per operand (a multiple of 1024)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--reps", opts->reps, "Timed repetitions per measurement (best is reported)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_flag("--json", opts->json, "One JSON object per line instead of a table");
  sub->callback([opts] { run_ops(*opts); });
}

PONDER_SUBCOMMAND(bench, ops, register_bench_ops);

}  // namespace ponder::cli
