// Engine semantics: accumulation, higher-order gradients, Hessian-vector products, version
// checks, released graphs, memory flatness over long create_graph loops, deep graphs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tensor/flops.h"
#include "tensor/rng.h"

using namespace ponder;

namespace {
Tensor leaf(std::vector<double> v, Shape s) {
  Tensor t = Tensor::from_vector(v, s, DType::F64);
  set_requires_grad(t);
  return t;
}
GradOptions create_graph() {
  GradOptions o;
  o.create_graph = true;
  return o;
}
}  // namespace

TEST_CASE("backward accumulates across calls") {
  Tensor x = leaf({1, 2, 3}, {3});
  backward(sum(mul(x, x)));
  backward(sum(mul(x, x)));
  CHECK(grad_of(x).to_vector() == std::vector<double>{4, 8, 12});
  zero_grad(x);
  CHECK_FALSE(grad_of(x).defined());
}

TEST_CASE("third derivative of x^3 is 6 at any x") {
  for (double v : {-1.7, 0.0, 0.5, 2.0, 10.0}) {
    Tensor x = leaf({v}, {1});
    Tensor y = sum(mul(mul(x, x), x));
    Tensor g1 = grad({y}, {x}, {}, create_graph())[0];
    Tensor g2 = grad({sum(g1)}, {x}, {}, create_graph())[0];
    Tensor g3 = grad({sum(g2)}, {x}, {}, create_graph())[0];
    CHECK(g1.item() == doctest::Approx(3 * v * v));
    CHECK(g2.item() == doctest::Approx(6 * v));
    CHECK(g3.item() == doctest::Approx(6.0));
  }
}

TEST_CASE("Hessian-vector product by double backward matches finite differences of gradients") {
  Generator gen(9);
  Tensor x0 = gen.normal({6}, 0, 1, DType::F64), u = gen.normal({6}, 0, 1, DType::F64);
  Tensor A = gen.normal({6, 6}, 0, 1, DType::F64);
  auto f = [&](const Tensor& x) {  // a non-quadratic scalar function
    Tensor h = tanh(matmul(reshape(x, {1, 6}), A));
    return add(sum(mul(h, h)), sum(exp(affine(x, 0.3, 0))));
  };
  auto gradient = [&](const Tensor& xv) {
    Tensor x = raw::clone(xv);
    set_requires_grad(x);
    return grad({f(x)}, {x})[0];
  };
  Tensor x = raw::clone(x0);
  set_requires_grad(x);
  Tensor g = grad({f(x)}, {x}, {}, create_graph())[0];
  Tensor hv = grad({sum(mul(g, u))}, {x})[0];
  const double eps = 1e-6;
  auto gp = gradient(raw::binary(BinaryOp::Add, x0, raw::unary(UnaryOp::Affine, u, eps, 0))).to_vector();
  auto gm = gradient(raw::binary(BinaryOp::Sub, x0, raw::unary(UnaryOp::Affine, u, eps, 0))).to_vector();
  auto h = hv.to_vector();
  for (size_t i = 0; i < h.size(); ++i) CHECK(h[i] == doctest::Approx((gp[i] - gm[i]) / (2 * eps)).epsilon(1e-5));
}

TEST_CASE("modifying a saved tensor in place is caught at backward") {
  Tensor x = leaf({1, 2}, {2});
  Tensor w = Tensor::from_vector({3, 4}, {2}, DType::F64);
  Tensor y = sum(mul(x, w));  // mul saves w
  raw::fill_(w, 0.0);
  CHECK_THROWS_WITH(backward(y), doctest::Contains("modified in place"));
  Tensor p = leaf({1}, {1});
  CHECK_THROWS_WITH(fill_(p, 2.0), doctest::Contains("requires grad"));
}

TEST_CASE("a second backward through a released graph throws; retain_graph allows it") {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = sum(exp(x));
  backward(y);
  CHECK_THROWS_WITH(backward(y), doctest::Contains("second time"));
  Tensor z = sum(exp(x));
  GradOptions keep;
  keep.retain_graph = true;
  backward(z, {}, keep);
  CHECK_NOTHROW(backward(z));
}

TEST_CASE("grad() wrt intermediate tensors, unused inputs, detach") {
  Tensor x = leaf({1, 2}, {2});
  Tensor h = mul(x, x);
  Tensor y = sum(exp(h));
  auto g = grad({y}, {h, x}, {}, GradOptions{true, false, false, nullptr});
  CHECK(g[0].to_vector()[1] == doctest::Approx(std::exp(4.0)));
  CHECK(g[1].to_vector()[1] == doctest::Approx(std::exp(4.0) * 4));
  Tensor unused = leaf({1}, {1});
  CHECK_THROWS_WITH(grad({y}, {unused}), doctest::Contains("not reachable"));
  GradOptions allow;
  allow.allow_unused = true;
  allow.retain_graph = true;
  CHECK_FALSE(grad({y}, {unused}, {}, allow)[0].defined());
  Tensor d = detach(h);
  CHECK_FALSE(requires_grad(d));
  CHECK_THROWS_WITH(grad({sum(d)}, {x}), doctest::Contains("does not require grad"));
  Tensor big = mul(x, x);
  CHECK_THROWS_WITH(grad({big}, {x}), doctest::Contains("grad_outputs"));
}

