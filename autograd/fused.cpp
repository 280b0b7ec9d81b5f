// Kernel or composition for each fused op, and FLOP rules derived from the compositions (autograd/fused.h).
#include "autograd/fused.h"

#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "autograd/compose.h"
#include "autograd/engine.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

namespace ponder {
namespace fused {
namespace {

thread_local bool t_deriving = false;  // on while this thread runs compositions to derive a rule

// RAII around a run of a composition made only to count its FLOPs: nothing it does is counted or timed outside.
struct Probe {
  const FlopIsolate isolate;
  const bool profiling = prof::enabled();
  Probe() { prof::set_enabled(false); }
  ~Probe() { prof::set_enabled(profiling); }
};

using CatCounts = std::array<int64_t, size_t(FlopCat::Count)>;

// The degree of a fused op's FLOPs in each of its sizes: 1 (multilinear) but for the TTT dual form, whose
// products are quadratic in the mini-batch and in the head width ({G, b, f}: G·b²·f and G·b·f² terms).
std::vector<int> degrees(FusedOp op) {
  switch (op) {
    case FusedOp::Attention:
    case FusedOp::AttentionBackward: return {1, 1, 1, 1};
    case FusedOp::TttLinearDual:
    case FusedOp::TttLinearDualBackward: return {1, 2, 2};
    default: return {1, 1};
  }
}
int size_count(FusedOp op) { return int(degrees(op).size()); }

// The TTT dual form at sizes {G, b, f} (γ, β per head when bcast, else per row). The forward's variant is the
// phase whose FLOPs count (compose::ttt_linear_dual's marks): the FLOPs of the other phases are put back.
void run_dual(FusedOp op, int variant, const Sizes& s, bool bcast) {
  Generator gen(7);
  const int64_t G = s[0], b = s[1], f = s[2];
  auto draw = [&](int64_t r, int64_t c, double sd) { return gen.normal({G, r, c}, 0, sd, DType::F64); };
  const Shape ps = bcast ? Shape{f} : Shape{G, b, f};  // (f): a sum over rows at every probe, as in a layer
  const Tensor W = draw(f, f, 0.3), bias = draw(1, f, 0.1), xq = draw(b, f, 1), xk = draw(b, f, 1),
               xv = draw(b, f, 1), eta = gen.uniform({G, b, b}, 0, 0.1, DType::F64),
               gamma = gen.normal(ps, 1, 0.1, DType::F64), beta = gen.normal(ps, 0, 0.1, DType::F64);
  if (op == FusedOp::TttLinearDualBackward) {
    // The kernel reads the forward's saved intermediates: the composition's recomputation of them is not counted.
    std::optional<FlopIsolate> recompute;
    recompute.emplace();
    compose::ttt_linear_dual_backward(W, bias, xq, xk, xv, eta, gamma, beta, draw(b, f, 1), draw(f, f, 1),
                                      draw(1, f, 1), 1e-5, [&] { recompute.reset(); });
    return;
  }
  // Phases before `variant` run under a FlopIsolate that ends at its mark; phases after it are isolated too.
  std::optional<FlopIsolate> hide;
  hide.emplace();
  auto mark = [&](int p) {
    if (p + 1 == variant) hide.reset();
    if (p == variant) hide.emplace();
  };
  if (variant == 0) hide.reset();
  compose::ttt_linear_dual(W, bias, xq, xk, xv, eta, gamma, beta, 1e-5, mark);
}

// Runs op's composition once (float64, CPU) at sizes s: {R, D}, or {G, n, T, f} for attention (the probe's
// queries stand at positions 0 … n − 1 and keys at 0 … T − 1, so every query sees at least key 0).
void run_composition(FusedOp op, int variant, const Sizes& s, bool bcast) {
  Generator gen(7);
  if (op == FusedOp::TttLinearDual || op == FusedOp::TttLinearDualBackward) return run_dual(op, variant, s, bcast);
  if (size_count(op) == 4) {
    auto draw = [&](int64_t rows) { return gen.normal({1, s[0], rows, s[3]}, 0, 1, DType::F64); };
    const Tensor q = draw(s[1]), k = draw(s[2]), v = draw(s[2]), dy = draw(s[1]);
    const AttnGeometry geo{0.5, 0, 0, 0};
    if (op == FusedOp::Attention) compose::attention(q, k, v, geo);
    else compose::attention_backward(q, k, v, dy, geo);
    return;
  }
  const int64_t R = s[0], D = s[1];
  auto rows = [&] { return gen.normal({R, D}, 0, 1, DType::F64); };
  const Shape ps = bcast ? Shape{D} : Shape{R, D};
  const Tensor x = rows(), v = rows(), w = rows(), gamma = gen.normal(ps, 1, 0.1, DType::F64),
               beta = gen.normal(ps, 0, 0.1, DType::F64);
  const double eps = 1e-5;
  const GateAct act = GateAct(variant);
  switch (op) {
    case FusedOp::LayerNormRows: compose::layer_norm_rows(x, eps); break;
    case FusedOp::LayerNormBackward: compose::layer_norm_backward(x, v, eps); break;
    case FusedOp::LayerNormVjp: compose::layer_norm_vjp(x, v, w, eps); break;
    case FusedOp::RmsNormRows: compose::rms_norm_rows(x, eps); break;
    case FusedOp::RmsNormBackward: compose::rms_norm_backward(x, v, eps); break;
    case FusedOp::LayerNormAffine: compose::layer_norm_affine(x, gamma, beta, eps); break;
    case FusedOp::LayerNormAffineBackward: compose::layer_norm_affine_backward(x, gamma, v, eps); break;
    case FusedOp::RmsNormAffine: compose::rms_norm_affine(x, gamma, eps); break;
    case FusedOp::RmsNormAffineBackward: compose::rms_norm_affine_backward(x, gamma, v, eps); break;
    case FusedOp::LnL2Grad: compose::ln_l2_grad(x, v, gamma, beta, eps); break;
    case FusedOp::LnL2GradVjp: compose::ln_l2_grad_vjp(x, v, gamma, beta, w, eps); break;
    case FusedOp::ActMul: compose::act_mul(act, x, v); break;
    case FusedOp::ActMulBackward: compose::act_mul_backward(act, x, v, w); break;
    case FusedOp::SumSquares: compose::sum_squares(x); break;
    case FusedOp::Rope: {  // sizes: rows R and pairs D (f = 2D), so every probe has an even f
      const Tensor cs = gen.normal({R, D}, 0, 1, DType::F64), sn = gen.normal({R, D}, 0, 1, DType::F64);
      compose::rope_rotate(gen.normal({R, 2 * D}, 0, 1, DType::F64), cs, sn);
      break;
    }
    case FusedOp::AdamwStep:
      compose::adamw_step_(rows(), rows(), gen.uniform({R, D}, 0, 1e-3, DType::F64), x,
                           AdamWCoeffs{1e-3, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05});
      break;
    case FusedOp::Attention:
    case FusedOp::AttentionBackward:
    case FusedOp::TttLinearDual:
    case FusedOp::TttLinearDualBackward:
    case FusedOp::TttPrefixSteps:  // counted by prefix_counts and mlp_dual_counts, not by a rule
    case FusedOp::TttPrefixStepsBackward:
    case FusedOp::TttMlpDual:
    case FusedOp::TttMlpDualBackward:
    case FusedOp::Count: throw std::logic_error("fused::rule: no row probe for this op");
  }
}

CatCounts measure(FusedOp op, int variant, const Sizes& s, bool bcast) {
  const FlopScope scope;
  run_composition(op, variant, s, bcast);
  const FlopCounts c = scope.counts();
  CatCounts out{};
  for (size_t k = 0; k < out.size(); ++k) out[k] = int64_t(c.category(FlopCat(k)));
  return out;
}

// Exponent vectors (and grid points) in mixed radix: digit v runs over 0 … deg[v], digit 0 varying fastest, so
// for multilinear ops the index of a monomial is the bit mask of its sizes.
std::vector<int> digits(const std::vector<int>& deg, size_t m) {
  std::vector<int> e(deg.size());
  for (size_t v = 0; v < deg.size(); ++v) {
    e[v] = int(m % size_t(deg[v] + 1));
    m /= size_t(deg[v] + 1);
  }
  return e;
}
size_t monomials(const std::vector<int>& deg) {
  size_t n = 1;
  for (int d : deg) n *= size_t(d + 1);
  return n;
}

// inv[e][p] of the Vandermonde matrix V[p][e] = (p + 1)^e, p, e = 0 … d (Gauss–Jordan; d ≤ 2 here).
std::vector<std::vector<long double>> vandermonde_inverse(int d) {
  const int n = d + 1;
  std::vector<std::vector<long double>> m(size_t(n), std::vector<long double>(size_t(2 * n), 0));
  for (int p = 0; p < n; ++p) {
    long double x = 1;
    for (int e = 0; e < n; ++e, x *= (p + 1)) m[size_t(p)][size_t(e)] = x;
    m[size_t(p)][size_t(n + p)] = 1;
  }
  for (int c = 0; c < n; ++c) {  // the nodes are distinct, so every pivot is non-zero without row swaps
    const long double piv = m[size_t(c)][size_t(c)];
    for (auto& x : m[size_t(c)]) x /= piv;
    for (int r = 0; r < n; ++r)
      if (r != c) {
        const long double f = m[size_t(r)][size_t(c)];
        for (int j = 0; j < 2 * n; ++j) m[size_t(r)][size_t(j)] -= f * m[size_t(c)][size_t(j)];
      }
  }
  std::vector<std::vector<long double>> inv(static_cast<size_t>(n), std::vector<long double>(static_cast<size_t>(n)));
  for (int e = 0; e < n; ++e)
    for (int p = 0; p < n; ++p) inv[size_t(e)][size_t(p)] = m[size_t(e)][size_t(n + p)];
  return inv;
}

// Polynomial interpolation on the grid {1 … deg_v + 1} of each size: the counts q at the grid points are
// V_1 ⊗ … ⊗ V_k applied to the coefficients, so the coefficients are the inverse Vandermonde matrices applied
// along each axis in turn. The result is rounded to integers and then checked exactly off the grid.
Rule derive(FusedOp op, int variant, bool bcast) {
  const std::vector<int> deg = degrees(op);
  const size_t k = deg.size(), n = monomials(deg), cats = size_t(FlopCat::Count);
  std::vector<std::vector<long double>> a(n, std::vector<long double>(cats, 0));
  for (size_t p = 0; p < n; ++p) {
    const std::vector<int> e = digits(deg, p);
    Sizes s(k);
    for (size_t v = 0; v < k; ++v) s[v] = e[v] + 1;
    const CatCounts q = measure(op, variant, s, bcast);
    for (size_t c = 0; c < cats; ++c) a[p][c] = q[c];
  }
  size_t stride = 1;
  for (size_t v = 0; v < k; stride *= size_t(deg[v] + 1), ++v) {
    const auto inv = vandermonde_inverse(deg[v]);
    std::vector<std::vector<long double>> b(n, std::vector<long double>(cats, 0));
    for (size_t m = 0; m < n; ++m) {
      const int ev = digits(deg, m)[v];
      const size_t base = m - size_t(ev) * stride;
      for (int p = 0; p <= deg[v]; ++p)
        for (size_t c = 0; c < cats; ++c) b[m][c] += inv[size_t(ev)][size_t(p)] * a[base + size_t(p) * stride][c];
    }
    a.swap(b);
  }
  Rule r;
  r.deg = deg;
  r.coef.assign(n, CatCounts{});
  for (size_t m = 0; m < n; ++m)
    for (size_t c = 0; c < cats; ++c) r.coef[m][c] = int64_t(std::llround(a[m][c]));
  Sizes check(k);
  for (size_t v = 0; v < k; ++v) check[v] = deg[v] + 2 + int64_t(v);
  const CatCounts m = measure(op, variant, check, bcast);
  bool ok = true;
  int64_t work = 0;  // a probe that counted nothing ran no composition (a missing case above)
  for (size_t c = 0; c < m.size(); ++c) {
    ok = ok && m[c] == r.at(FlopCat(c), check);
    work += m[c];
  }
  if (!ok || work == 0)
    throw std::logic_error(std::string("fused::rule: the composition of ") + fused_op_name(op) +
                           " counts no FLOPs, or FLOPs not a polynomial of the stated degree in its sizes");
  return r;
}

}  // namespace

Sizes rows_of(const Tensor& x) {
  const int64_t n = x.numel(), D = x.dim() ? x.shape().back() : 1;
  return {D ? n / D : 0, D};
}

Sizes dual_sizes(const Tensor& xq) {
  const int64_t b = xq.shape()[xq.dim() - 2], f = xq.shape().back();
  return {b * f != 0 ? xq.numel() / (b * f) : 0, b, f};
}

Sizes attention_sizes(const Tensor& q, const Tensor& k) {
  const int64_t n = q.shape()[q.dim() - 2], f = q.shape().back();
  return {n * f != 0 ? q.numel() / (n * f) : 0, n, k.shape()[k.dim() - 2], f};
}

// Every fused op's call counts its FLOPs here, so the monomials' exponents are decoded from m as digits() does,
// without a vector each (that allocation was 1.5 % of a comparison's time).
int64_t Rule::at(FlopCat c, const Sizes& s) const {
  int64_t total = 0;
  for (size_t m = 0; m < coef.size(); ++m) {
    int64_t term = coef[m][size_t(c)];
    size_t rest = m;
    for (size_t v = 0; v < s.size() && v < deg.size() && term; ++v) {
      const size_t radix = size_t(deg[v] + 1);
      for (size_t p = 0; p < rest % radix; ++p) term *= s[v];
      rest /= radix;
    }
    total += term;
  }
  return total;
}

int64_t Rule::term(FlopCat c, std::initializer_list<int> sizes) const {
  std::vector<int> e(deg.size(), 0);
  for (int v : sizes) {
    if (v < 0 || size_t(v) >= deg.size() || ++e[size_t(v)] > deg[size_t(v)])
      throw std::invalid_argument("fused::Rule::term: no such monomial");
  }
  size_t m = 0, stride = 1;
  for (size_t v = 0; v < deg.size(); stride *= size_t(deg[v] + 1), ++v) m += size_t(e[v]) * stride;
  return coef[m][size_t(c)];
}

bool use(FusedOp op, const Tensor& x) { return !t_deriving && raw::fused_available(op, x); }
bool node(FusedOp op, const Tensor& x) { return !t_deriving && raw::fused_enabled(op, x); }

const Rule& rule(FusedOp op, bool bcast, int variant) {
  static std::mutex mu;
  static std::map<std::tuple<int, bool, int>, Rule> rules;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(int(op), bcast, variant);
  if (auto it = rules.find(key); it != rules.end()) return it->second;
  // The probes count nothing, time nothing and record nothing, and must see compositions all the way down.
  const Probe probe;
  const NoGradGuard ng;
  struct Deriving {
    Deriving() { t_deriving = true; }
    ~Deriving() { t_deriving = false; }
  } deriving;
  return rules.emplace(key, derive(op, variant, bcast)).first->second;
}

void count(FusedOp op, const Sizes& sizes, bool bcast, int variant) {
  const Rule& r = rule(op, bcast, variant);
  for (size_t c = 0; c < size_t(FlopCat::Count); ++c)
    if (const int64_t n = r.at(FlopCat(c), sizes); n > 0) flops::add(FlopCat(c), uint64_t(n));
}

void add_counts(const Counts& c) {
  for (size_t k = 0; k < c.size(); ++k)
    if (c[k] > 0) flops::add(FlopCat(k), uint64_t(c[k]));
}

namespace {
Counts of(const FlopCounts& d, Phase p) {
  Counts c{};
  for (size_t k = 0; k < c.size(); ++k) c[k] = int64_t(d.get(FlopCat(k), p));
  return c;
}

using PhasedFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const std::function<void(int)>&)>;

// fn(x, mark) run once forward (the counts split at its marks) and backward from random upstream gradients, with
// every x needing a gradient, in float64 on the CPU.
PhasedCounts measure_phased(std::vector<Tensor> x, const PhasedFn& fn) {
  Generator gen(11);
  for (Tensor& t : x) set_requires_grad(t);
  PhasedCounts c;
  FlopCounts last = flops::snapshot();
  auto mark = [&](int p) {
    const FlopCounts now = flops::snapshot();
    const Counts d = of(now - last, Phase::Forward);
    for (size_t k = 0; k < d.size(); ++k) c.forward[size_t(p)][k] += d[k];
    last = now;
  };
  const SetGradGuard on(true);
  const std::vector<Tensor> y = fn(x, mark);
  const FlopScope back;
  GradOptions go;
  go.allow_unused = true;
  std::vector<Tensor> up;
  for (const Tensor& t : y) up.push_back(gen.normal(t.shape(), 0, 1, DType::F64));
  grad(y, x, up, go);
  c.backward = of(back.counts(), Phase::Backward);
  return c;
}

// compose::ttt_prefix_steps at the op's shapes.
PrefixCounts measure_prefix(const Shape& z0s, const Shape& gs, int steps) {
  Generator gen(7);
  const int r = int(z0s.size()) - 2;
  const int64_t b = z0s[size_t(r)];
  auto lead = [&](int64_t m, int64_t n) {
    Shape s(z0s.begin(), z0s.begin() + r);
    s.push_back(m);
    s.push_back(n);
    return s;
  };
  return measure_phased({gen.normal(z0s, 0, 1, DType::F64), gen.normal(z0s, 0, 1, DType::F64),
                         gen.normal(lead(b, b), 0, 0.1, DType::F64),
                         gen.uniform(lead(kPrefixPairs(b), 1), 0, 0.1, DType::F64), gen.normal(gs, 1, 0.1, DType::F64),
                         gen.normal(gs, 0, 0.1, DType::F64)},
                        [steps](const std::vector<Tensor>& x, const std::function<void(int)>& mark) {
                          return std::vector<Tensor>{
                              compose::ttt_prefix_steps(x[0], x[1], x[2], x[3], x[4], x[5], steps, 1e-5, mark)};
                        });
}

// compose::ttt_mlp_dual at the op's shapes.
PhasedCounts measure_mlp_dual(const std::vector<Shape>& shapes) {
  Generator gen(9);
  std::vector<Tensor> x;
  for (const Shape& s : shapes) x.push_back(gen.normal(s, 0, 0.1, DType::F64));
  return measure_phased(std::move(x), [](const std::vector<Tensor>& v, const std::function<void(int)>& mark) {
    std::array<Tensor, 10> a;
    std::copy(v.begin(), v.end(), a.begin());
    const auto y = compose::ttt_mlp_dual(a, 1e-5, mark);
    return std::vector<Tensor>(y.begin(), y.end());
  });
}

// Measured once per key and kept: the counts depend on the shapes only.
template <class Key, class Measure>
PhasedCounts once_per_shape(const Key& key, Measure measure) {
  static std::mutex mu;
  static std::map<Key, PhasedCounts> seen;
  const std::lock_guard<std::mutex> lock(mu);
  if (auto it = seen.find(key); it != seen.end()) return it->second;
  const Probe probe;
  return seen.emplace(key, measure()).first->second;
}
}  // namespace

PrefixCounts prefix_counts(const Shape& z0, const Shape& gamma, int steps) {
  return once_per_shape(std::make_tuple(z0, gamma, steps), [&] { return measure_prefix(z0, gamma, steps); });
}

PhasedCounts mlp_dual_counts(const std::vector<Shape>& shapes) {
  return once_per_shape(shapes, [&] { return measure_mlp_dual(shapes); });
}

}  // namespace fused

