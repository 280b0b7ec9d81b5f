#include "autograd/op_table.h"

#include <cmath>

#include "autograd/nn.h"
#include "autograd/ops.h"
#include "tensor/rng.h"

namespace ponder {
namespace {

using ref::Dense;
using Ins = std::vector<Tensor>;
using Refs = std::vector<Dense>;

// Deterministic float input: uniform in [lo, hi), drawn in float64 then cast.
Tensor U(const Shape& s, double lo, double hi, uint64_t seed, DType dt) {
  Generator g(seed);
  return raw::to_dtype(g.uniform(s, lo, hi, DType::F64), dt);
}
// Values with |x| in [0.2, 1.5] and random sign: keeps kinks of relu/abs/sign away.
Tensor away_from_zero(const Shape& s, uint64_t seed, DType dt) {
  Generator g(seed);
  auto mag = g.uniform(s, 0.2, 1.5, DType::F64).to_vector();
  auto sg = g.uniform(s, 0, 1, DType::F64).to_vector();
  for (size_t i = 0; i < mag.size(); ++i) mag[i] *= sg[i] < 0.5 ? -1 : 1;
  return Tensor::from_vector(mag, s, dt);
}
// Distinct, well separated values (no ties for max/min): a shuffled grid.
Tensor distinct(const Shape& s, uint64_t seed, DType dt) {
  Generator g(seed);
  auto p = g.permutation(shape_numel(s));
  std::vector<double> v;
  for (int64_t i : p) v.push_back(-1.0 + 0.173 * double(i));
  return Tensor::from_vector(v, s, dt);
}
// The (r, c) transpose view of a contiguous (c, r) tensor: a non-contiguous input.
Tensor T(const Tensor& t) { return raw::transpose(t, 0, 1); }
Tensor ints(const std::vector<int64_t>& v, const Shape& s) { return Tensor::from_ints(v, s); }

OpCase unary(const std::string& name, Op op, std::function<Tensor(const Tensor&)> f, std::function<double(double)> rf,
             std::function<Tensor(DType)> make) {
  return {name, {op}, [make](DType dt) { return Ins{make(dt)}; }, {true},
          [f](const Ins& x) { return f(x[0]); }, [rf](const Refs& r) { return ref::map(r[0], rf); }, {}};
}
OpCase binary(const std::string& name, Op op, std::function<Tensor(const Tensor&, const Tensor&)> f,
              std::function<double(double, double)> rf, std::function<Ins(DType)> make) {
  return {name, {op}, make, {true, true}, [f](const Ins& x) { return f(x[0], x[1]); },
          [rf](const Refs& r) { return ref::zip(r[0], r[1], rf); }, {}};
}

// Slice reference along one axis.
Dense ref_slice(const Dense& x, int axis, int64_t start, int64_t len, int64_t step) {
  Dense r{x.shape, {}};
  r.shape[size_t(axis)] = len;
  r.v.resize(size_t(shape_numel(r.shape)));
  for (int64_t i = 0; i < r.numel(); ++i) {
    auto idx = r.index(i);
    idx[size_t(axis)] = start + idx[size_t(axis)] * step;
    r.v[size_t(i)] = x.v[size_t(x.flat(idx))];
  }
  return r;
}

// Inputs several sections share.
Tensor std35(DType dt) { return T(U({5, 3}, -2, 2, 11, dt)); }  // (3, 5), non-contiguous
Tensor pos35(DType dt) { return T(U({5, 3}, 0.2, 3, 12, dt)); }
Ins x234(DType dt) { return Ins{U({2, 3, 4}, -1, 1, 41, dt)}; }

// ---- element-wise unary
void add_unary_cases(std::vector<OpCase>& t) {
  t.push_back(unary("neg", Op::Neg, [](auto& x) { return neg(x); }, [](double v) { return -v; }, std35));
  t.push_back(unary("exp", Op::Exp, [](auto& x) { return exp(x); }, [](double v) { return std::exp(v); }, std35));
  t.push_back(unary("log", Op::Log, [](auto& x) { return log(x); }, [](double v) { return std::log(v); }, pos35));
  t.push_back(unary("sqrt", Op::Sqrt, [](auto& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, pos35));
  t.push_back(unary("rsqrt", Op::Rsqrt, [](auto& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, pos35));
  t.push_back(unary("pow (x^3)", Op::Pow, [](auto& x) { return pow(x, 3); }, [](double v) { return v * v * v; }, std35));
  t.push_back(unary("pow (x^-1.5)", Op::Pow, [](auto& x) { return pow(x, -1.5); },
                    [](double v) { return std::pow(v, -1.5); }, pos35));
  t.push_back(unary("tanh", Op::Tanh, [](auto& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, std35));
  t.push_back(unary("sigmoid", Op::Sigmoid, [](auto& x) { return sigmoid(x); },
                    [](double v) { return 1 / (1 + std::exp(-v)); }, std35));
  t.push_back(unary("relu", Op::Relu, [](auto& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; },
                    [](DType dt) { return away_from_zero({4, 5}, 13, dt); }));
  t.push_back(unary("gelu_tanh", Op::GeluTanh, [](auto& x) { return gelu_tanh(x); },
                    [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); },
                    std35));
  t.push_back(unary("silu", Op::Silu, [](auto& x) { return silu(x); }, [](double v) { return v / (1 + std::exp(-v)); },
                    std35));
  t.push_back(unary("abs", Op::Abs, [](auto& x) { return abs(x); }, [](double v) { return std::abs(v); },
                    [](DType dt) { return T(away_from_zero({5, 3}, 14, dt)); }));
  t.push_back(unary("clamp", Op::Clamp, [](auto& x) { return clamp(x, -0.5, 0.7); },
                    [](double v) { return std::min(std::max(v, -0.5), 0.7); },
                    [](DType dt) {  // keep samples 0.05 away from the bounds
                      auto v = U({3, 7}, -1.5, 1.5, 15, DType::F64).to_vector();
                      for (double& e : v)
                        if (std::abs(e + 0.5) < 0.05 || std::abs(e - 0.7) < 0.05) e += 0.11;
                      return Tensor::from_vector(v, {3, 7}, dt);
                    }));
  t.push_back(unary("affine", Op::Affine, [](auto& x) { return affine(x, 2.5, -1); },
                    [](double v) { return 2.5 * v - 1; }, std35));
}

// ---- element-wise binary (broadcasting, non-contiguous)
void add_binary_cases(std::vector<OpCase>& t) {
  t.push_back(binary("add (broadcast)", Op::Add, [](auto& a, auto& b) { return add(a, b); },
                     [](double a, double b) { return a + b; },
                     [](DType dt) { return Ins{U({2, 3, 4}, -1, 1, 21, dt), U({3, 1}, -1, 1, 22, dt)}; }));
  t.push_back(binary("sub (non-contiguous)", Op::Sub, [](auto& a, auto& b) { return sub(a, b); },
                     [](double a, double b) { return a - b; },
                     [](DType dt) { return Ins{T(U({5, 3}, -1, 1, 23, dt)), U({5}, -1, 1, 24, dt)}; }));
  t.push_back(binary("mul (outer broadcast)", Op::Mul, [](auto& a, auto& b) { return mul(a, b); },
                     [](double a, double b) { return a * b; },
                     [](DType dt) { return Ins{U({4, 1}, -1, 1, 25, dt), U({1, 5}, -1, 1, 26, dt)}; }));
  t.push_back(binary("div", Op::Div, [](auto& a, auto& b) { return div(a, b); },
                     [](double a, double b) { return a / b; },
                     [](DType dt) { return Ins{U({3, 4}, -1, 1, 27, dt), away_from_zero({4}, 28, dt)}; }));
  auto sep = [](DType dt) {  // a and b separated by at least 0.05 everywhere
    auto a = distinct({3, 4}, 29, DType::F64), b = distinct({3, 4}, 30, DType::F64);
    auto bv = b.to_vector(), av = a.to_vector();
    for (size_t i = 0; i < bv.size(); ++i)
      if (std::abs(av[i] - bv[i]) < 0.05) bv[i] += 0.09;
    return Ins{raw::to_dtype(a, dt), Tensor::from_vector(bv, {3, 4}, dt)};
  };
  t.push_back(binary("maximum", Op::Maximum, [](auto& a, auto& b) { return maximum(a, b); },
                     [](double a, double b) { return std::max(a, b); }, sep));
  t.push_back(binary("minimum", Op::Minimum, [](auto& a, auto& b) { return minimum(a, b); },
                     [](double a, double b) { return std::min(a, b); }, sep));
  t.push_back({"where (broadcast cond)", {Op::Where},
               [](DType dt) {
                 return Ins{Tensor::from_vector({1, 0, 1}, {3, 1}, dt), U({3, 4}, -1, 1, 31, dt), U({4}, -1, 1, 32, dt)};
               },
               {false, true, true}, [](const Ins& x) { return where(x[0], x[1], x[2]); },
               [](const Refs& r) {
                 Dense ab = ref::zip(r[1], r[2], [](double a, double) { return a; });
                 Dense out = ab;
                 for (int64_t i = 0; i < out.numel(); ++i) {
                   auto idx = out.index(i);
                   out.v[size_t(i)] = r[0].at_broadcast(idx) != 0 ? r[1].at_broadcast(idx) : r[2].at_broadcast(idx);
                 }
                 return out;
               },
               {}});
  t.push_back({"masked_fill", {Op::Where},
               [](DType dt) { return Ins{U({3, 4}, -1, 1, 33, dt), Tensor::from_vector({0, 1, 1, 0}, {4}, dt)}; },
               {true, false}, [](const Ins& x) { return masked_fill(x[0], x[1], -2.0); },
               [](const Refs& r) { return ref::zip(r[0], r[1], [](double a, double m) { return m != 0 ? -2.0 : a; }); },
               {}});
}

// ---- reductions and scans
void add_reduction_cases(std::vector<OpCase>& t) {
  t.push_back({"sum (axis 1, keepdim)", {Op::Sum}, x234, {true}, [](const Ins& x) { return sum(x[0], {1}, true); },
               [](const Refs& r) { return ref::reduce(r[0], {1}, true, 's'); }, {}});
  t.push_back({"sum (all, non-contiguous)", {Op::Sum}, [](DType dt) { return Ins{T(U({5, 3}, -1, 1, 42, dt))}; },
               {true}, [](const Ins& x) { return sum(x[0]); },
               [](const Refs& r) { return ref::reduce(r[0], {}, false, 's'); }, {}});
  t.push_back({"mean (axes 0, 2)", {Op::Sum, Op::Affine}, x234, {true},
               [](const Ins& x) { return mean(x[0], {0, 2}); },
               [](const Refs& r) { return ref::map(ref::reduce(r[0], {0, 2}, false, 's'), [](double v) { return v / 8; }); },
               {}});
  t.push_back({"max (last axis)", {Op::Max}, [](DType dt) { return Ins{distinct({3, 5}, 43, dt)}; }, {true},
               [](const Ins& x) { return max(x[0], {-1}); },
               [](const Refs& r) { return ref::reduce(r[0], {-1}, false, 'm'); }, {}});
  t.push_back({"min (axis 0, keepdim)", {Op::Max, Op::Neg}, [](DType dt) { return Ins{T(distinct({5, 3}, 44, dt))}; },
               {true}, [](const Ins& x) { return min(x[0], {0}, true); },
               [](const Refs& r) { return ref::reduce(r[0], {0}, true, 'n'); }, {}});
  t.push_back({"var (axis 1, correction 1)", {Op::Sum, Op::Sub, Op::Mul}, x234, {true},
               [](const Ins& x) { return var(x[0], {1}, 1); },
               [](const Refs& r) {
                 Dense m = ref::map(ref::reduce(r[0], {1}, true, 's'), [](double v) { return v / 3; });
                 Dense d2 = ref::zip(r[0], m, [](double a, double b) { return (a - b) * (a - b); });
                 return ref::map(ref::reduce(d2, {1}, false, 's'), [](double v) { return v / 2; });
               },
               {}});
  t.push_back({"logsumexp (last axis)", {Op::Exp, Op::Log, Op::Sum}, x234, {true},
               [](const Ins& x) { return logsumexp(x[0], {-1}); },
               [](const Refs& r) {
                 Dense e = ref::map(r[0], [](double v) { return std::exp(v); });
                 return ref::map(ref::reduce(e, {-1}, false, 's'), [](double v) { return std::log(v); });
               },
               {}});
  t.push_back({"softmax (non-contiguous)", {Op::Exp, Op::Sub}, [](DType dt) { return Ins{T(U({5, 3}, -2, 2, 45, dt))}; },
               {true}, [](const Ins& x) { return softmax(x[0], -1); },
               [](const Refs& r) { return ref::softmax(r[0], false); }, {}});
  t.push_back({"log_softmax", {Op::Sub, Op::Log}, x234, {true}, [](const Ins& x) { return log_softmax(x[0], -1); },
               [](const Refs& r) { return ref::softmax(r[0], true); }, {}});
  t.push_back({"sum_to", {Op::SumTo}, x234, {true}, [](const Ins& x) { return sum_to(x[0], {3, 1}); },
               [](const Refs& r) {
                 Dense s = ref::reduce(r[0], {0, 2}, false, 's');
                 s.shape = {3, 1};
                 return s;
               },
               {}});
  t.push_back({"expand", {Op::Expand}, [](DType dt) { return Ins{U({3, 1}, -1, 1, 46, dt)}; }, {true},
               [](const Ins& x) { return expand(x[0], {2, 3, 4}); },
               [](const Refs& r) {
                 Dense z{{2, 3, 4}, std::vector<double>(24, 0.0)};
                 return ref::zip(z, r[0], [](double, double b) { return b; });
               },
               {}});
  t.push_back({"cumsum (axis 1)", {Op::Cumsum}, x234, {true}, [](const Ins& x) { return cumsum(x[0], 1); },
               [](const Refs& r) { return ref::cumsum(r[0], 1, false); }, {}});
  t.push_back({"cumsum (reverse, non-contiguous)", {Op::Cumsum}, [](DType dt) { return Ins{T(U({5, 3}, -1, 1, 47, dt))}; },
               {true}, [](const Ins& x) { return cumsum(x[0], 1, true); },
               [](const Refs& r) { return ref::cumsum(r[0], 1, true); }, {}});
  auto tri_ref = [](bool upper, int64_t k) {
    return [upper, k](const Refs& r) {
      Dense o = r[0];
      for (int64_t i = 0; i < o.numel(); ++i) {
        auto idx = o.index(i);
        int64_t d = idx.back() - idx[idx.size() - 2];
        if (upper ? d < k : d > k) o.v[size_t(i)] = 0;
      }
      return o;
    };
  };
  t.push_back({"tril", {Op::Tri}, [](DType dt) { return Ins{U({2, 4, 4}, -1, 1, 48, dt)}; }, {true},
               [](const Ins& x) { return tril(x[0]); }, tri_ref(false, 0), {}});
  t.push_back({"triu (k=1, non-contiguous)", {Op::Tri}, [](DType dt) { return Ins{T(U({5, 4}, -1, 1, 49, dt))}; }, {true},
               [](const Ins& x) { return triu(x[0], 1); }, tri_ref(true, 1), {}});
}

// ---- fused normalisation over the last axis (checked against plain per-row loops)
constexpr double kLnEps = 1e-5;
// Per row of the last axis: μ, s = 1/sqrt(var + eps) (ln) or r = 1/sqrt(mean x² + eps) (rms).
struct RowStats {
  std::vector<double> mu, s;
};
RowStats row_stats(const Dense& x, bool rms) {
  const int64_t D = x.shape.back(), R = x.numel() / D;
  RowStats st;
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, q = 0;
    for (int64_t i = 0; i < D; ++i) m += x.v[size_t(r * D + i)];
    m = rms ? 0 : m / double(D);
    for (int64_t i = 0; i < D; ++i) q += (x.v[size_t(r * D + i)] - m) * (x.v[size_t(r * D + i)] - m);
    st.mu.push_back(m);
    st.s.push_back(1 / std::sqrt(q / double(D) + kLnEps));
  }
  return st;
}
// s·(v − mean v − x̂·mean(v⊙x̂)) (ln) or r·(v − y·mean(v⊙y)) (rms), per row, v broadcast to x.
Dense norm_backward_ref(const Refs& r, bool rms) {
  const Dense& x = r[0];
  const Dense v = ref::zip(x, r[1], [](double, double b) { return b; });
  const int64_t D = x.shape.back(), R = x.numel() / D;
  const RowStats st = row_stats(x, rms);
  Dense o = x;
  for (int64_t row = 0; row < R; ++row) {
    double m1 = 0, m2 = 0;
    for (int64_t i = 0; i < D; ++i) {
      const size_t k = size_t(row * D + i);
      m1 += v.v[k] / double(D);
      m2 += v.v[k] * (x.v[k] - st.mu[size_t(row)]) * st.s[size_t(row)] / double(D);
    }
    for (int64_t i = 0; i < D; ++i) {
      const size_t k = size_t(row * D + i);
      const double xh = (x.v[k] - st.mu[size_t(row)]) * st.s[size_t(row)];
      o.v[k] = st.s[size_t(row)] * (v.v[k] - (rms ? 0 : m1) - xh * m2);
    }
  }
  return o;
}
Dense norm_ref(const Refs& r, bool rms) {
  const RowStats st = row_stats(r[0], rms);
  const int64_t D = r[0].shape.back();
  Dense o = r[0];
  for (int64_t k = 0; k < o.numel(); ++k)
    o.v[size_t(k)] = (o.v[size_t(k)] - st.mu[size_t(k / D)]) * st.s[size_t(k / D)];
  return o;
}
// Per-head γ, β (1, H, 1, D) over (B, H, rows, D), as in the TTT inner LayerNorm.
double per_head(const Dense& x, const Dense& p, int64_t k) {  // p's element for x's flat index k
  const int64_t D = x.shape.back(), H = x.shape[1], rows = x.shape[2];
  return p.v[size_t((k / (rows * D)) % H * D + k % D)];
}

// LayerNorm and RMSNorm, plain and affine, forward and backward.
void add_norm_cases(std::vector<OpCase>& t) {
  t.push_back({"layer_norm_rows (non-contiguous)", {Op::LayerNorm}, [](DType dt) { return Ins{T(U({6, 4}, -1, 1, 90, dt))}; },
               {true}, [](const Ins& x) { return layer_norm_rows(x[0], kLnEps); },
               [](const Refs& r) { return norm_ref(r, false); }, {}});
  t.push_back({"layer_norm_backward (broadcast v)", {Op::LayerNormBackward},
               [](DType dt) { return Ins{U({2, 3, 5}, -1, 1, 91, dt), U({3, 5}, -1, 1, 92, dt)}; }, {true, true},
               [](const Ins& x) { return layer_norm_backward(x[0], x[1], kLnEps); },
               [](const Refs& r) { return norm_backward_ref(r, false); }, {}});
  t.push_back({"layer_norm (affine, nn)", {Op::LayerNormAffine},
               [](DType dt) { return Ins{U({3, 5}, -1, 1, 93, dt), U({5}, 0.5, 1.5, 94, dt), U({5}, -1, 1, 95, dt)}; },
               {true, true, true}, [](const Ins& x) { return layer_norm(x[0], x[1], x[2], kLnEps); },
               [](const Refs& r) {
                 Dense xh = norm_ref(r, false);
                 return ref::zip(ref::zip(xh, r[1], [](double a, double g) { return a * g; }), r[2],
                                 [](double a, double b) { return a + b; });
               },
               {}});
  t.push_back({"layer_norm_affine (per-head γ, β)", {Op::LayerNormAffine},
               [](DType dt) {
                 return Ins{U({2, 2, 3, 5}, -1, 1, 103, dt), U({1, 2, 1, 5}, 0.5, 1.5, 104, dt), U({1, 2, 1, 5}, -1, 1, 105, dt)};
               },
               {true, true, true}, [](const Ins& x) { return layer_norm_affine(x[0], x[1], x[2], kLnEps); },
               [](const Refs& r) {
                 Dense o = norm_ref(r, false);
                 for (int64_t k = 0; k < o.numel(); ++k)
                   o.v[size_t(k)] = o.v[size_t(k)] * per_head(r[0], r[1], k) + per_head(r[0], r[2], k);
                 return o;
               },
               {}});
  t.push_back({"ln_l2_grad (per-head γ, β; broadcast target)", {Op::LnL2Grad},
               [](DType dt) {
                 return Ins{U({2, 2, 3, 5}, -1, 1, 106, dt), U({2, 1, 3, 5}, -1, 1, 107, dt),
                            U({1, 2, 1, 5}, 0.5, 1.5, 108, dt), U({1, 2, 1, 5}, -1, 1, 109, dt)};
               },
               {true, true, true, true}, [](const Ins& x) { return ln_l2_grad(x[0], x[1], x[2], x[3], kLnEps); },
               [](const Refs& r) {
                 // gy = (γ⊙x̂ + β − t)⊙γ, then the LayerNorm backward of gy
                 Dense xh = norm_ref(r, false), gy = r[0];
                 const Dense t = ref::zip(r[0], r[1], [](double, double b) { return b; });
                 for (int64_t k = 0; k < gy.numel(); ++k) {
                   const double g = per_head(r[0], r[2], k);
                   gy.v[size_t(k)] = (g * xh.v[size_t(k)] + per_head(r[0], r[3], k) - t.v[size_t(k)]) * g;
                 }
                 return norm_backward_ref({r[0], gy}, false);
               },
               {}});
  t.push_back({"rms_norm_affine (nn)", {Op::RmsNormAffine},
               [](DType dt) { return Ins{T(U({6, 3}, -1, 1, 110, dt)), U({6}, 0.5, 1.5, 111, dt)}; }, {true, true},
               [](const Ins& x) { return rms_norm(x[0], x[1], kLnEps); },
               [](const Refs& r) {
                 return ref::zip(norm_ref(r, true), r[1], [](double a, double w) { return a * w; });
               },
               {}});
  t.push_back({"rms_norm_rows", {Op::RmsNorm}, [](DType dt) { return Ins{U({3, 2, 5}, -1, 1, 96, dt)}; }, {true},
               [](const Ins& x) { return rms_norm_rows(x[0], kLnEps); },
               [](const Refs& r) { return norm_ref(r, true); }, {}});
  t.push_back({"rms_norm_backward (broadcast g)", {Op::RmsNormBackward},
               [](DType dt) { return Ins{T(U({5, 3}, -1, 1, 97, dt)), U({1, 5}, -1, 1, 98, dt)}; }, {true, true},
               [](const Ins& x) { return rms_norm_backward(x[0], x[1], kLnEps); },
               [](const Refs& r) { return norm_backward_ref(r, true); }, {}});
}

// Fused activation derivatives and activation-times-gate products.
void add_fused_activation_cases(std::vector<OpCase>& t) {
  t.push_back(unary("gelu_tanh_grad", Op::GeluTanhGrad, [](auto& x) { return gelu_tanh_grad(x); },
                    [](double v) {
                      const double c = std::sqrt(2 / M_PI), a = 0.044715, th = std::tanh(c * (v + a * v * v * v));
                      return 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * c * (1 + 3 * a * v * v);
                    },
                    std35));
  t.push_back(unary("silu_grad", Op::SiluGrad, [](auto& x) { return silu_grad(x); },
                    [](double v) {
                      const double sg = 1 / (1 + std::exp(-v));
                      return sg * (1 + v * (1 - sg));
                    },
                    std35));

  auto act_mul_ref = [](bool silu_act) {
    return [silu_act](const Refs& r) {
      return ref::zip(r[0], r[1], [silu_act](double a, double b) {
        const double act = silu_act ? a / (1 + std::exp(-a))
                                    : 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
        return act * b;
      });
    };
  };
  t.push_back({"silu_mul (non-contiguous)", {Op::ActMul},
               [](DType dt) { return Ins{T(U({5, 3}, -2, 2, 99, dt)), U({3, 5}, -1, 1, 100, dt)}; }, {true, true},
               [](const Ins& x) { return silu_mul(x[0], x[1]); }, act_mul_ref(true), {}});
  t.push_back({"gelu_tanh_mul", {Op::ActMul},
               [](DType dt) { return Ins{U({2, 3, 4}, -2, 2, 101, dt), U({2, 3, 4}, -1, 1, 102, dt)}; }, {true, true},
               [](const Ins& x) { return gelu_tanh_mul(x[0], x[1]); }, act_mul_ref(false), {}});
  // Rotary embedding: x (2, N 3, f 6) as a transposed view, the angles' cos and sin constants (N, f/2).
  t.push_back({"rope (non-contiguous x)", {Op::Rope},
               [](DType dt) {
                 return Ins{raw::transpose(U({2, 6, 3}, -1, 1, 103, dt), 1, 2), U({3, 3}, -1, 1, 104, dt),
                            U({3, 3}, -1, 1, 105, dt)};
               },
               {true, false, false}, [](const Ins& x) { return rope_rotate(x[0], x[1], x[2]); },
               [](const Refs& r) {
                 const Dense &x = r[0], &c = r[1], &s = r[2];
                 const int64_t f = x.shape.back(), h = f / 2, N = x.shape[x.shape.size() - 2];
                 Dense o{x.shape, std::vector<double>(x.v.size())};
                 for (int64_t row = 0; row < x.numel() / f; ++row)
                   for (int64_t i = 0; i < h; ++i) {
                     const double a = x.v[size_t(row * f + 2 * i)], b = x.v[size_t(row * f + 2 * i + 1)];
                     const double ci = c.v[size_t((row % N) * h + i)], si = s.v[size_t((row % N) * h + i)];
                     o.v[size_t(row * f + 2 * i)] = a * ci - b * si;
                     o.v[size_t(row * f + 2 * i + 1)] = a * si + b * ci;
                   }
                 return o;
               },
               {}});
}

// ---- matmul
void add_matmul_cases(std::vector<OpCase>& t) {
  auto mm_ref = [](const Refs& r) { return ref::matmul(r[0], r[1]); };
  auto mm = [](const Ins& x) { return matmul(x[0], x[1]); };
  t.push_back({"matmul (odd sizes)", {Op::Matmul}, [](DType dt) { return Ins{U({3, 5}, -1, 1, 51, dt), U({5, 4}, -1, 1, 52, dt)}; },
               {true, true}, mm, mm_ref, {}});
  t.push_back({"matmul (transposed views)", {Op::Matmul},
               [](DType dt) { return Ins{T(U({5, 3}, -1, 1, 53, dt)), T(U({4, 5}, -1, 1, 54, dt))}; }, {true, true}, mm,
               mm_ref, {}});
  t.push_back({"matmul (batched · matrix)", {Op::Matmul},
               [](DType dt) { return Ins{U({2, 3, 4}, -1, 1, 55, dt), U({4, 5}, -1, 1, 56, dt)}; }, {true, true}, mm,
               mm_ref, {}});
  t.push_back({"matmul (batch broadcast)", {Op::Matmul},
               [](DType dt) { return Ins{U({2, 1, 3, 4}, -1, 1, 57, dt), U({3, 4, 2}, -1, 1, 58, dt)}; }, {true, true},
               mm, mm_ref, {}});
}

// ---- attention (checked against a plain loop over the keys each query sees)
std::function<Dense(const Refs&)> attention_ref(AttnGeometry g) {
  return [g](const Refs& r) {
    const Dense &q = r[0], &k = r[1], &v = r[2];
    const int64_t n = q.shape[q.shape.size() - 2], f = q.shape.back(), T = k.shape[k.shape.size() - 2];
    Dense o = q;
    for (int64_t h = 0; h < q.numel() / (n * f); ++h)
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> p(size_t(T), 0.0);
        double m = -1e300, z = 0;
        auto seen = [&](int64_t j) {
          const int64_t lag = g.t0 + i - (g.first + j);
          return lag >= 0 && (g.window == 0 || lag < g.window);
        };
        for (int64_t j = 0; j < T; ++j) {
          if (!seen(j)) continue;
          for (int64_t c = 0; c < f; ++c) p[size_t(j)] += q.v[size_t((h * n + i) * f + c)] * k.v[size_t((h * T + j) * f + c)];
          p[size_t(j)] *= g.scale;
          m = std::max(m, p[size_t(j)]);
        }
        for (int64_t j = 0; j < T; ++j) z += seen(j) ? std::exp(p[size_t(j)] - m) : 0;
        for (int64_t c = 0; c < f; ++c) {
          double y = 0;
          for (int64_t j = 0; j < T; ++j)
            if (seen(j)) y += std::exp(p[size_t(j)] - m) / z * v.v[size_t((h * T + j) * f + c)];
          o.v[size_t((h * n + i) * f + c)] = y;
        }
      }
    return o;
  };
}

void add_attention_cases(std::vector<OpCase>& t) {
  const AttnGeometry causal{0.7, 0, 0, 0}, cached{0.5, 10, 7, 5};  // 3 cached keys, a window of 5
  t.push_back({"attention (causal, transposed q)", {Op::Attention},
               [](DType dt) {
                 return Ins{raw::transpose(U({2, 2, 3, 5}, -1, 1, 111, dt), 2, 3), U({2, 2, 5, 3}, -1, 1, 112, dt),
                            U({2, 2, 5, 3}, -1, 1, 113, dt)};
               },
               {true, true, true}, [causal](const Ins& x) { return attention(x[0], x[1], x[2], causal); },
               attention_ref(causal), {}});
  t.push_back({"attention (cached keys, window)", {Op::Attention},
               [](DType dt) {
                 return Ins{U({1, 2, 4, 3}, -1, 1, 114, dt), U({1, 2, 7, 3}, -1, 1, 115, dt), U({1, 2, 7, 3}, -1, 1, 116, dt)};
               },
               {true, true, true}, [cached](const Ins& x) { return attention(x[0], x[1], x[2], cached); },
               attention_ref(cached), {}});
}

// x̂ = (x − mean)/σ of a row into xh (same size); returns 1/σ (σ² = the row's variance + kLnEps).
double ln_row_ref(const std::vector<double>& x, std::vector<double>& xh) {
  const double n = double(x.size());
  double mu = 0, var = 0;
  for (double e : x) mu += e / n;
  for (double e : x) var += (e - mu) * (e - mu) / n;
  const double s = 1 / std::sqrt(var + kLnEps);
  for (size_t c = 0; c < x.size(); ++c) xh[c] = (x[c] - mu) * s;
  return s;
}

// ---- TTT-Linear's dual form (checked against plain loops over one head's tokens, written from the formulas of
// autograd/compose.h rather than from its ops: the inner gradient row by row, then each output token's sum)
Dense dual_ref(const Refs& r) {
  const Dense &W = r[0], &bias = r[1], &q = r[2], &k = r[3], &v = r[4], &eta = r[5], &gam = r[6], &bet = r[7];
  const size_t nd = q.shape.size();
  const int64_t b = q.shape[nd - 2], f = q.shape[nd - 1], G = q.numel() / (b * f);
  Shape os = q.shape;
  os[nd - 2] = b + f + 1;
  Dense o{os, std::vector<double>(size_t(G * (b + f + 1) * f))};
  auto at = [&](const Dense& d, int64_t g, int64_t i, int64_t c) {  // d[g's leading index…, i, c], broadcast
    std::vector<int64_t> idx = q.index(g * b * f);
    idx[nd - 2] = i;
    idx[nd - 1] = c;
    return d.at_broadcast(idx);
  };
  const auto ln_row = ln_row_ref;
  for (int64_t g = 0; g < G; ++g) {
    std::vector<std::vector<double>> grad(static_cast<size_t>(b), std::vector<double>(static_cast<size_t>(f)));
    for (int64_t j = 0; j < b; ++j) {  // the inner gradient of token j at W: ∂/∂Z ½‖LN(Z) − (v − k)‖²
      std::vector<double> z(static_cast<size_t>(f)), xh = z, gy = z;
      for (int64_t c = 0; c < f; ++c) {
        z[size_t(c)] = at(bias, g, 0, c);
        for (int64_t a = 0; a < f; ++a) z[size_t(c)] += at(k, g, j, a) * at(W, g, a, c);
      }
      const double s = ln_row(z, xh);
      double m1 = 0, m2 = 0;
      for (int64_t c = 0; c < f; ++c) {
        const double gm = at(gam, g, j, c);
        gy[size_t(c)] = (gm * xh[size_t(c)] + at(bet, g, j, c) - (at(v, g, j, c) - at(k, g, j, c))) * gm;
        m1 += gy[size_t(c)] / double(f);
        m2 += gy[size_t(c)] * xh[size_t(c)] / double(f);
      }
      for (int64_t c = 0; c < f; ++c) grad[size_t(j)][size_t(c)] = s * (gy[size_t(c)] - m1 - xh[size_t(c)] * m2);
    }
    double* out = o.v.data() + g * (b + f + 1) * f;
    for (int64_t i = 0; i < b; ++i) {  // zb_i = q_i·W + bias − Σ_{j ≤ i} η_ij·(q_i·k_j + 1)·G_j
      std::vector<double> zb(static_cast<size_t>(f)), xh = zb;
      for (int64_t c = 0; c < f; ++c) {
        zb[size_t(c)] = at(bias, g, 0, c);
        for (int64_t a = 0; a < f; ++a) zb[size_t(c)] += at(q, g, i, a) * at(W, g, a, c);
      }
      for (int64_t j = 0; j <= i; ++j) {
        double qk = 0;
        for (int64_t a = 0; a < f; ++a) qk += at(q, g, i, a) * at(k, g, j, a);
        for (int64_t c = 0; c < f; ++c) zb[size_t(c)] -= at(eta, g, i, j) * (qk + 1) * grad[size_t(j)][size_t(c)];
      }
      ln_row(zb, xh);
      for (int64_t c = 0; c < f; ++c)
        out[i * f + c] = at(q, g, i, c) + at(gam, g, i, c) * xh[size_t(c)] + at(bet, g, i, c);
    }
    for (int64_t a = 0; a < f; ++a)  // W' = W − Σ_j η_{b−1,j}·k_jᵀ·G_j, bias' = bias − Σ_j η_{b−1,j}·G_j
      for (int64_t c = 0; c < f; ++c) {
        double w = at(W, g, a, c), bb = at(bias, g, 0, c);
        for (int64_t j = 0; j < b; ++j) {
          w -= at(eta, g, b - 1, j) * at(k, g, j, a) * grad[size_t(j)][size_t(c)];
          if (a == 0) bb -= at(eta, g, b - 1, j) * grad[size_t(j)][size_t(c)];
        }
        out[(b + a) * f + c] = w;
        if (a == 0) out[(b + f) * f + c] = bb;
      }
  }
  return o;
}

void add_dual_cases(std::vector<OpCase>& t) {
  // Per-head W, bias, γ and β broadcast over the batch; a transposed xq; b = 3 tokens of f = 4.
  t.push_back({"ttt_linear_dual (per-head W, γ, β; transposed xq)", {Op::TttLinearDual},
               [](DType dt) {
                 return Ins{U({2, 4, 4}, -0.5, 0.5, 121, dt),        U({2, 1, 4}, -0.3, 0.3, 122, dt),
                            raw::transpose(U({2, 2, 4, 3}, -1, 1, 123, dt), 2, 3),
                            U({2, 2, 3, 4}, -1, 1, 124, dt),         U({2, 2, 3, 4}, -1, 1, 125, dt),
                            U({2, 2, 3, 3}, 0.05, 0.4, 126, dt),     U({2, 1, 4}, 0.5, 1.5, 127, dt),
                            U({2, 1, 4}, -0.5, 0.5, 128, dt)};
               },
               {true, true, true, true, true, true, true, true},
               [](const Ins& x) {
                 auto y = ttt_linear_dual(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], kLnEps);
                 return cat({y[0], y[1], y[2]}, -2);
               },
               dual_ref, {}});
  // Two of the node's three outputs used: the third gets no gradient, and the engine gives the backward zeros.
  t.push_back({"ttt_linear_dual (bias' unused)", {Op::TttLinearDual},
               [](DType dt) {
                 return Ins{U({2, 3, 3}, -0.5, 0.5, 131, dt),    U({2, 1, 3}, -0.3, 0.3, 132, dt),
                            U({2, 2, 4, 3}, -1, 1, 133, dt),     U({2, 2, 4, 3}, -1, 1, 134, dt),
                            U({2, 2, 4, 3}, -1, 1, 135, dt),     U({2, 2, 4, 4}, 0.05, 0.4, 136, dt),
                            U({3}, 0.5, 1.5, 137, dt),           U({3}, -0.5, 0.5, 138, dt)};
               },
               {true, true, true, true, true, true, true, true},
               [](const Ins& x) {
                 auto y = ttt_linear_dual(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], kLnEps);
                 return cat({y[0], y[1]}, -2);
               },
               [](const Refs& r) {  // the packed reference without its last row (bias') per head
                 const Dense packed = dual_ref(r);
                 const size_t nd = packed.shape.size();
                 const int64_t R = packed.shape[nd - 2], f = packed.shape[nd - 1], G = packed.numel() / (R * f);
                 Dense o{packed.shape, {}};
                 o.shape[nd - 2] = R - 1;
                 for (int64_t g = 0; g < G; ++g)
                   o.v.insert(o.v.end(), packed.v.begin() + g * R * f, packed.v.begin() + (g * R + R - 1) * f);
                 return o;
               },
               {}});
}

