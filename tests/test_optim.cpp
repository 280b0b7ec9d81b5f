// Optimisers against the update rules written out in plain doubles; gradient clipping; the version
// check that stops a backward through parameters an optimiser has since changed.
#include <doctest/doctest.h>

#include <cmath>

#include "autograd/engine.h"
#include "autograd/optim.h"
#include "tensor/kernels.h"

using namespace ponder;

namespace {

Tensor param(const std::vector<double>& v, DType dtype = DType::F64) {
  Tensor t = Tensor::from_vector(v, {int64_t(v.size())}, dtype);
  return set_requires_grad(t);
}

void set_grad_values(const Tensor& p, const std::vector<double>& g) {
  set_grad(p, Tensor::from_vector(g, p.shape(), p.dtype()));
}

void check_values(const Tensor& t, const std::vector<double>& want, double tol) {
  std::vector<double> got = t.to_vector();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

// Reference AdamW on plain doubles (the formulas of optim.h), one parameter vector, a fixed gradient.
std::vector<double> adamw_reference(std::vector<double> p, const std::vector<double>& g, int steps, double lr,
                                    double b1, double b2, double eps, double wd) {
  std::vector<double> m(p.size(), 0.0), v(p.size(), 0.0);
  for (int t = 1; t <= steps; ++t)
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] *= 1 - lr * wd;
      p[i] -= lr * (m[i] / (1 - std::pow(b1, t))) / (std::sqrt(v[i] / (1 - std::pow(b2, t))) + eps);
    }
  return p;
}

}  // namespace

TEST_CASE("AdamW: two steps match the hand-computed update") {
  const std::vector<double> p0{1.0, -2.0, 0.5}, g{0.5, -0.1, 2.0};
  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  Tensor p = param(p0);
  AdamW opt({p}, lr, b1, b2, eps, wd);
  for (int s = 0; s < 2; ++s) {
    set_grad_values(p, g);
    opt.step();
  }
  CHECK(opt.steps() == 2);
  check_values(p, adamw_reference(p0, g, 2, lr, b1, b2, eps, wd), 1e-14);
  // With a constant gradient the bias-corrected first step is lr·sign(g) (up to eps), a known anchor.
  Tensor q = param({0.0});
  AdamW one({q}, lr, b1, b2, eps, 0.0);
  set_grad_values(q, {3.0});
  one.step();
  CHECK(q.item() == doctest::Approx(-lr).epsilon(1e-7));
  // The moment buffers are exposed for checkpoints: after two steps m = (1 − β1²)·g.
  check_values(opt.exp_avg()[0], {(1 - b1 * b1) * g[0], (1 - b1 * b1) * g[1], (1 - b1 * b1) * g[2]}, 1e-14);

  SUBCASE("float32 parameters follow the same rule") {
    Tensor p32 = param(p0, DType::F32);
    AdamW opt32({p32}, lr, b1, b2, eps, wd);
    for (int s = 0; s < 2; ++s) {
      set_grad_values(p32, g);
      opt32.step();
    }
    CHECK(p32.dtype() == DType::F32);
    check_values(p32, adamw_reference(p0, g, 2, lr, b1, b2, eps, wd), 1e-6);
  }
}

TEST_CASE("AdamW: weight decay is decoupled from the gradient") {
  const double lr = 0.05, wd = 0.2;
  Tensor p = param({2.0, -3.0});
  AdamW opt({p}, lr, 0.9, 0.999, 1e-8, wd);
  set_grad_values(p, {0.0, 0.0});
  opt.step();
  // Zero gradient: the Adam part is 0 / (0 + eps) = 0, only the decay factor remains.
  check_values(p, {2.0 * (1 - lr * wd), -3.0 * (1 - lr * wd)}, 1e-15);
  // Decay coupled into the gradient (Adam + L2) would have taken a full normalised step of lr instead.
  CHECK(p.to_vector()[0] > 2.0 - lr + 0.01);
}

TEST_CASE("SGD: plain and heavy-ball momentum steps") {
  const std::vector<double> p0{1.0, -1.0}, g{0.5, 2.0};
  const double lr = 0.1, mu = 0.9;
  Tensor p = param(p0);
  SGD opt({p}, lr, mu);
  std::vector<double> want = p0, vel{0, 0};
  for (int s = 0; s < 3; ++s) {
    set_grad_values(p, g);
    opt.step();
    for (size_t i = 0; i < 2; ++i) {
      vel[i] = s == 0 ? g[i] : mu * vel[i] + g[i];  // PyTorch: the first step takes v = g
      want[i] -= lr * vel[i];
    }
    check_values(p, want, 1e-15);
  }

  Tensor q = param({1.0});
  SGD plain({q}, 0.5);
  set_grad_values(q, {4.0});
  plain.step();
  check_values(q, {-1.0}, 1e-15);
  CHECK(q.to_vector()[0] == -1.0);  // 1 − 0.5·4, exactly: no momentum buffer in plain SGD
}