namespace {
// The kernel gives values without history, so it serves only where none is recorded.
bool kernel_now(FusedOp op, const Tensor& x, std::initializer_list<const Tensor*> inputs) {
  if (!fused::use(op, x)) return false;
  if (!GradMode::enabled()) return true;
  for (const Tensor* t : inputs)
    if (requires_grad(*t)) return false;
  return true;
}
// The kernel (counted as the composition) when kernel_now holds, else the composition.
template <class Kernel, class Composition>
auto kernel_or_composition(FusedOp op, const Tensor& x, std::initializer_list<const Tensor*> inputs, bool bcast,
                           int variant, Kernel kernel, Composition composition) {
  if (!kernel_now(op, x, inputs)) return composition();
  auto out = kernel();
  fused::count(op, fused::rows_of(x), bcast, variant);
  return out;
}
}  // namespace

std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps) {
  return kernel_or_composition(
      FusedOp::LayerNormVjp, x, {&x, &v, &dz}, false, 0, [&] { return raw::layer_norm_vjp(x, v, dz, eps); },
      [&] { return compose::layer_norm_vjp(x, v, dz, eps); });
}

std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps) {
  return kernel_or_composition(
      FusedOp::LayerNormAffineBackward, x, {&x, &gamma, &g}, fused::broadcast_param(gamma, x), 0,
      [&] { return raw::layer_norm_affine_backward(x, gamma, g, eps); },
      [&] { return compose::layer_norm_affine_backward(x, gamma, g, eps); });
}