// ---- TTT-Linear's dual form over a sequence's mini-batches (ttt_linear_scan): dual_ref unit by unit, each unit
// starting from the W', bias' the one before produced. Result: out (…, N, f), then W_n and bias_n packed as
// (…, N + f + 1, f).
Dense scan_ref(const Refs& r) {
  const Dense &q = r[2], &eta = r[5];
  const size_t nd = q.shape.size();
  const int64_t N = q.shape[nd - 2], f = q.shape[nd - 1], b = eta.shape.back(), n = N / b, G = q.numel() / (N * f);
  auto shaped = [&](int64_t rows, int64_t cols) {
    Shape s(q.shape.begin(), q.shape.end() - 2);
    s.push_back(rows);
    s.push_back(cols);
    return Dense{s, std::vector<double>(size_t(G * rows * cols))};
  };
  // rows [r0, r0 + m) of every head of x (G, R, c) into a (…, m, c)
  auto rows = [&](const Dense& x, int64_t R, int64_t r0, int64_t m, int64_t c) {
    Dense o = shaped(m, c);
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < m * c; ++i) o.v[size_t(g * m * c + i)] = x.v[size_t((g * R + r0) * c + i)];
    return o;
  };
  Dense out = shaped(N + f + 1, f), W = r[0], bias = r[1];
  for (int64_t u = 0; u < n; ++u) {
    const Dense y = dual_ref({W, bias, rows(q, N, u * b, b, f), rows(r[3], N, u * b, b, f), rows(r[4], N, u * b, b, f),
                              rows(eta, n * b, u * b, b, b), r[6], r[7]});
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < b * f; ++i) out.v[size_t((g * (N + f + 1) + u * b) * f + i)] = y.v[size_t(g * (b + f + 1) * f + i)];
    W = rows(y, b + f + 1, b, f, f);
    bias = rows(y, b + f + 1, b + f, 1, f);
  }
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < (f + 1) * f; ++i)
      out.v[size_t((g * (N + f + 1) + N) * f + i)] = i < f * f ? W.v[size_t(g * f * f + i)] : bias.v[size_t(g * f + i - f * f)];
  return out;
}

