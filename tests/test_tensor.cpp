// The tensor layer: views share storage, strides, broadcasting, kernels vs references, RNG.
#include <cblas.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/runtime.h"
#include "tensor/kernels.h"
#include "tensor/precision.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

using namespace ponder;

// Every operation of the shapes' small vector against std::vector on a long random sequence, across the point where
// it leaves its inline storage (N = 3 here, so that happens often) and back through copies and moves.
TEST_CASE("SmallVector does what std::vector does, inline and on the heap") {
  using SV = SmallVector<int64_t, 3>;
  SV a;
  std::vector<int64_t> ref;
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  for (int step = 0; step < 20000; ++step) {
    const int64_t v = int64_t(next(1000));
    const size_t at = ref.empty() ? 0 : size_t(next(ref.size() + 1));
    switch (next(11)) {
      case 0: case 1: a.push_back(v); ref.push_back(v); break;
      case 2: if (!ref.empty()) { a.pop_back(); ref.pop_back(); } break;
      case 3: a.insert(a.begin() + at, v); ref.insert(ref.begin() + long(at), v); break;
      case 4: if (!ref.empty()) {  // an element of the array itself, which may move under the insert
          const size_t from = size_t(next(ref.size()));
          a.insert(a.begin() + at, 2, a[from]);
          ref.insert(ref.begin() + long(at), 2, ref[from]);
        } break;
      case 5: if (at < ref.size()) { a.erase(a.begin() + at); ref.erase(ref.begin() + long(at)); } break;
      case 6: { const size_t n = size_t(next(7)); a.resize(n, v); ref.resize(n, v); } break;
      case 10: if (!ref.empty()) {  // grows from one of its own elements, which may move
          const size_t n = ref.size() + size_t(next(6)), from = size_t(next(ref.size()));
          a.resize(n, a[from]);
          ref.resize(n, ref[from]);
        } break;
      case 7: { SV b(a); a = std::move(b); CHECK(b.empty()); } break;  // NOLINT(bugprone-use-after-move)
      case 8: { SV b = a; b.push_back(v); CHECK(b.size() == a.size() + 1); a = b; ref.push_back(v); } break;
      case 9: a.insert(a.begin() + at, {v, v + 1}); ref.insert(ref.begin() + long(at), {v, v + 1}); break;
    }
    REQUIRE(a.size() == ref.size());
    REQUIRE(std::equal(a.begin(), a.end(), ref.begin()));
    REQUIRE(a == SV(ref));
  }
  SV big{1, 2, 3, 4, 5};
  CHECK(big.capacity() >= 5);
  SV moved(std::move(big));
  CHECK(moved == SV{1, 2, 3, 4, 5});
  CHECK(big.empty());  // NOLINT(bugprone-use-after-move): a moved-from vector is left empty
  CHECK(SV{1, 2} < SV{1, 3});
  CHECK(SV{1, 2} != SV{1, 2, 0});
  CHECK(moved.vec() == std::vector<int64_t>{1, 2, 3, 4, 5});
}

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

// The TTT dual form's head views (tensor/kernels.h): no copy where the leading axes merge into two and the rows are
// as the caller allows; a contiguous copy otherwise; the same values either way.
TEST_CASE("dual_head_view: a mini-batch's slice of (B, H, N, f) is viewed, not copied") {
  Generator gen(3);
  const Tensor x = gen.normal({2, 5, 3, 4}, 0, 1, DType::F64);  // (B, N, H, f)
  const Tensor q = raw::slice(raw::permute(x, {0, 2, 1, 3}), 2, 1, 3);  // (B, H, 2, f): rows H·f apart
  const Tensor v = raw::dual_head_view(q, true);
  CHECK(v.shape() == Shape{2, 3, 2, 4});
  CHECK(v.strides() == Shape{60, 4, 12, 1});
  CHECK(&v.storage() == &x.storage());
  CHECK(raw::contiguous(v).to_vector() == raw::contiguous(q).to_vector());
  // Rows must be c apart when not allowed otherwise: a copy, viewed (1, G, r, c).
  const Tensor c = raw::dual_head_view(q, false);
  CHECK(c.shape() == Shape{1, 6, 2, 4});
  CHECK(&c.storage() != &x.storage());
  CHECK(raw::contiguous(c).to_vector() == raw::contiguous(q).to_vector());
  // A contiguous operand's leading axes merge into one; a broadcast one keeps its zero stride.
  const Tensor w = gen.normal({3, 4, 4}, 0, 1, DType::F64);
  const Tensor we = raw::expand(w, {2, 3, 4, 4});
  CHECK(raw::dual_head_view(w, false).strides() == Shape{0, 16, 4, 1});
  const Tensor wv = raw::dual_head_view(we, false);
  CHECK(wv.strides() == Shape{0, 16, 4, 1});
  CHECK(wv.shape() == Shape{2, 3, 4, 4});
  CHECK(&wv.storage() == &w.storage());
  // Three leading groups that do not merge (strides 24, 8, 48 over sizes 2, 2, 5): a copy.
  const Tensor u = raw::slice(raw::permute(gen.normal({5, 2, 3, 2, 4}, 0, 1, DType::F64), {1, 2, 0, 3, 4}), 1, 0, 2);
  const Tensor uv = raw::dual_head_view(u, true);
  CHECK(uv.shape() == Shape{1, 20, 2, 4});
  CHECK(&uv.storage() != &u.storage());
  CHECK(raw::contiguous(uv).to_vector() == raw::contiguous(u).to_vector());
}

