// Modules: forward values against naive loops, parameter gradients against central differences,
// LSTM causality; checkpoint: same values and gradients (first and second order) as without it.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "autograd/nn.h"

using namespace ponder;

namespace {

constexpr double kFdEps = 1e-6, kAtol = 1e-5, kRtol = 1e-3;

// Central differences of loss() with respect to each element of the contiguous float64 leaf p.
std::vector<double> numeric_grad(const Tensor& p, const std::function<Tensor()>& loss) {
  NoGradGuard ng;
  double* d = p.data<double>();
  std::vector<double> g(size_t(p.numel()));
  for (size_t i = 0; i < g.size(); ++i) {
    const double orig = d[i];
    d[i] = orig + kFdEps;
    const double lp = loss().item();
    d[i] = orig - kFdEps;
    const double lm = loss().item();
    d[i] = orig;
    g[i] = (lp - lm) / (2 * kFdEps);
  }
  return g;
}

// Analytical gradients of the scalar loss() with respect to `wrt` against central differences.
// Returns how many gradient elements were compared, so callers can assert the check was not vacuous.
size_t check_grads(const std::function<Tensor()>& loss, const std::vector<Tensor>& wrt) {
  std::vector<Tensor> ana = grad({loss()}, wrt);
  size_t compared = 0;
  for (size_t k = 0; k < wrt.size(); ++k) {
    std::vector<double> a = ana[k].to_vector(), n = numeric_grad(wrt[k], loss);
    REQUIRE(a.size() == n.size());
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("tensor " << k << " element " << i << ": analytical " << a[i] << " numerical " << n[i]);
      CHECK(std::abs(a[i] - n[i]) <= kAtol + kRtol * std::abs(n[i]));
    }
    compared += a.size();
  }
  return compared;
}

Tensor leaf(const std::vector<double>& v, const Shape& s) {
  Tensor t = Tensor::from_vector(v, s, DType::F64);
  return set_requires_grad(t);
}

// Overwrites a parameter's values (tests only; bumps its version like an optimiser step).
void assign(const Tensor& p, const std::vector<double>& v) {
  NoGradGuard ng;
  raw::copy_(p, Tensor::from_vector(v, p.shape(), p.dtype()));
}

// A loss that weights every output element differently, so no gradient cancels by symmetry.
Tensor weighted_sum(const Tensor& y, uint64_t seed = 7) {
  Generator g(seed);
  return sum(mul(y, g.uniform(y.shape(), -1, 1, y.dtype())));
}

// Returns how many elements were compared.
size_t check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1));
  }
  return got.size();
}

double sigm(double z) { return 1 / (1 + std::exp(-z)); }

}  // namespace

TEST_CASE("Linear: init, forward against a naive loop, gradients") {
  Generator gen(1);
  Linear lin(3, 2, true, gen, DType::F64);
  CHECK(lin.weight.shape() == Shape{3, 2});
  CHECK(lin.weight.dtype() == DType::F64);
  CHECK(lin.bias.shape() == Shape{2});
  CHECK(lin.parameters().size() == 2);
  for (const Tensor& p : lin.parameters()) CHECK((requires_grad(p) && is_leaf(p)));
  for (double w : lin.weight.to_vector()) CHECK(std::abs(w) <= 1 / std::sqrt(3.0));
  for (double b : lin.bias.to_vector()) CHECK(b == 0);

  assign(lin.bias, {0.5, -0.25});
  Tensor x = leaf({1, 2, 3, -1, 0.5, 2}, {2, 3});
  std::vector<double> w = lin.weight.to_vector(), xv = x.to_vector(), b = lin.bias.to_vector(), want;
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 2; ++o) {
      double acc = b[size_t(o)];
      for (int i = 0; i < 3; ++i) acc += xv[size_t(r * 3 + i)] * w[size_t(i * 2 + o)];
      want.push_back(acc);
    }
  Tensor y = lin.forward(x);
  CHECK(y.shape() == Shape{2, 2});
  check_close(y.to_vector(), want);

  // A single vector and a batched (B, T, in) input go through the same map.
  Tensor row = lin.forward(Tensor::from_vector({1, 2, 3}, {3}, DType::F64));
  CHECK(row.shape() == Shape{2});
  check_close(row.to_vector(), {want[0], want[1]});
  CHECK(lin.forward(Tensor::zeros({2, 4, 3}, DType::F64)).shape() == Shape{2, 4, 2});

  check_grads([&] { return weighted_sum(lin.forward(x)); }, {lin.weight, lin.bias, x});

  Linear nobias(3, 2, false, gen, DType::F32);
  CHECK_FALSE(nobias.bias.defined());
  CHECK(nobias.parameters().size() == 1);
  CHECK(nobias.weight.dtype() == DType::F32);
  CHECK_THROWS_AS(lin.forward(Tensor::zeros({2, 4}, DType::F64)), std::invalid_argument);
}