void add_scan_cases(std::vector<OpCase>& t) {
  // Three mini-batches of b = 2 tokens of f = 4; per-head W, bias, γ, β broadcast over the batch; a transposed xq.
  t.push_back({"ttt_linear_scan (3 mini-batches; per-head W, γ, β; transposed xq)", {Op::TttLinearScan},
               [](DType dt) {
                 return Ins{U({2, 4, 4}, -0.5, 0.5, 141, dt),          U({2, 1, 4}, -0.3, 0.3, 142, dt),
                            raw::transpose(U({2, 2, 4, 6}, -1, 1, 143, dt), 2, 3),
                            U({2, 2, 6, 4}, -1, 1, 144, dt),           U({2, 2, 6, 4}, -1, 1, 145, dt),
                            U({2, 2, 3, 2, 2}, 0.05, 0.4, 146, dt),    U({2, 1, 4}, 0.5, 1.5, 147, dt),
                            U({2, 1, 4}, -0.5, 0.5, 148, dt)};
               },
               {true, true, true, true, true, true, true, true},
               [](const Ins& x) {
                 auto y = ttt_linear_scan(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], kLnEps);
                 return cat({y[0], y[1], y[2]}, -2);
               },
               scan_ref, {}});
}

// ---- TTT-MLP's dual form (checked against plain loops that take each query's own weights after the mini-batch's
// gradient step, W_i = W − Σ_{j ≤ i} η_ij·x_jᵀ·G_j per layer, from the gradients at W row by row: the meaning of
// the dual form rather than its products). Inputs {W1, b1, W2, b2, xq, xk, xv, η, γ, β}; the result packs out, W1',
// b1', W2', b2' of each head along the last axis.
struct MlpRef {
  using Rows = std::vector<std::vector<double>>;
  const Refs& r;
  int64_t b, f, h;
  // d[g's leading index…, i, c], broadcast (d: one of the ten inputs, g a head of xq).
  double at(size_t d, int64_t g, int64_t i, int64_t c) const {
    std::vector<int64_t> idx = r[4].index(g * b * f);
    idx[idx.size() - 2] = i;
    idx[idx.size() - 1] = c;
    return r[d].at_broadcast(idx);
  }
  static double gelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
  static double gelu1(double x) {
    const double c = 0.7978845608028654, t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
  }
  static double ln(const std::vector<double>& x, std::vector<double>& xh) { return ln_row_ref(x, xh); }
  // Token j's gradients at W: G2 through LN + L2 (target v − k), G1 back through W2 and gelu; X2 its hidden row.
  void grads(int64_t g, int64_t j, Rows& x2, Rows& g1, Rows& g2) const {
    std::vector<double> z1(static_cast<size_t>(h)), z2(static_cast<size_t>(f)), xh = z2, gy = z2;
    for (int64_t c = 0; c < h; ++c) {
      z1[size_t(c)] = at(1, g, 0, c);
      for (int64_t a = 0; a < f; ++a) z1[size_t(c)] += at(5, g, j, a) * at(0, g, a, c);
      x2[size_t(j)][size_t(c)] = gelu(z1[size_t(c)]);
    }
    for (int64_t c = 0; c < f; ++c) {
      z2[size_t(c)] = at(3, g, 0, c);
      for (int64_t a = 0; a < h; ++a) z2[size_t(c)] += x2[size_t(j)][size_t(a)] * at(2, g, a, c);
    }
    const double s = ln(z2, xh);
    double m1 = 0, m2 = 0;
    for (int64_t c = 0; c < f; ++c) {
      const double gm = at(8, g, j, c);
      gy[size_t(c)] = (gm * xh[size_t(c)] + at(9, g, j, c) - (at(6, g, j, c) - at(5, g, j, c))) * gm;
      m1 += gy[size_t(c)] / double(f);
      m2 += gy[size_t(c)] * xh[size_t(c)] / double(f);
    }
    for (int64_t c = 0; c < f; ++c) g2[size_t(j)][size_t(c)] = s * (gy[size_t(c)] - m1 - xh[size_t(c)] * m2);
    for (int64_t c = 0; c < h; ++c) {
      double d = 0;
      for (int64_t a = 0; a < f; ++a) d += g2[size_t(j)][size_t(a)] * at(2, g, c, a);
      g1[size_t(j)][size_t(c)] = d * gelu1(z1[size_t(c)]);
    }
  }
  // The weights after the step that row i of η weighs, flattened: W1 (f × h) at 0, b1 at f·h, W2 (h × f) at
  // f·h + h, b2 at 2·f·h + h.
  std::vector<double> stepped(int64_t g, int64_t i, const Rows& x2, const Rows& g1, const Rows& g2) const {
    std::vector<double> w;
    const Rows* gs[2] = {&g1, &g2};
    const int64_t in[2] = {f, h}, out[2] = {h, f};
    for (size_t l = 0; l < 2; ++l) {
      for (int64_t a = 0; a < in[l]; ++a)
        for (int64_t c = 0; c < out[l]; ++c) {
          double x = at(2 * l, g, a, c);
          for (int64_t j = 0; j <= i; ++j)
            x -= at(7, g, i, j) * (l == 0 ? at(5, g, j, a) : x2[size_t(j)][size_t(a)]) * (*gs[l])[size_t(j)][size_t(c)];
          w.push_back(x);
        }
      for (int64_t c = 0; c < out[l]; ++c) {
        double x = at(2 * l + 1, g, 0, c);
        for (int64_t j = 0; j <= i; ++j) x -= at(7, g, i, j) * (*gs[l])[size_t(j)][size_t(c)];
        w.push_back(x);
      }
    }
    return w;
  }
  // out_i = q_i + LN(f(q_i)) under the weights w.
  void output(int64_t g, int64_t i, const std::vector<double>& w, double* o) const {
    std::vector<double> xb(static_cast<size_t>(h)), zb(static_cast<size_t>(f)), xh = zb;
    for (int64_t c = 0; c < h; ++c) {
      double z = w[size_t(f * h + c)];
      for (int64_t a = 0; a < f; ++a) z += at(4, g, i, a) * w[size_t(a * h + c)];
      xb[size_t(c)] = gelu(z);
    }
    for (int64_t c = 0; c < f; ++c) {
      zb[size_t(c)] = w[size_t(2 * f * h + h + c)];
      for (int64_t a = 0; a < h; ++a) zb[size_t(c)] += xb[size_t(a)] * w[size_t(f * h + h + a * f + c)];
    }
    ln(zb, xh);
    for (int64_t c = 0; c < f; ++c) o[c] = at(4, g, i, c) + at(8, g, i, c) * xh[size_t(c)] + at(9, g, i, c);
  }
};