// The CUDA dual backward reads its upstream packed: the three pieces' own storage where they are one packed tensor's
// parts, a packed copy otherwise; the same values either way.
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

TEST_CASE("reduced-precision operands: round to nearest even at 7 (bf16) or 10 (TF32) mantissa bits") {
  const float e7 = std::ldexp(1.0f, -7), e8 = std::ldexp(1.0f, -8), e10 = std::ldexp(1.0f, -10);
  CHECK(round_mantissa(1.0f, 7) == 1.0f);
  CHECK(round_mantissa(1 + e8, 7) == 1.0f);                            // a tie, kept part even: down
  CHECK(round_mantissa(1 + 3 * e8, 7) == 1 + 2 * e7);                  // a tie, kept part odd: up to even
  CHECK(round_mantissa(1 + e8 + std::ldexp(1.0f, -20), 7) == 1 + e7);  // past the tie: up
  CHECK(round_mantissa(-(1 + e8 + std::ldexp(1.0f, -20)), 7) == -(1 + e7));
  CHECK(round_mantissa(1 + e7 - std::ldexp(1.0f, -23), 7) == 1 + e7);
  CHECK(round_mantissa(1 + std::ldexp(1.0f, -11), 10) == 1.0f);        // TF32's tie
  CHECK(round_mantissa(1 + 3 * std::ldexp(1.0f, -11), 10) == 1 + 2 * e10);
  CHECK(round_mantissa(0.1f, 23) == 0.1f);
  CHECK(std::isinf(round_mantissa(std::numeric_limits<float>::max(), 7)));  // past bf16's largest finite value
  CHECK(std::isinf(round_mantissa(-std::numeric_limits<float>::infinity(), 7)));
  CHECK(std::isnan(round_mantissa(std::nanf(""), 7)));
  CHECK(round_mantissa(0.0f, 7) == 0.0f);
  CHECK(std::string(precision_name(parse_matmul_precision("bf16", "x"))) == "bf16");
  CHECK_THROWS_WITH_AS(parse_matmul_precision("fp8", "--precision"),
                       "--precision: expected f32, tf32 or bf16, got 'fp8'", std::invalid_argument);
}