TEST_CASE("Embedding: rows of the table, N(0, 0.02) init, gradient") {
  Generator gen(2);
  Embedding emb(50, 20, gen, DType::F64);
  CHECK(emb.weight.shape() == Shape{50, 20});
  std::vector<double> w = emb.weight.to_vector();
  double s2 = 0;
  for (double v : w) s2 += v * v;
  CHECK(std::sqrt(s2 / double(w.size())) == doctest::Approx(0.02).epsilon(0.1));

  Tensor ids = Tensor::from_ints({3, 0, 49, 3}, {2, 2});
  Tensor y = emb.forward(ids);
  CHECK(y.shape() == Shape{2, 2, 20});
  std::vector<double> yv = y.to_vector();
  const int64_t rows[] = {3, 0, 49, 3};
  for (int r = 0; r < 4; ++r)
    for (int d = 0; d < 20; ++d) CHECK(yv[size_t(r * 20 + d)] == w[size_t(rows[r] * 20 + d)]);

  Generator small_gen(3);
  Embedding small(4, 3, small_gen, DType::F64);
  Tensor few = Tensor::from_ints({1, 3, 1}, {3});
  check_grads([&] { return weighted_sum(small.forward(few)); }, {small.weight});
}

TEST_CASE("LayerNorm: forward against hand-computed statistics, gradients") {
  LayerNorm ln(4, 1e-5, DType::F64);
  CHECK(ln.gamma.to_vector() == std::vector<double>{1, 1, 1, 1});
  CHECK(ln.beta.to_vector() == std::vector<double>{0, 0, 0, 0});
  assign(ln.gamma, {1.0, 2.0, 0.5, -1.0});
  assign(ln.beta, {0.1, 0.0, -0.2, 0.3});
  Tensor x = leaf({1, 2, 3, 4, -1, 0.5, 2, 7}, {2, 4});
  std::vector<double> xv = x.to_vector(), g = ln.gamma.to_vector(), b = ln.beta.to_vector(), want;
  for (int r = 0; r < 2; ++r) {
    double mu = 0, var = 0;
    for (int i = 0; i < 4; ++i) mu += xv[size_t(r * 4 + i)] / 4;
    for (int i = 0; i < 4; ++i) var += (xv[size_t(r * 4 + i)] - mu) * (xv[size_t(r * 4 + i)] - mu) / 4;
    for (int i = 0; i < 4; ++i)
      want.push_back((xv[size_t(r * 4 + i)] - mu) / std::sqrt(var + 1e-5) * g[size_t(i)] + b[size_t(i)]);
  }
  check_close(ln.forward(x).to_vector(), want);
  check_grads([&] { return weighted_sum(ln.forward(x)); }, {ln.gamma, ln.beta, x});
  CHECK_THROWS_AS(layer_norm(x, Tensor::zeros({3}, DType::F64), ln.beta, 1e-5), std::invalid_argument);
}

TEST_CASE("RMSNorm: forward against a naive loop, gradients") {
  RMSNorm rn(3, 1e-6, DType::F64);
  CHECK(rn.weight.to_vector() == std::vector<double>{1, 1, 1});
  assign(rn.weight, {0.5, -2.0, 1.5});
  Tensor x = leaf({1, -2, 3, 0.25, 0.5, -4}, {2, 3});
  std::vector<double> xv = x.to_vector(), w = rn.weight.to_vector(), want;
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 3; ++i) ms += xv[size_t(r * 3 + i)] * xv[size_t(r * 3 + i)] / 3;
    for (int i = 0; i < 3; ++i) want.push_back(xv[size_t(r * 3 + i)] / std::sqrt(ms + 1e-6) * w[size_t(i)]);
  }
  check_close(rn.forward(x).to_vector(), want);
  check_grads([&] { return weighted_sum(rn.forward(x)); }, {rn.weight, x});
  CHECK_THROWS_AS(rms_norm(x, Tensor::zeros({2, 3}, DType::F64), 1e-6), std::invalid_argument);
}

