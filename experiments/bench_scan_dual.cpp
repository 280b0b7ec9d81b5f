// TTT-Linear's dual form over a sequence's units timed alone (experiments/bench_scan_dual.h): the operands as a
// TTT-Linear layer passes them to its scan node (W0, b0 per head broadcast over the batch; xq, xk, xv views of the
// (B, N, H, f) projections, rows H·f apart), float32, with the scan kernel on and off (raw::set_dual_scan).
#include "experiments/bench_scan_dual.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "autograd/fused.h"
#include "experiments/bench_util.h"
#include "experiments/build_info.h"
#include "experiments/device.h"
#include "tensor/flops.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace bench_scan_dual {
namespace {

constexpr double kMinRepSeconds = 0.05, kEps = 1e-5, kTolerance = 1e-3;

// x: W0, b0, xq, xk, xv, η, γ, β; dy: dout, dW_n, dbias_n.
struct Case {
  std::array<Tensor, 8> x;
  std::array<Tensor, 3> dy;
};

Case make(const ScanDualBench& o) {
  Generator gen(7);
  const int64_t B = o.batch, H = o.heads, b = o.mini_batch, f = o.head_dim, n = o.units, N = n * b;
  auto nrm = [&](Shape s, double sd, double mean = 0) { return gen.normal(s, mean, sd, DType::F32); };
  auto per_head = [&](int64_t r) { return raw::expand(nrm({1, H, r, f}, 0.02), {B, H, r, f}); };
  auto proj = [&] { return raw::permute(nrm({B, N, H, f}, 1), {0, 2, 1, 3}); };
  return {{per_head(f), per_head(1), proj(), proj(), proj(),
           gen.uniform({B, H, n, b, b}, 0, 1.0 / double(b), DType::F32), nrm({1, H, 1, f}, 0.1, 1),
           nrm({1, H, 1, f}, 0.1)},
          {nrm({B, H, N, f}, 1), nrm({B, H, f, f}, 1), nrm({B, H, 1, f}, 1)}};
}

Case to(const Case& c, Device d) { return {on_device(c.x, d), on_device(c.dy, d)}; }

// Y, S and the eight gradients, in buffers made once (a layer's node allocates them per call; the rows time the
// kernels).
struct Buffers {
  Tensor Y, S;
  std::array<Tensor, 8> g;
};
Buffers buffers(const Case& c, const ScanDualBench& o, Device d) {
  const int64_t B = o.batch, H = o.heads, b = o.mini_batch, f = o.head_dim, n = o.units;
  Buffers r{Tensor::empty({n, B, H, b + f + 1, f}, DType::F32, d),
            Tensor::empty({n, B * H, kDualSaved(b, f)}, DType::F32, d), {}};
  const Shape like[8] = {c.x[0].shape(), c.x[1].shape(), {n, B, H, b, f}, {n, B, H, b, f}, {n, B, H, b, f},
                         {n, B, H, b, b}, c.x[6].shape(), c.x[7].shape()};
  for (size_t i = 0; i < 8; ++i) r.g[i] = Tensor::empty(like[i], DType::F32, d);
  return r;
}
void forward(const Case& c, const Buffers& r) {
  const auto& x = c.x;
  raw::ttt_linear_scan_into(r.Y, r.S, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], kEps);
}
void backward(const Case& c, const Buffers& r) {
  const auto& x = c.x;
  raw::ttt_linear_scan_backward_into(r.g, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], r.Y, r.S, c.dy, kEps);
}

// The largest relative error of any result against the CPU's; throws past the tolerance, naming it.
double check(const Buffers& got, const Buffers& want, const char* mode) {
  double worst = 0;
  auto one = [&](const Tensor& g, const Tensor& w, const std::string& name) {
    worst = std::max(worst, checked_rel_err(g, w, kTolerance, "bench dual --units: " + name + " (" + mode + ")"));
  };
  one(got.Y, want.Y, "the outputs");
  one(got.S, want.S, "the saved intermediates");
  for (size_t i = 0; i < 8; ++i) one(got.g[i], want.g[i], "gradient " + std::to_string(i));
  return worst;
}