TEST_CASE("float32 matmul at bf16 and TF32: the exact product of rounded operands with f32 sums, on every layout") {
  Generator g(5);
  const Tensor a = g.normal({3, 37, 19}, 0, 1, DType::F32), b = g.normal({19, 23}, 0, 1, DType::F32);
  const Tensor at = raw::transpose(raw::contiguous(raw::transpose(a, 1, 2)), 1, 2);  // a's values, column-major
  const Tensor bb = raw::expand(b, {3, 19, 23});
  const Tensor exact = raw::matmul(a, b);
  for (MatmulPrecision p : {MatmulPrecision::TF32, MatmulPrecision::BF16}) {
    INFO(precision_name(p));
    auto rounded = [&](const Tensor& t) {  // the reference: operands rounded here, products and sums in float64
      std::vector<double> v = raw::contiguous(t).to_vector();
      for (double& x : v) x = round_mantissa(float(x), mantissa_bits(p));
      return Tensor::from_vector(v, t.shape(), DType::F64);
    };
    Tensor want = Tensor::empty(exact.shape(), DType::F64);
    cpu::matmul_naive(want, raw::expand(rounded(a), {3, 37, 19}), raw::expand(rounded(b), {3, 19, 23}));
    const MatmulPrecisionScope scope(p);
    for (const Tensor& av : {a, at})
      for (const Tensor& bv : {b, bb}) {
        auto got = raw::matmul(av, bv).to_vector(), w = want.to_vector(), f = exact.to_vector();
        double err = 0, from_f32 = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          err = std::max(err, std::abs(got[i] - w[i]));
          from_f32 = std::max(from_f32, std::abs(got[i] - f[i]));
        }
        CHECK(err < 1e-4);                                   // f32 sums of 19 exact products
        CHECK(from_f32 > (p == MatmulPrecision::BF16 ? 1e-2 : 1e-4));  // and not the f32 product
      }
    const Tensor a64 = raw::to_dtype(a, DType::F64), b64 = raw::to_dtype(b, DType::F64);
    const MatmulPrecisionScope f32(MatmulPrecision::F32);
    const auto exact64 = raw::matmul(a64, b64).to_vector();
    set_matmul_precision(p);
    CHECK(raw::matmul(a64, b64).to_vector() == exact64);  // float64 products are never rounded
  }
}

namespace bf16_gemm_test {

// An m × k operand stored as asked (trans: k × m), rows ld apart (padding filled with NaN, which must not be read).
struct Operand {
  std::vector<float> v;
  int64_t ld;
  bool trans;
  float at(int64_t i, int64_t j) const { return trans ? v[size_t(j * ld + i)] : v[size_t(i * ld + j)]; }
};
Operand make(Generator& g, int64_t rows, int64_t cols, bool trans) {
  const int64_t r = trans ? cols : rows, c = trans ? rows : cols, ld = c + 3;
  Operand o{std::vector<float>(size_t(r * ld), std::nanf("")), ld, trans};
  const auto x = g.normal({r, c}, 0, 1, DType::F32).to_vector();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) o.v[size_t(i * ld + j)] = float(x[size_t(i * c + j)]);
  return o;
}

// Worst |C − ref| / bound over C, ref = the float64 product of the bf16-rounded operands and bound the error of
// float32 sums of k exact products, (k + 4)·2⁻²⁴·Σ|a·b|. C's padding columns (ldc = n + 2) must stay as set.
double worst(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k, const std::vector<float>& c) {
  double w = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n + 2; ++j) {
      const float got = c[size_t(i * (n + 2) + j)];
      if (j >= n) {
        if (got != -7.0f) return 1e30;
        continue;
      }
      double s = 0, sa = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = double(round_mantissa(a.at(i, p), 7)) * double(round_mantissa(b.at(p, j), 7));
        s += t;
        sa += std::abs(t);
      }
      w = std::max(w, std::abs(double(got) - s) / ((double(k) + 4) * std::ldexp(1.0, -24) * sa + 1e-300));
    }
  return w;
}

std::vector<float> run(const Operand& a, const Operand& b, int64_t m, int64_t n, int64_t k) {
  std::vector<float> c(size_t(m * (n + 2)), -7.0f);
  cpu::gemm_bf16(a.trans, b.trans, m, n, k, a.v.data(), a.ld, b.v.data(), b.ld, c.data(), n + 2);
  return c;
}

}  // namespace bf16_gemm_test