Dense mlp_dual_ref(const Refs& r) {
  const Dense& q = r[4];
  const size_t nd = q.shape.size();
  const MlpRef m{r, q.shape[nd - 2], q.shape[nd - 1], r[0].shape.back()};
  const int64_t b = m.b, f = m.f, h = m.h, G = q.numel() / (b * f), R = b * f + 2 * f * h + h + f;
  Shape os(q.shape.begin(), q.shape.end() - 2);
  os.push_back(R);
  Dense o{os, std::vector<double>(size_t(G * R))};
  const std::vector<double> hrow(static_cast<size_t>(h)), frow(static_cast<size_t>(f));
  for (int64_t g = 0; g < G; ++g) {
    MlpRef::Rows x2(static_cast<size_t>(b), hrow), g1 = x2, g2(static_cast<size_t>(b), frow);
    for (int64_t j = 0; j < b; ++j) m.grads(g, j, x2, g1, g2);
    double* og = o.v.data() + g * R;
    for (int64_t i = 0; i < b; ++i) m.output(g, i, m.stepped(g, i, x2, g1, g2), og + i * f);
    const std::vector<double> last = m.stepped(g, b - 1, x2, g1, g2);  // the state carried on: η's last row
    std::copy(last.begin(), last.end(), og + b * f);
  }
  return o;
}

