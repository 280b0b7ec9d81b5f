// The tensor layer: views share storage, strides, broadcasting, kernels vs references, RNG.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/kernels.h"
#include "tensor/rng.h"

using namespace ponder;

TEST_CASE("views share storage and report geometry") {
  Tensor a = Tensor::from_vector({0, 1, 2, 3, 4, 5}, {2, 3}, DType::F64);
  Tensor t = raw::transpose(a, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.strides() == Shape{1, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
  Tensor s = raw::slice(a, 1, 1, 3);
  CHECK(s.to_vector() == std::vector<double>{1, 2, 4, 5});
  raw::fill_(s, 9);
  CHECK(a.to_vector() == std::vector<double>{0, 9, 9, 3, 9, 9});
  CHECK(a.version() == 1);  // in-place writes through a view bump the shared counter
  Tensor e = raw::expand(Tensor::from_vector({1, 2}, {2, 1}, DType::F64), {2, 2, 3});
  CHECK(e.strides()[0] == 0);
  CHECK(raw::contiguous(e).to_vector() == std::vector<double>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
}

TEST_CASE("clear errors on impossible shapes") {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({4, 5});
  CHECK_THROWS_WITH_AS(raw::binary(BinaryOp::Add, a, b), doctest::Contains("do not broadcast"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(raw::matmul(a, b), doctest::Contains("inner dimensions differ"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(raw::reshape(a, {4, 2}), doctest::Contains("does not hold"), std::invalid_argument);
  CHECK_THROWS_AS(raw::index_select(a, 0, Tensor::from_ints({2}, {1})), std::out_of_range);
  CHECK_THROWS_WITH_AS(raw::binary(BinaryOp::Add, a, Tensor::zeros({2, 3}, DType::F64)), doctest::Contains("dtype"),
                       std::invalid_argument);
}

TEST_CASE("BLAS matmul equals the naive reference for every layout") {
  Generator g(3);
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor a = g.normal({3, 37, 19}, 0, 1, dt), b = g.normal({19, 23}, 0, 1, dt);
    Tensor at = raw::contiguous(raw::transpose(a, 1, 2));  // (3, 19, 37)
    for (bool trans_a : {false, true}) {
      Tensor av = trans_a ? raw::transpose(at, 1, 2) : a;
      Tensor fast = raw::matmul(av, b);
      Tensor slow = Tensor::empty(fast.shape(), dt);
      cpu::matmul_naive(slow, raw::expand(av, {3, 37, 19}), raw::expand(b, {3, 19, 23}));
      auto f = fast.to_vector(), s = slow.to_vector();
      double err = 0;
      for (size_t i = 0; i < f.size(); ++i) err = std::max(err, std::abs(f[i] - s[i]));
      CHECK(err < (dt == DType::F32 ? 1e-4 : 1e-12));
    }
  }
}

TEST_CASE("RNG is counter based: reproducible and independent of thread count") {
  cpu::set_num_threads(1);
  Generator g1(42);
  auto a = g1.normal({100000}, 0, 1, DType::F64).to_vector();
  cpu::set_num_threads(2);
  Generator g2(42);
  auto b = g2.normal({100000}, 0, 1, DType::F64).to_vector();
  CHECK(a == b);
  double m = 0, v = 0;
  for (double x : a) m += x / double(a.size());
  for (double x : a) v += (x - m) * (x - m) / double(a.size());
  CHECK(std::abs(m) < 0.02);
  CHECK(std::abs(v - 1) < 0.02);
  Generator g3(7);
  auto p = g3.permutation(10);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 10; ++i) CHECK(sorted[size_t(i)] == i);
  Tensor probs = Tensor::from_vector({0, 1, 0, 0.5, 0.5, 0}, {2, 3}, DType::F64);
  for (int i = 0; i < 20; ++i) {
    auto k = g3.categorical(probs).to_ints();
    CHECK(k[0] == 1);
    CHECK(k[1] != 2);
  }
}

TEST_CASE("reductions are bitwise identical across thread counts") {
  Generator g(5);
  Tensor x = g.normal({300, 700}, 0, 1, DType::F32);
  cpu::set_num_threads(1);
  auto a = raw::reduce(ReduceOp::Sum, x, {0}, false).to_vector();
  auto c = raw::cumsum(x, 1, false).to_vector();
  cpu::set_num_threads(2);
  CHECK(raw::reduce(ReduceOp::Sum, x, {0}, false).to_vector() == a);
  CHECK(raw::cumsum(x, 1, false).to_vector() == c);
}

TEST_CASE("one_hot marks one class per index and rejects out-of-range indices") {
  Tensor oh = raw::one_hot(Tensor::from_ints({2, 0, 3}, {3}), 4, DType::F64);
  CHECK(oh.shape() == Shape{3, 4});
  CHECK(oh.to_vector() == std::vector<double>{0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1});
  CHECK_THROWS_WITH_AS(raw::one_hot(Tensor::from_ints({4}, {1}), 4, DType::F32), doctest::Contains("out of range"),
                       std::out_of_range);
}

TEST_CASE("freed CPU blocks are cached by size, reused, and bounded by the cache limit") {
  cpu::release_alloc_cache();
  CHECK(cpu::alloc_cache_bytes() == 0);
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({1000}, DType::F32);
    first = t.data<float>();
  }
  CHECK(cpu::alloc_cache_bytes() == 4032);  // 4000 bytes rounded up to 64
  {
    Tensor t = Tensor::empty({1000}, DType::F32);
    CHECK(t.data<float>() == first);  // the cached block comes back
    CHECK(cpu::alloc_cache_bytes() == 0);
  }
  cpu::set_alloc_cache_limit(1000);  // below one block: the cache is emptied and nothing is kept
  CHECK(cpu::alloc_cache_bytes() == 0);
  { Tensor t = Tensor::empty({1000}, DType::F32); }
  CHECK(cpu::alloc_cache_bytes() == 0);
  cpu::set_alloc_cache_limit(size_t(1) << 30);
  const MemoryStats before = memory_stats(Device::CPU);
  { Tensor t = Tensor::empty({1000}, DType::F32); }
  CHECK(memory_stats(Device::CPU).live_bytes == before.live_bytes);  // cached blocks are not live
  cpu::release_alloc_cache();
  CHECK(cpu::alloc_cache_bytes() == 0);
}