TEST_CASE("LSTMCell: forward against a scalar loop, gradients, causality") {
  const int64_t B = 2, T = 3, I = 2, H = 3;
  Generator gen(4);
  LSTMCell cell(I, H, gen, DType::F64);
  CHECK(cell.w_ih.shape() == Shape{I, 4 * H});
  CHECK(cell.w_hh.shape() == Shape{H, 4 * H});
  std::vector<double> b0 = cell.bias.to_vector();
  for (int64_t j = 0; j < 4 * H; ++j) CHECK(b0[size_t(j)] == (j >= H && j < 2 * H ? 1.0 : 0.0));
  // A non-trivial bias so every gate's bias is exercised.
  std::vector<double> bias_v;
  for (int64_t j = 0; j < 4 * H; ++j) bias_v.push_back(0.1 * double(j) - 0.5);
  assign(cell.bias, bias_v);

  Generator xg(5);
  Tensor x = xg.uniform({B, T, I}, -1, 1, DType::F64);
  set_requires_grad(x);
  Tensor y = cell.forward(x);
  REQUIRE(y.shape() == Shape{B, T, H});

  // Scalar reference: gates[j] = Σ x·w_ih[:, j] + Σ h·w_hh[:, j] + bias[j], order i, f, g, o.
  std::vector<double> wi = cell.w_ih.to_vector(), wh = cell.w_hh.to_vector(), xv = x.to_vector();
  std::vector<double> want(size_t(B * T * H));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> gates(size_t(4 * H));
      for (int64_t j = 0; j < 4 * H; ++j) {
        double acc = bias_v[size_t(j)];
        for (int64_t k = 0; k < I; ++k) acc += xv[size_t((b * T + t) * I + k)] * wi[size_t(k * 4 * H + j)];
        for (int64_t k = 0; k < H; ++k) acc += h[size_t(k)] * wh[size_t(k * 4 * H + j)];
        gates[size_t(j)] = acc;
      }
      for (int64_t k = 0; k < H; ++k) {
        double ig = sigm(gates[size_t(k)]), fg = sigm(gates[size_t(H + k)]);
        double gg = std::tanh(gates[size_t(2 * H + k)]), og = sigm(gates[size_t(3 * H + k)]);
        c[size_t(k)] = fg * c[size_t(k)] + ig * gg;
        h[size_t(k)] = og * std::tanh(c[size_t(k)]);
        want[size_t((b * T + t) * H + k)] = h[size_t(k)];
      }
    }
  }
  check_close(y.to_vector(), want);

  check_grads([&] { return weighted_sum(cell.forward(x)); }, {cell.w_ih, cell.w_hh, cell.bias, x});

  SUBCASE("changing inputs after t0 leaves outputs up to t0 unchanged") {
    const int64_t t0 = 1;
    std::vector<double> x2 = xv;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = t0 + 1; t < T; ++t)
        for (int64_t k = 0; k < I; ++k) x2[size_t((b * T + t) * I + k)] += 3.0;
    std::vector<double> y2 = cell.forward(Tensor::from_vector(x2, {B, T, I}, DType::F64)).to_vector();
    std::vector<double> y1 = y.to_vector();
    bool later_changed = false;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < H; ++k) {
          size_t at = size_t((b * T + t) * H + k);
          if (t <= t0) CHECK(y2[at] == y1[at]);
          else later_changed = later_changed || y2[at] != y1[at];
        }
    CHECK(later_changed);
  }

  SUBCASE("gradient of an early output does not reach later inputs") {
    Tensor early = sum(slice(y, 1, 0, 1));
    std::vector<double> gx = grad({early}, {x})[0].to_vector();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 1; t < T; ++t)
        for (int64_t k = 0; k < I; ++k) CHECK(gx[size_t((b * T + t) * I + k)] == 0.0);
  }

  CHECK_THROWS_AS(cell.forward(Tensor::zeros({B, T, I + 1}, DType::F64)), std::invalid_argument);
  CHECK_THROWS_AS(cell.step(Tensor::zeros({B, I}, DType::F64),
                            {Tensor::zeros({B, H + 1}, DType::F64), Tensor::zeros({B, H}, DType::F64)}),
                  std::invalid_argument);
}

