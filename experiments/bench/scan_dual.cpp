// The dual form over a sequence's units timed alone (experiments/bench/scan_dual.h): the operands as a TTT layer
// passes them to its scan node (the start's weights per head broadcast over the batch; xq, xk, xv views of the
// (B, N, H, f) projections, rows H·f apart), float32, with the scan kernel on and off (raw::set_dual_scan).
#include "experiments/bench/scan_dual.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/fused.h"
#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/model/device.h"
#include "tensor/backend.h"
#include "tensor/flops.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace bench_scan_dual {
namespace {

constexpr double kMinRepSeconds = 0.05, kEps = 1e-5, kTolerance = 1e-3;

// TTT-Linear: x = W0, b0, xq, xk, xv, η, γ, β; dy = dout, dW_n, dbias_n. TTT-MLP: x = W1, b1, W2, b2, xq, xk, xv,
// η, γ, β; dy = dout and the last unit's four weights' upstream.
struct Case {
  std::vector<Tensor> x, dy;
};

Case make(const DualBenchOptions& o) {
  Generator gen(7);
  const int64_t B = o.batch, H = o.heads, b = o.mini_batch, f = o.head_dim, n = o.units, N = n * b, h = o.mlp_hidden();
  auto nrm = [&](Shape s, double sd, double mean = 0) { return gen.normal(s, mean, sd, DType::F32); };
  auto per_head = [&](int64_t r, int64_t c) { return raw::expand(nrm({1, H, r, c}, 0.02), {B, H, r, c}); };
  auto proj = [&] { return raw::permute(nrm({B, N, H, f}, 1), {0, 2, 1, 3}); };
  const std::vector<Shape> w = h > 0 ? std::vector<Shape>{{f, h}, {1, h}, {h, f}, {1, f}} : std::vector<Shape>{{f, f}, {1, f}};
  Case c;
  for (const Shape& s : w) c.x.push_back(per_head(s[0], s[1]));
  for (int i = 0; i < 3; ++i) c.x.push_back(proj());
  c.x.push_back(gen.uniform({B, H, n, b, b}, 0, 1.0 / double(b), DType::F32));
  c.x.push_back(nrm({1, H, 1, f}, 0.1, 1));
  c.x.push_back(nrm({1, H, 1, f}, 0.1));
  c.dy.push_back(nrm({B, H, N, f}, 1));
  for (const Shape& s : w) c.dy.push_back(nrm({B, H, s[0], s[1]}, 1));
  return c;
}

Case to(const Case& c, Device d) { return {on_device(c.x, d), on_device(c.dy, d)}; }

// The results (TTT-Linear: Y packed; TTT-MLP: out, W1 … b2), S and the gradients, in buffers made once (a layer's
// node allocates them per call; the rows time the kernels).
struct Buffers {
  std::vector<Tensor> Y;
  Tensor S;
  std::vector<Tensor> g;
};
Buffers buffers(const Case& c, const DualBenchOptions& o, Device d) {
  const int64_t B = o.batch, H = o.heads, b = o.mini_batch, f = o.head_dim, n = o.units, h = o.mlp_hidden();
  const size_t nw = h > 0 ? 4 : 2;  // the start's weights, then xq, xk, xv, η, γ, β
  auto empty = [&](const Shape& s) { return Tensor::empty(s, DType::F32, d); };
  Buffers r;
  if (h > 0) {
    r.Y.push_back(empty({n, B, H, b, f}));
    for (size_t i = 0; i < nw; ++i) r.Y.push_back(empty({n, B, H, c.x[i].shape()[2], c.x[i].shape()[3]}));
  } else {
    r.Y.push_back(empty({n, B, H, b + f + 1, f}));
  }
  r.S = empty({n, B * H, h > 0 ? kMlpDualSaved(b, f, h) : kDualSaved(b, f)});
  for (size_t i = 0; i < nw; ++i) r.g.push_back(empty(c.x[i].shape()));
  for (int i = 0; i < 3; ++i) r.g.push_back(empty({n, B, H, b, f}));
  r.g.push_back(empty({n, B, H, b, b}));
  r.g.push_back(empty(c.x[nw + 4].shape()));
  r.g.push_back(empty(c.x[nw + 5].shape()));
  return r;
}
template <size_t N>
std::array<Tensor, N> arr(const std::vector<Tensor>& v) {
  std::array<Tensor, N> a;
  std::copy(v.begin(), v.begin() + N, a.begin());
  return a;
}
void forward(const Case& c, const Buffers& r) {
  const auto& x = c.x;
  if (x.size() == 10) return raw::ttt_mlp_scan_into(arr<5>(r.Y), r.S, arr<10>(x), kEps);
  raw::ttt_linear_scan_into(r.Y[0], r.S, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], kEps);
}
void backward(const Case& c, const Buffers& r) {
  const auto& x = c.x;
  if (x.size() == 10) return raw::ttt_mlp_scan_backward_into(arr<10>(r.g), arr<10>(x), arr<5>(r.Y), r.S, arr<5>(c.dy), kEps);
  raw::ttt_linear_scan_backward_into(arr<8>(r.g), x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], r.Y[0], r.S,
                                     arr<3>(c.dy), kEps);
}