// ---- TTT-MLP's dual form over a sequence's mini-batches (ttt_mlp_scan): mlp_dual_ref unit by unit, each unit
// starting from the weights the one before produced. Result per head: out (N × f), then W1_n, b1_n, W2_n, b2_n,
// flattened along the last axis.
Dense mlp_scan_ref(const Refs& r) {
  const Dense &q = r[4], &eta = r[7];
  const size_t nd = q.shape.size();
  const int64_t N = q.shape[nd - 2], f = q.shape[nd - 1], b = eta.shape.back(), n = N / b, h = r[0].shape.back(),
                G = q.numel() / (N * f), R = b * f + 2 * f * h + h + f, W = R - b * f;
  auto shaped = [&](int64_t rows, int64_t cols) {
    Shape s(q.shape.begin(), q.shape.end() - 2);
    s.push_back(rows);
    s.push_back(cols);
    return Dense{s, std::vector<double>(size_t(G * rows * cols))};
  };
  // elements [e0, e0 + m·c) of every head of x (G, E) as a (…, m, c)
  auto take = [&](const Dense& x, int64_t E, int64_t e0, int64_t m, int64_t c) {
    Dense o = shaped(m, c);
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < m * c; ++i) o.v[size_t(g * m * c + i)] = x.v[size_t(g * E + e0 + i)];
    return o;
  };
  Dense out = shaped(1, N * f + W);
  Refs x = r;
  for (int64_t u = 0; u < n; ++u) {
    for (size_t i = 4; i < 7; ++i) x[i] = take(r[i], N * f, u * b * f, b, f);
    x[7] = take(eta, n * b * b, u * b * b, b, b);
    const Dense y = mlp_dual_ref(x);
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < b * f; ++i) out.v[size_t(g * (N * f + W) + u * b * f + i)] = y.v[size_t(g * R + i)];
    const int64_t rc[4][2] = {{f, h}, {1, h}, {h, f}, {1, f}};
    for (size_t i = 0, e = size_t(b * f); i < 4; e += size_t(rc[i][0] * rc[i][1]), ++i)
      x[i] = take(y, R, int64_t(e), rc[i][0], rc[i][1]);
    if (u == n - 1)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < W; ++i) out.v[size_t(g * (N * f + W) + N * f + i)] = y.v[size_t(g * R + b * f + i)];
  }
  out.shape.pop_back();
  out.shape.back() = N * f + W;
  return out;
}