TEST_CASE("modules keep second-order gradients") {
  // d/dx of <grad_x(loss), v> must match central differences of the first-order gradient.
  Generator gen(6);
  Linear lin(3, 3, true, gen, DType::F64);
  LayerNorm ln(3, 1e-5, DType::F64);
  Tensor x = leaf({0.3, -1.2, 2.0, 1.0, 0.1, -0.4}, {2, 3});
  Tensor v = Tensor::from_vector({1, -2, 0.5, 0.25, 3, -1}, {2, 3}, DType::F64);
  auto gv = [&] {
    SetGradGuard on(true);
    Tensor y = weighted_sum(tanh(ln.forward(lin.forward(x))));
    GradOptions opt;
    opt.create_graph = true;
    return sum(mul(grad({y}, {x}, {}, opt)[0], v));
  };
  CHECK(check_grads(gv, {x, lin.weight}) == 6 + 9);
}

// ---- checkpoint

namespace {

// Two outputs from two inputs: x (2, 3), w (3, 3).
std::vector<Tensor> region(const std::vector<Tensor>& in) {
  Tensor h = tanh(matmul(in[0], in[1]));  // (2, 3)
  return {mul(h, in[0]), sum(mul(sigmoid(in[0]), in[0]))};
}

Tensor region_loss(const std::vector<Tensor>& outs) { return add(weighted_sum(outs[0]), mul(outs[1], outs[1])); }

struct CkptInputs {
  Tensor x = leaf({0.3, -1.2, 2.0, 1.0, 0.1, -0.4}, {2, 3});
  Tensor w = leaf({0.5, -0.3, 0.8, 0.1, 0.9, -0.7, -0.2, 0.4, 0.6}, {3, 3});
};

GradOptions create_graph_opt() {
  GradOptions opt;
  opt.create_graph = true;
  return opt;
}

}  // namespace

TEST_CASE("checkpoint: outputs and first-order gradients match the plain region") {
  CkptInputs in;
  std::vector<Tensor> plain = region({in.x, in.w});
  std::vector<Tensor> ck = checkpoint(region, {in.x, in.w});
  REQUIRE(ck.size() == 2);
  for (size_t i = 0; i < 2; ++i) check_close(ck[i].to_vector(), plain[i].to_vector());
  REQUIRE(grad_fn(ck[0]) != nullptr);
  CHECK(grad_fn(ck[0]) == grad_fn(ck[1]));
  CHECK(grad_fn(ck[0])->name() == "checkpoint");
  CHECK(grad_fn(ck[0])->seq > grad_fn(plain[0])->seq);

  std::vector<Tensor> gp = grad({region_loss(plain)}, {in.x, in.w});
  std::vector<Tensor> gc = grad({region_loss(ck)}, {in.x, in.w});
  for (size_t i = 0; i < 2; ++i) check_close(gc[i].to_vector(), gp[i].to_vector());

  // backward() into .grad goes through the same node.
  backward(region_loss(checkpoint(region, {in.x, in.w})));
  check_close(grad_of(in.w).to_vector(), gp[1].to_vector());
}

TEST_CASE("checkpoint: second-order gradients match the plain region") {
  CkptInputs in;
  Tensor v = Tensor::from_vector({1, -2, 0.5, 0.25, 3, -1}, {2, 3}, DType::F64);
  // <d loss/dx, v> differentiated again with respect to x and w.
  auto hvp = [&](bool ck) {
    std::vector<Tensor> outs = ck ? checkpoint(region, {in.x, in.w}) : region({in.x, in.w});
    Tensor gx = grad({region_loss(outs)}, {in.x}, {}, create_graph_opt())[0];
    return grad({sum(mul(gx, v))}, {in.x, in.w});
  };
  std::vector<Tensor> want = hvp(false), got = hvp(true);
  for (size_t i = 0; i < 2; ++i) CHECK(check_close(got[i].to_vector(), want[i].to_vector()) > 0);

  // And against central differences of the first-order gradient.
  CHECK(check_grads([&] {
    SetGradGuard on(true);
    Tensor gx = grad({region_loss(checkpoint(region, {in.x, in.w}))}, {in.x}, {}, create_graph_opt())[0];
    return sum(mul(gx, v));
  }, {in.x, in.w}) == 6 + 9);
}

