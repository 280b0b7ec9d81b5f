// FLOP counters equal analytic counts (rules in tensor/flops.h), per op and for a 2-layer MLP.
#include <doctest/doctest.h>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tensor/rng.h"

using namespace ponder;

TEST_CASE("per-op FLOP rules") {
  Generator g(1);
  Tensor a = g.normal({7, 5}, 0, 1), b = g.normal({5, 3}, 0, 1);
  {
    FlopScope s;
    matmul(a, b);
    CHECK(s.counts().category(FlopCat::Matmul) == 2 * 7 * 5 * 3);
    CHECK(s.counts().total() == 2 * 7 * 5 * 3);
  }
  {
    Tensor ba = g.normal({64, 16, 64}, 0, 1), bb = g.normal({64, 64, 64}, 0, 1);
    FlopScope s;
    matmul(ba, bb);
    CHECK(s.counts().category(FlopCat::Matmul) == 2ull * 16 * 64 * 64 * 64);
  }
  {
    FlopScope s;
    add(a, g.normal({5}, 0, 1));  // broadcast: one FLOP per output element
    exp(a);
    CHECK(s.counts().category(FlopCat::Elementwise) == 35 + 35);
  }
  {
    FlopScope s;
    sum(a, {0});
    cumsum(a, 1);
    CHECK(s.counts().category(FlopCat::Reduction) == 35 + 35);
  }
  {
    FlopScope s;
    reshape(a, {35});
    transpose(a, 0, 1);
    slice(a, 0, 1, 3);
    cat({a, a}, 0);
    CHECK(s.counts().total() == 0);  // data movement counts bytes, not FLOPs
    CHECK(s.counts().bytes_moved > 0);
  }
}

TEST_CASE("nested scopes add up") {
  Tensor a = Tensor::full({10}, 1.0);
  FlopScope outer;
  exp(a);
  {
    FlopScope inner;
    exp(a);
    exp(a);
    CHECK(inner.counts().total() == 20);
  }
  CHECK(outer.counts().total() == 30);
}

TEST_CASE("2-layer MLP forward and backward FLOPs equal the analytic count") {
  const uint64_t B = 8, D = 5, H = 7, O = 3;
  Generator g(2);
  Tensor x = g.normal({int64_t(B), int64_t(D)}, 0, 1), t = g.normal({int64_t(B), int64_t(O)}, 0, 1);
  Tensor w1 = g.normal({int64_t(D), int64_t(H)}, 0, 1), b1 = g.normal({int64_t(H)}, 0, 1);
  Tensor w2 = g.normal({int64_t(H), int64_t(O)}, 0, 1), b2 = g.normal({int64_t(O)}, 0, 1);
  for (Tensor* p : {&w1, &b1, &w2, &b2}) set_requires_grad(*p);
  FlopScope s;
  Tensor h = relu(add(matmul(x, w1), b1));
  Tensor d = sub(add(matmul(h, w2), b2), t);
  Tensor loss = mean(mul(d, d));
  backward(loss);
  FlopCounts c = s.counts();
  // forward: two GEMMs; bias adds, relu, sub, square; the sum; the 1/n scale
  CHECK(c.get(FlopCat::Matmul, Phase::Forward) == 2 * B * D * H + 2 * B * H * O);
  CHECK(c.get(FlopCat::Elementwise, Phase::Forward) == 2 * B * H + 3 * B * O + 1);
  CHECK(c.get(FlopCat::Reduction, Phase::Forward) == B * O);
  // backward: dW2, dh, dW1 (x needs no grad); scale, two products for d·d and their sum, relu mask
  // and product; bias gradients are reductions
  CHECK(c.get(FlopCat::Matmul, Phase::Backward) == 2 * (2 * B * H * O) + 2 * B * D * H);
  CHECK(c.get(FlopCat::Elementwise, Phase::Backward) == 1 + 3 * B * O + 2 * B * H);
  CHECK(c.get(FlopCat::Reduction, Phase::Backward) == B * O + B * H);
}