TEST_CASE("optimisers skip parameters without a gradient; zero_grad drops gradients") {
  Tensor a = param({1.0, 2.0}), b = param({3.0});
  AdamW opt({a, b}, 0.1);
  set_grad_values(a, {1.0, 1.0});
  opt.step();
  CHECK(b.item() == 3.0);
  CHECK(a.to_vector()[0] != 1.0);
  opt.zero_grad();
  CHECK_FALSE(grad_of(a).defined());
  CHECK_FALSE(grad_of(b).defined());
  std::vector<double> before = a.to_vector();
  opt.step();  // no gradients at all: nothing moves
  CHECK(a.to_vector() == before);
  CHECK(opt.params().size() == 2);

  Tensor ints = Tensor::from_ints({1, 2}, {2});
  CHECK_THROWS_AS(SGD({ints}, 0.1), std::invalid_argument);
  CHECK_THROWS_AS(SGD({Tensor()}, 0.1), std::invalid_argument);
}

TEST_CASE("clip_grad_norm: scales to the max norm and returns the norm before") {
  Tensor a = param({0.0, 0.0}), b = param({0.0}), none = param({0.0});
  set_grad_values(a, {3.0, 0.0});
  set_grad_values(b, {4.0});
  REQUIRE(!grad_of(none).defined());  // a parameter without a gradient is skipped, not counted as 0
  SUBCASE("above the limit") {
    double n = clip_grad_norm({a, b, none}, 1.0);
    CHECK(n == doctest::Approx(5.0).epsilon(1e-15));
    const double c = 1.0 / (5.0 + 1e-6);
    check_values(grad_of(a), {3.0 * c, 0.0}, 1e-15);
    check_values(grad_of(b), {4.0 * c}, 1e-15);
    CHECK_FALSE(grad_of(none).defined());
    CHECK(clip_grad_norm({a, b}, 1.0) == doctest::Approx(1.0).epsilon(1e-6));
  }
  SUBCASE("below the limit nothing changes") {
    CHECK(clip_grad_norm({a, b}, 10.0) == doctest::Approx(5.0));
    check_values(grad_of(a), {3.0, 0.0}, 0);
    check_values(grad_of(b), {4.0}, 0);
  }
  SUBCASE("float32 gradients") {
    Tensor f = param({0.0, 0.0}, DType::F32);
    set_grad_values(f, {6.0, 8.0});
    CHECK(clip_grad_norm({f}, 5.0) == doctest::Approx(10.0));
    CHECK(grad_of(f).dtype() == DType::F32);
    check_values(grad_of(f), {3.0, 4.0}, 1e-6);
  }
  CHECK_THROWS_AS(clip_grad_norm({a}, -1.0), std::invalid_argument);
}

TEST_CASE("clip_grad_norm: a device without the fused reduction sums on the device to the same norm") {
  // CUDA has no fused sum of squares: its per-parameter sums are added on the device and read once. Hiding the CPU
  // kernels runs that path here; the norm and the clipped gradients must be the fused path's, bit for bit.
  auto make = [] {
    std::vector<Tensor> ps;
    int i = 0;
    for (int64_t n : {5, 12, 1}) {
      Tensor p = param(std::vector<double>(size_t(n), 0.0), DType::F32);
      std::vector<double> g(static_cast<size_t>(n));
      for (double& x : g) x = std::sin(1.7 * ++i);
      set_grad_values(p, g);
      ps.push_back(p);
    }
    return ps;
  };
  std::vector<Tensor> fused = make(), composed = make();
  const double want = clip_grad_norm(fused, 0.5);
  raw::set_fused_kernels_hidden(true);
  const double got = clip_grad_norm(composed, 0.5);
  raw::set_fused_kernels_hidden(false);
  REQUIRE(want > 0.5);  // the gradients were clipped, so the scaling is compared too
  CHECK(got == want);
  for (size_t i = 0; i < fused.size(); ++i) check_values(grad_of(composed[i]), grad_of(fused[i]).to_vector(), 0);
}

TEST_CASE("a step on a parameter a live graph saved makes that backward throw") {
  Tensor p = param({1.0, 2.0});
  Tensor loss = sum(mul(p, p));  // mul saves p for its backward
  SGD opt({p}, 0.1);
  set_grad_values(p, {1.0, 1.0});
  const uint32_t v0 = p.version();
  opt.step();
  CHECK(p.version() > v0);
  CHECK_THROWS_WITH_AS(backward(loss), doctest::Contains("modified in place"), std::runtime_error);

  // A fresh forward after the step is fine.
  opt.zero_grad();
  backward(sum(mul(p, p)));
  check_values(grad_of(p), {2 * 0.9, 2 * 1.9}, 1e-15);
}