TEST_CASE("checkpoint: an input derived from another input is not counted twice") {
  Tensor x = leaf({0.7, -0.4, 1.1}, {3});
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(mul(tanh(in[0]), in[1]))}; };
  auto run = [&](bool ck, bool second) {
    Tensor y = mul(x, x);  // the second input depends on the first
    Tensor out = ck ? checkpoint(fn, {x, y})[0] : fn({x, y})[0];
    if (!second) return grad({out}, {x})[0];
    Tensor gx = grad({out}, {x}, {}, create_graph_opt())[0];
    return grad({sum(mul(gx, gx))}, {x})[0];
  };
  CHECK(check_close(run(true, false).to_vector(), run(false, false).to_vector()) == 3);
  CHECK(check_close(run(true, true).to_vector(), run(false, true).to_vector()) == 3);
}

TEST_CASE("checkpoint: a create_graph inner step inside an outer loss") {
  // TTT shape: w1 = w0 − η·∇_w L_inner(w0) through the checkpoint, outer loss on w1, gradient to w0 and x.
  auto outer = [](bool ck, const Tensor& w0, const Tensor& x) {
    std::vector<Tensor> outs = ck ? checkpoint(region, {x, w0}) : region({x, w0});
    Tensor g = grad({region_loss(outs)}, {w0}, {}, create_graph_opt())[0];  // (3, 3)
    Tensor w1 = sub(w0, affine(g, 0.1, 0));
    return weighted_sum(tanh(matmul(x, w1)), 11);
  };
  CkptInputs in;
  std::vector<Tensor> want = grad({outer(false, in.w, in.x)}, {in.w, in.x});
  std::vector<Tensor> got = grad({outer(true, in.w, in.x)}, {in.w, in.x});
  for (size_t i = 0; i < 2; ++i) CHECK(check_close(got[i].to_vector(), want[i].to_vector()) > 0);
  CHECK(check_grads([&] { SetGradGuard on(true); return outer(true, in.w, in.x); }, {in.w, in.x}) == 9 + 6);
}

TEST_CASE("checkpoint: unused inputs, no recording, retain_graph, release and in-place errors") {
  CkptInputs in;
  REQUIRE((requires_grad(in.x) && requires_grad(in.w)));  // every subcase differentiates in both
  auto first_only = [](const std::vector<Tensor>& xs) { return std::vector<Tensor>{sum(exp(xs[0]))}; };

  SUBCASE("an input the region ignores gets no gradient") {
    Tensor y = checkpoint(first_only, {in.x, in.w})[0];
    GradOptions opt;
    opt.allow_unused = true;
    std::vector<Tensor> g = grad({y}, {in.x, in.w}, {}, opt);
    CHECK(check_close(g[0].to_vector(), exp(in.x).to_vector()) == 6);
    // The node returns no gradient for w; the engine reports a reachable input as zeros.
    REQUIRE(g[1].defined());
    CHECK(check_close(g[1].to_vector(), std::vector<double>(9, 0.0)) == 9);
  }
  SUBCASE("nothing is recorded without an input that requires grad, or under NoGradGuard") {
    Tensor c = Tensor::from_vector({1, 2}, {2}, DType::F64);
    CHECK(grad_fn(checkpoint(first_only, {c})[0]) == nullptr);
    NoGradGuard ng;
    CHECK(grad_fn(checkpoint(first_only, {in.x})[0]) == nullptr);
  }
  SUBCASE("retain_graph allows a second backward; without it the second one throws") {
    Tensor y = checkpoint(first_only, {in.x})[0];
    GradOptions keep;
    keep.retain_graph = true;
    backward(y, {}, keep);
    backward(y);
    check_close(grad_of(in.x).to_vector(), affine(exp(in.x), 2, 0).to_vector());
    CHECK_THROWS_WITH_AS(backward(y), doctest::Contains("checkpoint a second time"), std::runtime_error);
  }
  SUBCASE("modifying a saved input in place is detected") {
    Tensor y = checkpoint(first_only, {in.x})[0];
    assign(in.x, {0, 0, 0, 0, 0, 0});
    CHECK_THROWS_WITH_AS(backward(y), doctest::Contains("modified in place"), std::runtime_error);
  }
}