// The largest relative error of any result against the CPU's; throws past the tolerance, naming it.
double check(const Buffers& got, const Buffers& want, const char* mode) {
  double worst = 0;
  auto one = [&](const Tensor& g, const Tensor& w, const std::string& name) {
    worst = std::max(worst, checked_rel_err(g, w, kTolerance, "bench dual --units: " + name + " (" + mode + ")"));
  };
  for (size_t i = 0; i < got.Y.size(); ++i) one(got.Y[i], want.Y[i], "result " + std::to_string(i));
  one(got.S, want.S, "the saved intermediates");
  for (size_t i = 0; i < got.g.size(); ++i) one(got.g[i], want.g[i], "gradient " + std::to_string(i));
  return worst;
}

// FLOPs a step books for the scan's forward and backward: the one-unit op's rules, once per unit.
std::pair<double, double> counted_flops(const Case& c, int64_t units, int64_t b) {
  const size_t nw = c.x.size() == 10 ? 4 : 2;
  const Tensor unit0 = raw::slice(c.x[nw], 2, 0, b);
  FlopScope fs;
  if (nw == 4) {
    std::vector<Shape> s;
    for (size_t i = 0; i < 10; ++i) s.push_back(i >= 4 && i < 7 ? unit0.shape() : c.x[i].shape());
    s[7] = raw::squeeze(raw::slice(c.x[7], 2, 0, 1), 2).shape();
    const fused::PhasedCounts pc = fused::mlp_dual_counts(s);
    for (const auto& p : pc.forward) fused::add_counts(p);
    const double fwd = double(fs.counts().total());
    fused::add_counts(pc.backward);
    return {fwd * double(units), (double(fs.counts().total()) - fwd) * double(units)};
  }
  const bool bcast = c.x[6].shape() != unit0.shape();
  for (int phase = 0; phase < 4; ++phase)
    fused::count(FusedOp::TttLinearDual, fused::dual_sizes(unit0), bcast, phase);
  const double fwd = double(fs.counts().total());
  fused::count(FusedOp::TttLinearDualBackward, fused::dual_sizes(unit0), bcast);
  return {fwd * double(units), (double(fs.counts().total()) - fwd) * double(units)};
}

void print(const char* pass, const char* mode, double us, double gflops, double err, const DualBenchOptions& o,
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
                                {"inner", o.inner},
                                {"hidden", o.mlp_hidden()},
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

void run_bench_scan_dual(const DualBenchOptions& o) {
  using namespace bench_scan_dual;
  if (o.check_only && o.device != "cuda")
    throw std::invalid_argument("bench dual: --check-only needs --device cuda (on the CPU the kernel is the "
                                "reference)");
  const Device d = use_device(o.device);
  const std::string where = describe_device(d);
  const Case host = make(o), x = to(host, d);
  const auto [ffwd, fbwd] = counted_flops(host, o.units, o.mini_batch);
  if (!o.json)
    std::printf("bench dual: %s dual form over %lld units, %lld x %lld heads, mini-batch %lld, head dim %lld, "
                "float32, on %s\ncommit %s, %s build\nscan: the backend's scan kernel, one call each way; units: the "
                "one-unit kernel called unit by unit (the same bits)\nus = microseconds per call (every unit, all "
                "heads) and per unit, best of %d reps of >= %.0f ms; GFLOP/s from the engine's FLOP counts (%.3g forward, "
                "%.3g backward per call); checked: max error against the CPU, relative to its largest value\n\n"
                "%-9s %-7s %12s %10s %10s %9s\n",
                o.inner == "mlp" ? ("TTT-MLP (hidden " + std::to_string(o.mlp_hidden()) + ")").c_str() : "TTT-Linear",
                (long long)o.units, (long long)o.batch, (long long)o.heads, (long long)o.mini_batch,
                (long long)o.head_dim, where.c_str(), git_commit(), build_type(), o.reps, kMinRepSeconds * 1e3, ffwd,
                fbwd, "pass", "kernel", "us/call", "us/unit", "GFLOP/s", "checked");
  const bool has = o.inner == "mlp" ? backend(d).mlp_scan() : backend(d).dual_scan();
  if (!o.json && !has)
    std::printf("(this backend has no scan kernel for this inner model: both rows call the one-unit kernel unit by "
                "unit)\n");
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