TEST_CASE("bf16 GEMM kernel: the rounded operands' exact products in float32 sums, every layout and edge size") {
  using namespace bf16_gemm_test;
  if (!cpu::bf16_gemm_supported()) {  // the build or CPU has no AVX512-BF16 (or PONDER_CPU_BF16_GEMM=0)
    float x = 1;
    CHECK_THROWS_AS(cpu::gemm_bf16(false, false, 1, 1, 1, &x, 1, &x, 1, &x, 1), std::logic_error);
    MESSAGE("no bf16 dot products here: bf16 matmuls run as sgemm on rounded copies");
    return;
  }
  Generator g(11);
  // edges of the 8-row tiles, 32-column panels, pairs of k and 512-row blocks of k (1,030: three, the last odd)
  const int64_t sizes[][3] = {{1, 1, 1}, {5, 3, 1}, {8, 32, 2}, {9, 33, 3}, {37, 45, 51}, {17, 70, 513},
                              {130, 64, 1030}};
  for (const auto& s : sizes)
    for (int layout = 0; layout < 4; ++layout) {
      const int64_t m = s[0], n = s[1], k = s[2];
      INFO("m " << m << " n " << n << " k " << k << " layout " << layout);
      const Operand a = make(g, m, k, layout & 1), b = make(g, k, n, layout & 2);
      cpu::set_num_threads(2);
      const std::vector<float> c2 = run(a, b, m, n, k);
      CHECK(worst(a, b, m, n, k, c2) <= 1.0);
      cpu::set_num_threads(1);
      CHECK(run(a, b, m, n, k) == c2);  // the same bits at any thread count
    }
  cpu::set_num_threads(2);
}

TEST_CASE("bf16 GEMM kernel: NaN, infinity and overflow as round_mantissa has them; large matmuls take it") {
  using namespace bf16_gemm_test;
  if (!cpu::bf16_gemm_supported()) return;  // the case above says why
  const int64_t m = 3, n = 20, k = 40;
  Generator g(12);
  Operand a = make(g, m, k, false), b = make(g, k, n, false);
  uint32_t snan = 0x7f800001u;  // a NaN whose payload lies only in the bits bf16 drops
  std::memcpy(&a.v[0], &snan, sizeof snan);
  for (int64_t p = 0; p < k; ++p) a.v[size_t(a.ld + p)] = p == 0 ? std::numeric_limits<float>::max() : 0.0f;
  for (int64_t j = 0; j < n; ++j) b.v[size_t(j)] = 1.0f;
  const std::vector<float> c = run(a, b, m, n, k);
  for (int64_t j = 0; j < n; ++j) {
    CHECK(std::isnan(c[size_t(j)]));                                       // row 0 met the NaN
    CHECK(c[size_t((n + 2) + j)] == std::numeric_limits<float>::infinity());  // FLT_MAX rounds past bf16's largest
  }
  // A matmul op at bf16 large enough for the kernel (tensor/cpu/matmul.cpp) gives the kernel's bits.
  const Tensor x = g.normal({64, 600}, 0, 1, DType::F32), y = g.normal({600, 96}, 0, 1, DType::F32);
  const MatmulPrecisionScope scope(MatmulPrecision::BF16);
  std::vector<float> want(size_t(64 * 96));
  cpu::gemm_bf16(false, false, 64, 96, 600, x.data<float>(), 600, y.data<float>(), 96, want.data(), 96);
  const auto got = raw::matmul(x, y).to_vector();
  CHECK(std::equal(got.begin(), got.end(), want.begin()));
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

namespace {
// Plain reference for a sum/max/min over `axes` (keepdim), in float64.
std::vector<double> naive_reduce(const Tensor& x, const std::vector<int64_t>& axes, ReduceOp op) {
  const Shape s = x.shape();
  Shape os = s;
  for (int64_t a : axes) os[size_t(a)] = 1;
  const std::vector<double> v = raw::contiguous(x).to_vector();
  std::vector<double> out(size_t(shape_numel(os)), op == ReduceOp::Sum ? 0.0 : (op == ReduceOp::Max ? -1e300 : 1e300));
  const Shape ost = contiguous_strides(os), st = contiguous_strides(s);
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t idx = i / st[d] % s[d];
      if (os[d] != 1) o += idx * ost[d];
    }
    double& acc = out[size_t(o)];
    acc = op == ReduceOp::Sum ? acc + v[size_t(i)] : (op == ReduceOp::Max ? std::max(acc, v[size_t(i)]) : std::min(acc, v[size_t(i)]));
  }
  return out;
}
}  // namespace

