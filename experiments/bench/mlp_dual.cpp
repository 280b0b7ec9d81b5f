// TTT-MLP's dual-form kernel timed alone (experiments/bench/mlp_dual.h): the operands as a TTT-MLP layer passes them
// (per-head W1, b1, W2, b2 broadcast over the batch, xq, xk, xv as views of (B, b, H, f) projections), float32.
#include "experiments/bench/mlp_dual.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "autograd/fused.h"
#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/model/device.h"
#include "tensor/flops.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

namespace ponder::cli {
namespace bench_mlp_dual {
namespace {

constexpr double kMinRepSeconds = 0.05, kEps = 1e-5, kTolerance = 1e-3;

struct Case {
  std::array<Tensor, 10> x;  // W1, b1, W2, b2, xq, xk, xv, η, γ, β
  std::array<Tensor, 5> dy;  // upstream of out, W1', b1', W2', b2'
};

Case make(const DualBenchOptions& o) {
  Generator gen(7);
  const int64_t B = o.batch, H = o.heads, b = o.mini_batch, f = o.head_dim, h = o.mlp_hidden();
  auto n = [&](Shape s, double sd, double mean = 0) { return gen.normal(s, mean, sd, DType::F32); };
  auto per_head = [&](Shape s, double sd) {  // (H, r, c) broadcast over the batch, as the layer's W0
    Shape full = s;
    full.insert(full.begin(), B);
    s.insert(s.begin(), 1);
    return raw::expand(n(s, sd), full);
  };
  auto proj = [&] { return raw::permute(n({B, b, H, f}, 1), {0, 2, 1, 3}); };
  Case c{{per_head({H, f, h}, 0.02), per_head({H, 1, h}, 0.02), per_head({H, h, f}, 0.02), per_head({H, 1, f}, 0.02),
          proj(), proj(), proj(), gen.uniform({B, H, b, b}, 0, 1.0 / double(b), DType::F32), n({1, H, 1, f}, 0.1, 1),
          n({1, H, 1, f}, 0.1)},
         {}};
  const Shape like[5] = {{B, H, b, f}, {B, H, f, h}, {B, H, 1, h}, {B, H, h, f}, {B, H, 1, f}};
  for (size_t i = 0; i < 5; ++i) c.dy[i] = n(like[i], 1);
  return c;
}

Case to(const Case& c, Device d) { return {on_device(c.x, d), on_device(c.dy, d)}; }

struct Outputs {
  std::array<Tensor, 5> y;
  Tensor saved;
  std::array<Tensor, 10> grads;
};
Outputs run(const Case& c) {
  Outputs r;
  std::tie(r.y, r.saved) = raw::ttt_mlp_dual(c.x, kEps);
  r.grads = raw::ttt_mlp_dual_backward(c.x, kEps, r.saved, c.dy);
  return r;
}

// The largest relative error of any result against the CPU kernel's; throws past the tolerance, naming it.
double check(const Outputs& got, const Outputs& want) {
  double worst = 0;
  auto one = [&](const Tensor& g, const Tensor& w, const std::string& name) {
    worst = std::max(worst, checked_rel_err(g, w, kTolerance, "bench dual --inner mlp: " + name));
  };
  for (size_t i = 0; i < 5; ++i) one(got.y[i], want.y[i], "result " + std::to_string(i));
  one(got.saved, want.saved, "saved intermediates");
  for (size_t i = 0; i < 10; ++i) one(got.grads[i], want.grads[i], "gradient " + std::to_string(i));
  return worst;
}

void print(const char* pass, double us, double gflops, double err, const DualBenchOptions& o,
           const std::string& where) {
  if (o.json) {
    nlohmann::ordered_json j = {{"bench", "dual"},          {"inner", "mlp"},          {"pass", pass},
                                {"us_per_call", us},        {"gflops", gflops},        {"max_rel_err", nullptr},
                                {"batch", o.batch},         {"heads", o.heads},        {"mini_batch", o.mini_batch},
                                {"head_dim", o.head_dim},   {"hidden", o.mlp_hidden()},      {"device", where},
                                {"commit", git_commit()},   {"build_type", build_type()}};
    if (err >= 0) j["max_rel_err"] = err;
    std::cout << j.dump() << std::endl;
    return;
  }
  char e[16] = "-";
  if (err >= 0) std::snprintf(e, sizeof e, "%.1e", err);
  std::printf("%-9s %12.1f %10.1f %9s\n", pass, us, gflops, e);
  std::fflush(stdout);
}

}  // namespace
}  // namespace bench_mlp_dual

void run_bench_mlp_dual(const DualBenchOptions& o) {
  using namespace bench_mlp_dual;
  if (o.check_only && o.device != "cuda")
    throw std::invalid_argument("bench dual: --check-only needs --device cuda (on the CPU the kernel is the reference)");
  const Device d = use_device(o.device);
  const std::string where = describe_device(d);
  const Case host = make(o), x = to(host, d);
  const Outputs want = run(host);
  std::vector<Shape> shapes;
  for (const Tensor& t : host.x) shapes.push_back(t.shape());
  const fused::PhasedCounts counts = fused::mlp_dual_counts(shapes);
  double ffwd = 0, fbwd = 0;
  for (const auto& p : counts.forward)
    for (int64_t v : p) ffwd += double(v);
  for (int64_t v : counts.backward) fbwd += double(v);
  if (!o.json)
    std::printf("bench dual: TTT-MLP dual form, %lld x %lld heads, mini-batch %lld, head dim %lld, hidden %lld, "
                "float32, on %s\ncommit %s, %s build\nus = microseconds per call (all heads), best of %d reps of >= "
                "%.0f ms; GFLOP/s from the engine's FLOP counts (%.3g forward, %.3g backward per call); checked: max "
                "error against the CPU kernel, relative to its largest value\n\n%-9s %12s %10s %9s\n",
                (long long)o.batch, (long long)o.heads, (long long)o.mini_batch, (long long)o.head_dim,
                (long long)o.mlp_hidden(), where.c_str(), git_commit(), build_type(), o.reps, kMinRepSeconds * 1e3,
                ffwd, fbwd, "pass", "us/call", "GFLOP/s", "checked");
  const double err = d == Device::CUDA ? check(run(x), want) : -1;
  if (o.check_only) {
    print("checked", 0, 0, err, o, where);
    return;
  }
  auto time = [&](const std::function<void()>& fn) { return 1e6 / measure_on(d, fn, 1.0, o.reps, kMinRepSeconds).best; };
  const Tensor saved = raw::ttt_mlp_dual(x.x, kEps).second;
  const double tf = time([&] { raw::ttt_mlp_dual(x.x, kEps); });
  const double tb = time([&] { raw::ttt_mlp_dual_backward(x.x, kEps, saved, x.dy); });
  print("forward", tf, ffwd / tf / 1e3, err, o, where);
  print("backward", tb, fbwd / tb / 1e3, err, o, where);
}

}  // namespace ponder::cli