TEST_CASE("1,000 create_graph inner/outer steps keep live memory flat") {
  Generator gen(1);
  Tensor w0 = gen.normal({8, 8}, 0, 0.1, DType::F64);
  set_requires_grad(w0);
  Tensor x = gen.normal({16, 8}, 0, 1, DType::F64), y = gen.normal({16, 8}, 0, 1, DType::F64);
  int64_t live_early = 0;
  for (int step = 0; step < 1000; ++step) {
    Tensor inner = mean(pow(sub(matmul(x, w0), y), 2));
    Tensor g = grad({inner}, {w0}, {}, create_graph())[0];
    Tensor w1 = sub(w0, affine(g, 0.1, 0));
    Tensor outer = mean(pow(sub(matmul(y, w1), x), 2));
    backward(outer);
    zero_grad(w0);
    if (step == 9) live_early = memory_stats(Device::CPU).live_bytes;
  }
  CHECK(memory_stats(Device::CPU).live_bytes <= live_early);
}

TEST_CASE("very deep graphs run without recursion") {
  Tensor x = leaf({0.5}, {1});
  Tensor h = x;
  for (int i = 0; i < 100000; ++i) h = affine(h, 1.0, 0.0);
  Tensor g = grad({sum(h)}, {x})[0];
  CHECK(g.item() == 1.0);
  // Graphs dropped without a backward are freed in a loop too, also when the chain runs through
  // saved tensors (mul saves its inputs).
  Tensor c = Tensor::from_vector({1.0}, {1}, DType::F64);
  for (int i = 0; i < 100000; ++i) h = mul(affine(h, 1.0, 0.0), c);
  CHECK(requires_grad(h));
  h = Tensor();
  CHECK_FALSE(h.defined());
}

TEST_CASE("graph dump lists nodes with op, shape, FLOPs and gradient norm") {
  Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = leaf({1, 0, 2, 1, 0, 1}, {3, 2});
  std::string d = graph_dump(sum(tanh(matmul(a, b))));
  CHECK(d.find("matmul") != std::string::npos);
  CHECK(d.find("[2, 2]") != std::string::npos);
  CHECK(d.find("24") != std::string::npos);  // 2·2·3·2 forward FLOPs of the matmul
  CHECK(d.find("accumulate_grad") != std::string::npos);
}

TEST_CASE("a backward trace books each node's backward FLOPs and names the parameters it reaches") {
  Tensor a = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = leaf({1, 0, 2, 1, 0, 1}, {3, 2});
  set_name(a, "a");
  set_name(b, "b");
  const Tensor y = sum(tanh(matmul(a, b)));
  for (bool norms : {false, true}) {
    GraphTrace trace;
    trace.grad_norms = norms;
    GradOptions opt;
    opt.trace = &trace;
    opt.retain_graph = true;
    const FlopScope scope;
    backward(y, {}, opt);
    uint64_t booked = 0;
    std::vector<std::string> params;
    for (const TraceEntry& e : trace.entries) {
      booked += e.backward_flops;
      if (!e.label.empty()) params.push_back(e.label);
      // dA = G·Bᵀ and dB = Aᵀ·G: two products of 2·2·2·3 FLOPs each.
      if (e.op == "matmul") CHECK(e.backward_flops == 2 * 24);
      if (e.op == "matmul") CHECK((e.grad_norm > 0) == norms);
    }
    CHECK(booked == scope.counts().phase(Phase::Backward));  // every backward FLOP belongs to one node
    std::sort(params.begin(), params.end());
    CHECK(params == std::vector<std::string>{"a", "b"});
    zero_grad(a);
    zero_grad(b);
  }
}

TEST_CASE("graphs are freed when their last tensor goes, also when an op saves its own result") {
  const int64_t before = memory_stats(Device::CPU).live_bytes;
  {
    Tensor x = leaf({3, 1, 2, 5}, {2, 2});
    Tensor y = sum(max(x, {0}, true));  // max with keepdim saves the tensor it returns
    Tensor g = grad({y}, {x}, {}, create_graph())[0];
    CHECK(g.to_vector() == std::vector<double>{1, 0, 0, 1});
  }
  CHECK(memory_stats(Device::CPU).live_bytes == before);
}

TEST_CASE("directional gradchecks pass on true gradients and fail on a wrong one, first and second order") {
  Generator gen(3);
  const Tensor x = gen.normal({3, 4}, 0, 1, DType::F64), w = gen.normal({4, 2}, 0, 1, DType::F64);
  auto good = [](const std::vector<Tensor>& xs) { return sum(tanh(matmul(xs[0], xs[1]))); };
  CHECK(directional_gradcheck(good, {x, w}, {true, true}).ok);
  CHECK(directional_gradgradcheck(good, {x, w}, {true, true}).ok);
  // x ⊙ detach(x): the engine sees half the true gradient of x², so first order must fail.
  auto half = [](const std::vector<Tensor>& xs) { return sum(mul(xs[0], detach(xs[0]))); };
  const CheckResult g = directional_gradcheck(half, {x}, {true});
  CHECK_FALSE(g.ok);
  CHECK(g.checked == 4);  // every direction is compared; the message names the first that is off
  CHECK(g.message.find("direction 0") != std::string::npos);
  // sum(x²) − sum((x − detach(x))²): the second term is 0 with gradient 0 at every point, but its Hessian, −2I,
  // cancels the true one in double backward. First order holds and second order must fail.
  auto flat = [](const std::vector<Tensor>& xs) {
    const Tensor d = sub(xs[0], detach(xs[0]));
    return sub(sum(mul(xs[0], xs[0])), sum(mul(d, d)));
  };
  CHECK(directional_gradcheck(flat, {x}, {true}).ok);
  CHECK_FALSE(directional_gradgradcheck(flat, {x}, {true}).ok);
}