TEST_CASE("reductions match a plain loop on every path (inner axis kept or reduced, strided, broadcast)") {
  Generator g(17);
  for (DType dt : {DType::F64, DType::F32}) {
    const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
    Tensor x4 = g.normal({3, 2, 17, 37}, 0, 1, dt);
    Tensor xt = raw::transpose(g.normal({37, 29}, 0, 1, dt), 0, 1);               // (29, 37), column-major
    Tensor xe = raw::expand(g.normal({1, 5, 1, 2000}, 0, 1, dt), {3, 5, 4, 2000});  // zero strides
    struct Case {
      Tensor x;
      std::vector<int64_t> axes;
    };
    for (const Case& c : {Case{x4, {3}}, Case{x4, {0, 2}}, Case{x4, {0, 1, 2}}, Case{x4, {1, 3}}, Case{x4, {}},
                          Case{xt, {0}}, Case{xt, {1}}, Case{xe, {0, 2}}, Case{xe, {3}}, Case{xe, {1, 2}}})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
        CAPTURE(shape_str(c.x.shape()));
        CAPTURE(c.axes.size());
        std::vector<int64_t> axes = c.axes;
        if (axes.empty())
          for (int64_t d = 0; d < int64_t(c.x.dim()); ++d) axes.push_back(d);
        const std::vector<double> want = naive_reduce(c.x, axes, op);
        const std::vector<double> got = raw::reduce(op, c.x, c.axes, true).to_vector();
        REQUIRE(got.size() == want.size());
        double err = 0, scale = 1;
        for (size_t i = 0; i < got.size(); ++i) {
          err = std::max(err, std::abs(got[i] - want[i]));
          scale = std::max(scale, std::abs(want[i]));
        }
        CHECK(err / scale <= tol);
      }
  }
}

TEST_CASE("element-wise maps agree on contiguous, broadcast and strided operands") {
  Generator g(23);
  Tensor a = g.normal({4, 6, 33}, 0, 1, DType::F32);
  Tensor row = g.normal({4, 6, 1}, 0, 1, DType::F32), col = g.normal({33}, 0, 1, DType::F32);
  Tensor at = raw::transpose(g.normal({33, 6, 4}, 0, 1, DType::F32), 0, 2);  // (4, 6, 33), strided
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum}) {
    for (const Tensor& b : {row, col, at}) {
      const std::vector<double> got = raw::binary(op, a, b).to_vector(), got_rev = raw::binary(op, b, a).to_vector();
      const std::vector<double> ab = raw::contiguous(raw::expand(b, a.shape())).to_vector(), av = a.to_vector();
      for (size_t i = 0; i < av.size(); ++i) {
        auto f = [&](float x, float y) {
          switch (op) {
            case BinaryOp::Add: return x + y;
            case BinaryOp::Sub: return x - y;
            case BinaryOp::Mul: return x * y;
            case BinaryOp::Div: return x / y;
            default: return x > y ? x : y;
          }
        };
        REQUIRE(got[i] == double(f(float(av[i]), float(ab[i]))));
        REQUIRE(got_rev[i] == double(f(float(ab[i]), float(av[i]))));
      }
    }
  }
}