std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g, double eps) {
  return kernel_or_composition(
      FusedOp::RmsNormAffineBackward, x, {&x, &weight, &g}, fused::broadcast_param(weight, x), 0,
      [&] { return raw::rms_norm_affine_backward(x, weight, g, eps); },
      [&] { return compose::rms_norm_affine_backward(x, weight, g, eps); });
}

std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps) {
  return kernel_or_composition(
      FusedOp::LnL2GradVjp, z, {&z, &t, &gamma, &beta, &w}, fused::broadcast_param(gamma, z), 0,
      [&] { return raw::ln_l2_grad_vjp(z, t, gamma, beta, w, eps); },
      [&] { return compose::ln_l2_grad_vjp(z, t, gamma, beta, w, eps); });
}

std::pair<Tensor, Tensor> act_mul_backward(GateAct act, const Tensor& a, const Tensor& b, const Tensor& g) {
  return kernel_or_composition(
      FusedOp::ActMulBackward, a, {&a, &b, &g}, false, int(act), [&] { return raw::act_mul_backward(act, a, b, g); },
      [&] { return compose::act_mul_backward(act, a, b, g); });
}

std::array<Tensor, 3> attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                                         const Tensor& lse, const Tensor& dy, const AttnGeometry& geo) {
  if (!kernel_now(FusedOp::AttentionBackward, q, {&q, &k, &v, &dy})) return compose::attention_backward(q, k, v, dy, geo);
  auto out = raw::attention_backward(q, k, v, y, lse, dy, geo);
  fused::count(FusedOp::AttentionBackward, fused::attention_sizes(q, k));
  return out;
}