void add_mlp_dual_cases(std::vector<OpCase>& t) {
  // Per-head W1, b1 broadcast over the batch; b = 3 tokens of f = 3, hidden h = 4; per-head γ, β.
  t.push_back({"ttt_mlp_dual (per-head W1, b1, γ, β)", {Op::TttMlpDual},
               [](DType dt) {
                 return Ins{U({2, 3, 4}, -0.6, 0.6, 151, dt),       U({2, 1, 4}, -0.3, 0.3, 152, dt),
                            U({1, 2, 4, 3}, -0.6, 0.6, 153, dt),    U({1, 2, 1, 3}, -0.3, 0.3, 154, dt),
                            U({1, 2, 3, 3}, -1, 1, 155, dt),        U({1, 2, 3, 3}, -1, 1, 156, dt),
                            U({1, 2, 3, 3}, -1, 1, 157, dt),        U({1, 2, 3, 3}, 0.05, 0.4, 158, dt),
                            U({2, 1, 3}, 0.5, 1.5, 159, dt),        U({2, 1, 3}, -0.5, 0.5, 160, dt)};
               },
               {true, true, true, true, true, true, true, true, true, true},
               [](const Ins& x) {
                 std::array<Tensor, 10> a;
                 std::copy(x.begin(), x.end(), a.begin());
                 const auto y = ttt_mlp_dual(a, kLnEps);
                 std::vector<Tensor> flat;
                 for (const Tensor& p : y) flat.push_back(reshape(p, {1, 2, -1}));
                 return cat(flat, -1);
               },
               mlp_dual_ref, {}});
  // Three mini-batches of b = 2 tokens of f = 3, hidden h = 4; per-head W1, b1, γ, β broadcast over the batch; a
  // transposed xq.
  t.push_back({"ttt_mlp_scan (3 mini-batches; per-head W1, b1, γ, β; transposed xq)", {Op::TttMlpScan},
               [](DType dt) {
                 return Ins{U({2, 3, 4}, -0.6, 0.6, 161, dt),       U({2, 1, 4}, -0.3, 0.3, 162, dt),
                            U({2, 2, 4, 3}, -0.6, 0.6, 163, dt),    U({2, 2, 1, 3}, -0.3, 0.3, 164, dt),
                            raw::transpose(U({2, 2, 3, 6}, -1, 1, 165, dt), 2, 3),
                            U({2, 2, 6, 3}, -1, 1, 166, dt),        U({2, 2, 6, 3}, -1, 1, 167, dt),
                            U({2, 2, 3, 2, 2}, 0.05, 0.4, 168, dt), U({2, 1, 3}, 0.5, 1.5, 169, dt),
                            U({2, 1, 3}, -0.5, 0.5, 170, dt)};
               },
               {true, true, true, true, true, true, true, true, true, true},
               [](const Ins& x) {
                 std::array<Tensor, 10> a;
                 std::copy(x.begin(), x.end(), a.begin());
                 const auto y = ttt_mlp_scan(a, kLnEps);
                 std::vector<Tensor> flat;
                 for (const Tensor& p : y) flat.push_back(reshape(p, {2, 2, -1}));
                 return cat(flat, -1);
               },
               mlp_scan_ref, {}});
}