TEST_CASE("float32 exp, tanh, sigmoid, silu and gelu stay within a few ulp and give the same bits on any layout") {
  std::vector<double> xs;
  for (double x = -95; x <= 95; x += 0.0173) xs.push_back(x);
  for (double x = -0.02; x <= 0.02; x += 1.1e-5) xs.push_back(x);
  const int64_t n = int64_t(xs.size());
  Tensor x = Tensor::from_vector(xs, {n}, DType::F32);
  auto ulp = [](double want, double got) {
    const float w = float(want);
    const double step = std::max<double>(std::nextafter(std::abs(w), INFINITY) - std::abs(w), 1e-45);
    return std::abs(got - want) / step;
  };
  struct Fn {
    UnaryOp op;
    double (*ref)(double);
    double max_ulp;
  };
  const Fn fns[] = {
      {UnaryOp::Exp, [](double v) { return std::exp(v); }, 2},
      {UnaryOp::Tanh, [](double v) { return std::tanh(v); }, 2},
      {UnaryOp::Sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, 4},
      {UnaryOp::Silu, [](double v) { return v / (1 + std::exp(-v)); }, 4},
      {UnaryOp::GeluTanh, [](double v) { return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }, 16},
  };
  for (const Fn& f : fns) {
    CAPTURE(std::string(unary_name(f.op)));
    const std::vector<double> got = raw::unary(f.op, x).to_vector();
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = f.ref(double(float(xs[size_t(i)])));
      if (std::abs(want) < 1.2e-38 || std::abs(want) > 3.4e38) continue;  // denormal or overflowing results
      if (f.op == UnaryOp::Silu || f.op == UnaryOp::GeluTanh) {
        // x·σ(x) and x·σ(2u) lose relative accuracy near their zeros and where u(x) is large: compare
        // against max(|f|, 1e-3) there (the float64 reference rounds u exactly; measured worst 2.3 and 9.8).
        worst = std::max(worst, std::abs(got[size_t(i)] - want) / std::max(std::abs(want), 1e-3) / 6e-8);
        continue;
      }
      worst = std::max(worst, ulp(want, got[size_t(i)]));
    }
    CHECK(worst <= f.max_ulp);
    // A strided view and a single broadcast value give the same bits as the contiguous pass.
    Tensor rev = raw::slice(x, 0, 0, n, 3);
    const std::vector<double> strided = raw::unary(f.op, rev).to_vector();
    for (size_t i = 0; i < strided.size(); ++i) REQUIRE(strided[i] == got[3 * i]);
    Tensor one = raw::expand(raw::slice(x, 0, 7, 8), {5});
    for (double v : raw::unary(f.op, one).to_vector()) REQUIRE(v == got[7]);
  }
  // Special values follow std::exp / std::tanh.
  Tensor sp = Tensor::from_vector({-INFINITY, INFINITY, NAN, -0.0, 0.0, -200, 200}, {7}, DType::F32);
  const std::vector<double> e = raw::unary(UnaryOp::Exp, sp).to_vector(), t = raw::unary(UnaryOp::Tanh, sp).to_vector();
  CHECK(e[0] == 0);
  CHECK(std::isinf(e[1]));
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 1);
  CHECK(e[5] == 0);
  CHECK(std::isinf(e[6]));
  CHECK(t[0] == -1);
  CHECK(t[1] == 1);
  CHECK(std::isnan(t[2]));
  CHECK(std::signbit(t[3]));
  CHECK(t[5] == -1);
  CHECK(t[6] == 1);
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

TEST_CASE("kernel profile: labels with the same text are one entry, and a diff subtracts them once") {
  // Two arrays with equal text at different addresses, as two translation units' literals can be.
  static const char first[] = "test-label", second[] = "test-label";
  REQUIRE(static_cast<const void*>(first) != static_cast<const void*>(second));
  const auto before = prof::label_snapshot();
  prof::add(prof::Kind::Copy, first, 1.0);
  prof::add(prof::Kind::Copy, second, 2.0);
  const auto mid = prof::label_snapshot();
  prof::add(prof::Kind::Copy, first, 4.0);
  auto entry = [](const std::vector<prof::LabelTotal>& v) {
    std::vector<prof::LabelTotal> out;
    for (const prof::LabelTotal& t : v)
      if (t.label == "test-label") out.push_back(t);
    return out;
  };
  const auto total = entry(prof::label_snapshot());
  REQUIRE(total.size() == 1);
  CHECK(total[0].calls == 3);
  CHECK(total[0].seconds == 7.0);
  const auto since_mid = entry(prof::label_diff(prof::label_snapshot(), mid));
  REQUIRE(since_mid.size() == 1);
  CHECK(since_mid[0].calls == 1);
  CHECK(since_mid[0].seconds == 4.0);
  CHECK(entry(prof::label_diff(prof::label_snapshot(), before)).at(0).calls == 3);
}

TEST_CASE("OpenBLAS runs kernels this CPU has, not its SSE3 fallback, and a user's OPENBLAS_CORETYPE stands") {
  const char* set = std::getenv("OPENBLAS_CORETYPE");
  const std::string forced = set ? set : "", best = cpu::blas_core_for_this_cpu(), core = openblas_get_corename();
  CAPTURE(forced);
  CAPTURE(best);
  CAPTURE(core);
  // The test binary re-executed itself (tests/main.cpp) unless the user chose kernels.
  if (!best.empty() && (forced.empty() || forced == best)) CHECK(core != "Prescott");
  CHECK(cpu::blas_core_override().empty());  // now that OpenBLAS runs them, or the variable is set, nothing to change
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);
  CHECK(cpu::blas_core_override().empty());  // the user's choice, even the fallback, is kept
  if (set) setenv("OPENBLAS_CORETYPE", set, 1); else unsetenv("OPENBLAS_CORETYPE");
}