std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                               const std::array<Tensor, 3>& dy, double eps) {
  if (!kernel_now(FusedOp::TttLinearDualBackward, xq,
                  {&W, &bias, &xq, &xk, &xv, &eta, &gamma, &beta, &dy[0], &dy[1], &dy[2]})) {
    // The composition first recomputes the forward's intermediates, which the kernel reads saved: not counted, so
    // the backward counts the same on every device and at every order (the rule above counts the same part).
    std::optional<FlopIsolate> recompute;
    recompute.emplace();
    return compose::ttt_linear_dual_backward(W, bias, xq, xk, xv, eta, gamma, beta, dy[0], dy[1], dy[2], eps,
                                             [&] { recompute.reset(); });
  }
  auto out = raw::ttt_linear_dual_backward(W, bias, xq, xk, xv, eta, gamma, beta, saved, dy, eps);
  fused::count(FusedOp::TttLinearDualBackward, fused::dual_sizes(xq), gamma.shape() != xq.shape());
  return out;
}

double sum_squares(const Tensor& t) {
  if (!fused::use(FusedOp::SumSquares, t)) return compose::sum_squares(t);
  const double out = raw::sum_squares(t);
  fused::count(FusedOp::SumSquares, fused::rows_of(t));
  return out;
}

void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  const bool dense = p.is_contiguous() && m.is_contiguous() && v.is_contiguous();
  if (!dense || !fused::use(FusedOp::AdamwStep, p)) return compose::adamw_step_(p, m, v, g, c);
  raw::adamw_step_(p, m, v, g, c);
  fused::count(FusedOp::AdamwStep, fused::rows_of(p));
}

}  // namespace ponder