// FLOPs a step books for the scan's forward and backward: the dual op's rules, once per unit.
std::pair<double, double> counted_flops(const Case& c, int64_t units, int64_t b) {
  const Tensor unit0 = raw::slice(c.x[2], 2, 0, b);
  const bool bcast = c.x[6].shape() != unit0.shape();
  FlopScope fs;
  for (int phase = 0; phase < 4; ++phase)
    fused::count(FusedOp::TttLinearDual, fused::dual_sizes(unit0), bcast, phase);
  const double fwd = double(fs.counts().total());
  fused::count(FusedOp::TttLinearDualBackward, fused::dual_sizes(unit0), bcast);
  return {fwd * double(units), (double(fs.counts().total()) - fwd) * double(units)};
}

void print(const char* pass, const char* mode, double us, double gflops, double err, const ScanDualBench& o,
           const std::string& where) {
  if (o.json) {
    nlohmann::ordered_json j = {{"bench", "dual"},
                                {"units", o.units},
                                {"pass", pass},
                                {"kernel", mode},
                                {"us_per_call", us},
                                {"us_per_unit", us / double(o.units)},
                                {"gflops", gflops},
                                {"max_rel_err", nullptr},
                                {"batch", o.batch},
                                {"heads", o.heads},
                                {"mini_batch", o.mini_batch},
                                {"head_dim", o.head_dim},
                                {"device", where},
                                {"commit", git_commit()},
                                {"build_type", build_type()}};
    if (err >= 0) j["max_rel_err"] = err;
    std::cout << j.dump() << std::endl;
    return;
  }
  char e[16] = "-";
  if (err >= 0) std::snprintf(e, sizeof e, "%.1e", err);
  std::printf("%-9s %-7s %12.1f %10.2f %10.1f %9s\n", pass, mode, us, us / double(o.units), gflops, e);
  std::fflush(stdout);
}

}  // namespace
}  // namespace bench_scan_dual

void run_bench_scan_dual(const ScanDualBench& o) {
  using namespace bench_scan_dual;
  if (o.check_only && o.device != "cuda")
    throw std::invalid_argument("bench dual: --check-only needs --device cuda (on the CPU the kernel is the "
                                "reference)");
  const Device d = use_device(o.device);
  const std::string where = describe_device(d);
  const Case host = make(o), x = to(host, d);
  const auto [ffwd, fbwd] = counted_flops(host, o.units, o.mini_batch);
  if (!o.json)
    std::printf("bench dual: TTT-Linear dual form over %lld units, %lld x %lld heads, mini-batch %lld, head dim %lld, "
                "float32, on %s\ncommit %s, %s build\nscan: the backend's scan kernel, one call each way; units: the "
                "one-unit kernel called unit by unit (the same bits)\nus = microseconds per call (every unit, all "
                "heads) and per unit, best of %d reps of >= %.0f ms; GFLOP/s from the engine's FLOP counts (%.3g forward, "
                "%.3g backward per call); checked: max error against the CPU, relative to its largest value\n\n"
                "%-9s %-7s %12s %10s %10s %9s\n",
                (long long)o.units, (long long)o.batch, (long long)o.heads, (long long)o.mini_batch,
                (long long)o.head_dim, where.c_str(), git_commit(), build_type(), o.reps, kMinRepSeconds * 1e3, ffwd,
                fbwd, "pass", "kernel", "us/call", "us/unit", "GFLOP/s", "checked");
  const bool keep = raw::dual_scan_enabled();
  struct Restore {
    bool on;
    ~Restore() { raw::set_dual_scan(on); }
  } restore{keep};
  Buffers want;
  if (d == Device::CUDA) {
    want = buffers(host, o, Device::CPU);
    forward(host, want);
    backward(host, want);
  }
  const Buffers r = buffers(x, o, d);
  for (bool scan : {true, false}) {
    raw::set_dual_scan(scan);
    const char* mode = scan ? "scan" : "units";
    forward(x, r);
    backward(x, r);
    const double err = d == Device::CUDA ? check(r, want, mode) : -1;
    if (o.check_only) {
      print("checked", mode, 0, 0, err, o, where);
      continue;
    }
    auto time = [&](const std::function<void()>& fn) {
      return 1e6 / measure_on(d, fn, 1.0, o.reps, kMinRepSeconds).best;
    };
    const double tf = time([&] { forward(x, r); }), tb = time([&] { backward(x, r); });
    print("forward", mode, tf, ffwd / tf / 1e3, err, o, where);
    print("backward", mode, tb, fbwd / tb / 1e3, err, o, where);
  }
}

}  // namespace ponder::cli