// ---- prefix mode's closed-form steps (checked against plain loops that keep every position's A_i as a (b × f)
// matrix and take Z_{j,i} = Z0_j + Σ_l (−M)_{jl}·A_i[l] and the LN+L2 gradient row by row, from the formulas of
// compose::ttt_prefix_steps rather than from its ops). Inputs {z0, t, neg_m, w, γ, β} of shapes (B, H, b, f) ×2,
// (B, H, b, b), (B, H, P, 1) and (1, H, 1, f) ×2.
Dense prefix_ref(const Refs& r, int steps) {
  const Dense &z0 = r[0], &t = r[1], &nm = r[2], &w = r[3], &gam = r[4], &bet = r[5];
  const int64_t b = z0.shape[2], f = z0.shape[3], G = z0.numel() / (b * f), P = b * (b + 1) / 2;
  Shape os = z0.shape;
  os[2] = P;
  Dense o{os, std::vector<double>(size_t(G * P * f))};
  auto grad_row = [&](int64_t g, int64_t j, const std::vector<double>& z) {  // ∂/∂z ½‖γ⊙LN(z) + β − t_j‖²
    double mu = 0, var = 0;
    for (double e : z) mu += e / double(f);
    for (double e : z) var += (e - mu) * (e - mu) / double(f);
    const double s = 1 / std::sqrt(var + kLnEps);
    std::vector<double> xh(static_cast<size_t>(f)), gy = xh, out = xh;
    double m1 = 0, m2 = 0;
    for (int64_t c = 0; c < f; ++c) {
      const int64_t k = (g * b + j) * f + c;
      xh[size_t(c)] = (z[size_t(c)] - mu) * s;
      const double gm = per_head(z0, gam, k);
      gy[size_t(c)] = (gm * xh[size_t(c)] + per_head(z0, bet, k) - t.v[size_t(k)]) * gm;
      m1 += gy[size_t(c)] / double(f);
      m2 += gy[size_t(c)] * xh[size_t(c)] / double(f);
    }
    for (int64_t c = 0; c < f; ++c) out[size_t(c)] = s * (gy[size_t(c)] - m1 - xh[size_t(c)] * m2);
    return out;
  };
  for (int64_t g = 0; g < G; ++g) {
    std::vector<double> A(size_t(b * b * f), 0.0);  // A[i][l][c]: position i's A_i
    for (int k = 0; k < steps; ++k) {
      std::vector<double> next = A;
      for (int64_t i = 0, p0 = 0; i < b; ++i)
        for (int64_t j = 0; j <= i; ++j, ++p0) {
          std::vector<double> z(static_cast<size_t>(f));
          for (int64_t c = 0; c < f; ++c) {
            z[size_t(c)] = z0.v[size_t((g * b + j) * f + c)];
            for (int64_t l = 0; l <= i; ++l)
              z[size_t(c)] += nm.v[size_t((g * b + j) * b + l)] * A[size_t((i * b + l) * f + c)];
          }
          const int64_t p = j * b - j * (j - 1) / 2 + (i - j);  // pair (j, i) in j-major order
          const std::vector<double> gr = grad_row(g, j, z);
          for (int64_t c = 0; c < f; ++c) next[size_t((i * b + j) * f + c)] += w.v[size_t(g * P + p)] * gr[size_t(c)];
        }
      A = next;
    }
    for (int64_t j = 0, p = 0; j < b; ++j)
      for (int64_t i = j; i < b; ++i, ++p)
        for (int64_t c = 0; c < f; ++c) o.v[size_t((g * P + p) * f + c)] = A[size_t((i * b + j) * f + c)];
  }
  return o;
}

void add_prefix_cases(std::vector<OpCase>& t) {
  // Two batch rows, two heads, b = 3 positions (six pairs) of f = 4, three steps: two read Z through −M.
  t.push_back({"ttt_prefix_steps (K = 3, per-head γ, β)", {Op::TttPrefixSteps},
               [](DType dt) {
                 return Ins{U({2, 2, 3, 4}, -1, 1, 141, dt),      U({2, 2, 3, 4}, -1, 1, 142, dt),
                            U({2, 2, 3, 3}, -1, 0.2, 143, dt),    U({2, 2, 6, 1}, 0.05, 0.4, 144, dt),
                            U({1, 2, 1, 4}, 0.5, 1.5, 145, dt),   U({1, 2, 1, 4}, -0.5, 0.5, 146, dt)};
               },
               {true, true, true, true, true, true},
               [](const Ins& x) { return ttt_prefix_steps(x[0], x[1], x[2], x[3], x[4], x[5], 3, kLnEps); },
               [](const Refs& r) { return prefix_ref(r, 3); }, {}});
}

// ---- shape and layout
void add_shape_cases(std::vector<OpCase>& t) {
  t.push_back({"reshape (non-contiguous)", {Op::Reshape}, [](DType dt) { return Ins{T(U({4, 3}, -1, 1, 61, dt))}; },
               {true}, [](const Ins& x) { return reshape(x[0], {2, -1}); },
               [](const Refs& r) { Dense o = r[0]; o.shape = {2, 6}; return o; }, {}});
  t.push_back({"permute", {Op::Permute}, x234, {true}, [](const Ins& x) { return permute(x[0], {2, 0, 1}); },
               [](const Refs& r) { return ref::permute(r[0], {2, 0, 1}); }, {}});
  t.push_back({"slice (step 2)", {Op::Slice, Op::PadSlice}, [](DType dt) { return Ins{U({3, 7}, -1, 1, 62, dt)}; }, {true},
               [](const Ins& x) { return slice(x[0], 1, 1, 6, 2); },
               [](const Refs& r) { return ref_slice(r[0], 1, 1, 3, 2); }, {}});
  t.push_back({"slice (negative start)", {Op::Slice}, x234, {true}, [](const Ins& x) { return slice(x[0], -1, -3, 4); },
               [](const Refs& r) { return ref_slice(r[0], 2, 1, 3, 1); }, {}});
  t.push_back({"pad_slice", {Op::PadSlice, Op::Slice}, [](DType dt) { return Ins{U({2, 3}, -1, 1, 63, dt)}; }, {true},
               [](const Ins& x) { return pad_slice(x[0], {2, 7}, 1, 1, 2); },
               [](const Refs& r) {
                 Dense o{{2, 7}, std::vector<double>(14, 0.0)};
                 for (int64_t i = 0; i < 2; ++i)
                   for (int64_t j = 0; j < 3; ++j) o.v[size_t(i * 7 + 1 + 2 * j)] = r[0].v[size_t(i * 3 + j)];
                 return o;
               },
               {}});
  auto cat_ref = [](const Refs& r) {  // concatenation along axis 1 of 2-d inputs
    int64_t rows = r[0].shape[0], cols = 0;
    for (auto& d : r) cols += d.shape[1];
    Dense o{{rows, cols}, {}};
    for (int64_t i = 0; i < rows; ++i)
      for (auto& d : r)
        for (int64_t j = 0; j < d.shape[1]; ++j) o.v.push_back(d.v[size_t(i * d.shape[1] + j)]);
    return o;
  };
  t.push_back({"cat (axis 1)", {Op::Cat},
               [](DType dt) { return Ins{U({2, 3}, -1, 1, 64, dt), U({2, 1}, -1, 1, 65, dt), T(U({2, 2}, -1, 1, 66, dt))}; },
               {true, true, true}, [](const Ins& x) { return cat(x, 1); }, cat_ref, {}});
  t.push_back({"stack (axis 1) as cat", {Op::Cat, Op::Reshape},
               [](DType dt) { return Ins{U({2}, -1, 1, 67, dt), U({2}, -1, 1, 68, dt)}; }, {true, true},
               [](const Ins& x) { return stack(x, 1); },
               [](const Refs& r) {
                 Refs cols;
                 for (auto& d : r) cols.push_back({{2, 1}, d.v});
                 Dense o{{2, 2}, {}};
                 for (int64_t i = 0; i < 2; ++i)
                   for (auto& c : cols) o.v.push_back(c.v[size_t(i)]);
                 return o;
               },
               {}});
  t.push_back({"split and recombine (one piece unused)", {Op::Split, Op::Mul, Op::Cat},
               [](DType dt) { return Ins{U({2, 6}, -1, 1, 69, dt)}; }, {true},
               [](const Ins& x) {
                 auto p = split(x[0], {2, 1, 3}, 1);
                 return cat({mul(p[2], p[2]), p[0]}, 1);
               },
               [cat_ref](const Refs& r) {
                 Dense a = ref_slice(r[0], 1, 0, 2, 1), b = ref_slice(r[0], 1, 3, 3, 1);
                 return cat_ref({ref::map(b, [](double v) { return v * v; }), a});
               },
               {}});
}

// Shifts, copies and casts.
void add_shift_and_copy_cases(std::vector<OpCase>& t) {
  auto shift_ref = [](int64_t s) {
    return [s](const Refs& r) {
      Dense o = r[0];
      for (int64_t i = 0; i < o.numel(); ++i) {
        auto idx = o.index(i);
        int64_t src = idx[1] - s;
        if (src < 0 || src >= o.shape[1]) { o.v[size_t(i)] = 0; continue; }
        idx[1] = src;
        o.v[size_t(i)] = r[0].v[size_t(r[0].flat(idx))];
      }
      return o;
    };
  };
  t.push_back({"shift (+2)", {Op::Slice, Op::PadSlice}, x234, {true}, [](const Ins& x) { return shift(x[0], 1, 2); },
               shift_ref(2), {}});
  t.push_back({"shift (-1)", {Op::Slice, Op::PadSlice}, x234, {true}, [](const Ins& x) { return shift(x[0], 1, -1); },
               shift_ref(-1), {}});
  t.push_back({"clone / contiguous", {Op::Clone}, [](DType dt) { return Ins{T(U({4, 3}, -1, 1, 70, dt))}; }, {true},
               [](const Ins& x) { return contiguous(x[0]); }, [](const Refs& r) { return r[0]; }, {}});
  OpCase cast{"to_dtype (f64 → f32 → f64)", {Op::ToDtype}, [](DType dt) { return Ins{U({3, 4}, -1, 1, 71, dt)}; },
              {true}, [](const Ins& x) { return mul(to_dtype(to_dtype(x[0], DType::F32), x[0].dtype()), x[0]); },
              [](const Refs& r) { return ref::map(r[0], [](double v) { return double(float(v)) * v; }); }, {}};
  cast.check.eps = 1e-2;  // the cast rounds to float32; a large step keeps that error small
  cast.check.atol = 1e-4;
  cast.check.rtol = 1e-2;
  t.push_back(cast);
}

// ---- indexing
void add_indexing_cases(std::vector<OpCase>& t) {
  t.push_back({"index_select (repeats)", {Op::IndexSelect, Op::IndexAdd},
               [](DType dt) { return Ins{U({5, 3}, -1, 1, 81, dt), ints({4, 0, 4, 2}, {4})}; }, {true, false},
               [](const Ins& x) { return index_select(x[0], 0, x[1]); },
               [](const Refs& r) {
                 Dense o{{4, 3}, {}};
                 for (double i : r[1].v)
                   for (int64_t j = 0; j < 3; ++j) o.v.push_back(r[0].v[size_t(int64_t(i) * 3 + j)]);
                 return o;
               },
               {}});
  t.push_back({"index_add (duplicates)", {Op::IndexAdd, Op::IndexSelect},
               [](DType dt) { return Ins{ints({1, 1, 3}, {3}), U({3, 3}, -1, 1, 82, dt)}; }, {false, true},
               [](const Ins& x) { return index_add({5, 3}, 0, x[0], x[1]); },
               [](const Refs& r) {
                 Dense o{{5, 3}, std::vector<double>(15, 0.0)};
                 for (size_t k = 0; k < 3; ++k)
                   for (int64_t j = 0; j < 3; ++j) o.v[size_t(int64_t(r[0].v[k]) * 3 + j)] += r[1].v[k * 3 + size_t(j)];
                 return o;
               },
               {}});
  t.push_back({"gather (axis 1)", {Op::Gather, Op::ScatterAdd},
               [](DType dt) { return Ins{U({3, 4}, -1, 1, 83, dt), ints({0, 3, 2, 2, 1, 0}, {3, 2})}; }, {true, false},
               [](const Ins& x) { return gather(x[0], 1, x[1]); },
               [](const Refs& r) {
                 Dense o{{3, 2}, {}};
                 for (int64_t i = 0; i < 3; ++i)
                   for (int64_t j = 0; j < 2; ++j) o.v.push_back(r[0].v[size_t(i * 4 + int64_t(r[1].v[size_t(i * 2 + j)]))]);
                 return o;
               },
               {}});
  t.push_back({"scatter_add (duplicates)", {Op::ScatterAdd, Op::Gather},
               [](DType dt) { return Ins{ints({1, 1, 0, 3, 2, 2}, {3, 2}), U({3, 2}, -1, 1, 84, dt)}; }, {false, true},
               [](const Ins& x) { return scatter_add({3, 4}, 1, x[0], x[1]); },
               [](const Refs& r) {
                 Dense o{{3, 4}, std::vector<double>(12, 0.0)};
                 for (int64_t i = 0; i < 3; ++i)
                   for (int64_t j = 0; j < 2; ++j) o.v[size_t(i * 4 + int64_t(r[0].v[size_t(i * 2 + j)]))] += r[1].v[size_t(i * 2 + j)];
                 return o;
               },
               {}});
  t.push_back({"embedding", {Op::IndexSelect, Op::Reshape},
               [](DType dt) { return Ins{U({6, 3}, -1, 1, 85, dt), ints({5, 0, 5, 2}, {2, 2})}; }, {true, false},
               [](const Ins& x) { return embedding(x[0], x[1]); },
               [](const Refs& r) {
                 Dense o{{2, 2, 3}, {}};
                 for (double i : r[1].v)
                   for (int64_t j = 0; j < 3; ++j) o.v.push_back(r[0].v[size_t(int64_t(i) * 3 + j)]);
                 return o;
               },
               {}});
}

// Ops built from indexing: a causal convolution and the cross-entropy loss.
void add_conv_and_loss_cases(std::vector<OpCase>& t) {
  t.push_back({"causal_conv1d", {Op::Mul, Op::Add, Op::Slice, Op::PadSlice, Op::Permute},
               [](DType dt) { return Ins{U({2, 6, 3}, -1, 1, 86, dt), U({3, 4}, -1, 1, 87, dt), U({3}, -1, 1, 88, dt)}; },
               {true, true, true}, [](const Ins& x) { return causal_conv1d(x[0], x[1], x[2]); },
               [](const Refs& r) {
                 const Dense &x = r[0], &w = r[1], &b = r[2];
                 Dense o{x.shape, std::vector<double>(x.v.size(), 0.0)};
                 for (int64_t bt = 0; bt < 2; ++bt)
                   for (int64_t tt = 0; tt < 6; ++tt)
                     for (int64_t c = 0; c < 3; ++c) {
                       double acc = b.v[size_t(c)];
                       for (int64_t k = 0; k < 4; ++k) {
                         int64_t s = tt - 3 + k;
                         if (s >= 0) acc += w.v[size_t(c * 4 + k)] * x.v[size_t((bt * 6 + s) * 3 + c)];
                       }
                       o.v[size_t((bt * 6 + tt) * 3 + c)] = acc;
                     }
                 return o;
               },
               {}});
  t.push_back({"cross_entropy", {Op::Gather, Op::Sub, Op::Sum},
               [](DType dt) { return Ins{U({5, 7}, -2, 2, 89, dt), ints({0, 6, 3, 3, 1}, {5})}; }, {true, false},
               [](const Ins& x) { return cross_entropy(x[0], x[1]); },
               [](const Refs& r) {
                 Dense lp = ref::softmax(r[0], true);
                 double s = 0;
                 for (int64_t i = 0; i < 5; ++i) s -= lp.v[size_t(i * 7 + int64_t(r[1].v[size_t(i)]))];
                 return Dense{{}, {s / 5}};
               },
               {}});
}

std::vector<OpCase> build() {
  std::vector<OpCase> t;
  add_unary_cases(t);
  add_binary_cases(t);
  add_reduction_cases(t);
  add_norm_cases(t);
  add_fused_activation_cases(t);
  add_matmul_cases(t);
  add_attention_cases(t);
  add_dual_cases(t);
  add_scan_cases(t);
  add_prefix_cases(t);
  add_mlp_dual_cases(t);
  add_shape_cases(t);
  add_shift_and_copy_cases(t);
  add_indexing_cases(t);
  add_conv_and_loss_cases(t);
  return t;
}

double max_rel_err(const ref::Dense& want, const std::vector<double>& got) {
  double scale = 1e-12, err = 0;
  for (double v : want.v) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want.v[i]));
  return err / scale;
}

}  // namespace

const std::vector<OpCase>& op_table() {
  static const std::vector<OpCase> table = build();
  return table;
}

OpCaseReport run_op_case(const OpCase& c, Device device) {
  OpCaseReport rep;
  rep.name = c.name;
  auto forward_err = [&](DType dt) {
    NoGradGuard ng;
    std::vector<Tensor> in = c.inputs(dt);
    std::vector<ref::Dense> refs;
    for (Tensor& t : in) {
      refs.push_back(ref::Dense::of(t));
      t = raw::to_device_keep_layout(t, device);
    }
    ref::Dense want = c.reference(refs);
    Tensor got = c.fn(in);
    if (got.shape() != want.shape) return 1e300;
    return max_rel_err(want, got.to_vector());
  };
  rep.fwd_f64_err = forward_err(DType::F64);
  rep.fwd_f32_err = forward_err(DType::F32);
  rep.fwd_ok = rep.fwd_f64_err <= 1e-12 && rep.fwd_f32_err <= c.f32_tol;
  std::vector<Tensor> in = c.inputs(DType::F64);
  for (Tensor& t : in) t = raw::to_device_keep_layout(t, device);
  rep.grad = gradcheck(c.fn, in, c.differentiable, c.check);
  rep.gradgrad = gradgradcheck(c.fn, in, c.differentiable, c.check);
  return rep;
}

}  // namespace ponder
