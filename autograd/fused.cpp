// Kernel or composition for each fused op, and FLOP rules derived from the compositions (autograd/fused.h).
#include "autograd/fused.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "autograd/compose.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

namespace ponder {
namespace fused {
namespace {

thread_local bool t_deriving = false;  // on while this thread runs compositions to derive a rule

using CatCounts = std::array<int64_t, size_t(FlopCat::Count)>;

int size_count(FusedOp op) { return op == FusedOp::Attention || op == FusedOp::AttentionBackward ? 4 : 2; }

// Runs op's composition once (float64, CPU) at sizes s: {R, D}, or {G, n, T, f} for attention (the probe's
// queries stand at positions 0 … n − 1 and keys at 0 … T − 1, so every query sees at least key 0).
void run_composition(FusedOp op, int variant, const Sizes& s, bool bcast) {
  Generator gen(7);
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
    case FusedOp::AdamwStep:
      compose::adamw_step_(rows(), rows(), gen.uniform({R, D}, 0, 1e-3, DType::F64), x,
                           AdamWCoeffs{1e-3, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05});
      break;
    case FusedOp::Attention:
    case FusedOp::AttentionBackward:
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

// The sizes whose bits are set in `ones` at 2, the others at 1.
Sizes corner(int k, unsigned ones) {
  Sizes s(size_t(k), 1);
  for (int v = 0; v < k; ++v) s[size_t(v)] += (ones >> v) & 1u;
  return s;
}
int sign_of(unsigned bits) { return __builtin_popcount(bits) % 2 ? -1 : 1; }

// Multilinear interpolation on {1, 2}^k. With x = 1 + y, the count at corner S is Σ_{T ⊆ S} d_T where
// d_T = Σ_{m ⊇ T} c_m; Möbius inversion twice gives d from the corners and the coefficients c from d.
Rule derive(FusedOp op, int variant, bool bcast) {
  const int k = size_count(op);
  const unsigned n = 1u << k;
  std::vector<CatCounts> q(n), d(n);
  for (unsigned S = 0; S < n; ++S) q[S] = measure(op, variant, corner(k, S), bcast);
  for (unsigned T = 0; T < n; ++T)
    for (unsigned S = T;; S = (S - 1) & T) {  // every subset S of T
      for (size_t c = 0; c < q[S].size(); ++c) d[T][c] += sign_of(T ^ S) * q[S][c];
      if (S == 0) break;
    }
  Rule r;
  r.coef.assign(n, CatCounts{});
  for (unsigned m = 0; m < n; ++m)
    for (unsigned T = m; T < n; T = (T + 1) | m)  // every superset T of m
      for (size_t c = 0; c < d[T].size(); ++c) r.coef[m][c] += sign_of(T ^ m) * d[T][c];
  Sizes check = Sizes(size_t(k), 0);
  for (int v = 0; v < k; ++v) check[size_t(v)] = 3 + v;
  const CatCounts m = measure(op, variant, check, bcast);
  bool ok = true;
  int64_t work = 0;  // a probe that counted nothing ran no composition (a missing case above)
  for (size_t c = 0; c < m.size(); ++c) {
    ok = ok && m[c] == r.at(FlopCat(c), check);
    work += m[c];
  }
  if (!ok || work == 0)
    throw std::logic_error(std::string("fused::rule: the composition of ") + fused_op_name(op) +
                           " counts no FLOPs, or FLOPs not multilinear in its sizes");
  return r;
}

}  // namespace

Sizes rows_of(const Tensor& x) {
  const int64_t n = x.numel(), D = x.dim() ? x.shape().back() : 1;
  return {D ? n / D : 0, D};
}

Sizes attention_sizes(const Tensor& q, const Tensor& k) {
  const int64_t n = q.shape()[q.dim() - 2], f = q.shape().back();
  return {n * f ? q.numel() / (n * f) : 0, n, k.shape()[k.dim() - 2], f};
}

int64_t Rule::at(FlopCat c, const Sizes& s) const {
  int64_t total = 0;
  for (unsigned m = 0; m < coef.size(); ++m) {
    int64_t term = coef[m][size_t(c)];
    for (size_t v = 0; v < s.size() && term; ++v)
      if ((m >> v) & 1u) term *= s[v];
    total += term;
  }
  return total;
}

int64_t Rule::term(FlopCat c, std::initializer_list<int> sizes) const {
  unsigned m = 0;
  for (int v : sizes) m |= 1u << v;
  if (m >= coef.size()) throw std::invalid_argument("fused::Rule::term: no such size");
  return coef[m][size_t(c)];
}

bool use(FusedOp op, const Tensor& x) { return !t_deriving && raw::fused_available(op, x); }

Rule rule(FusedOp op, bool bcast, int variant) {
  static std::mutex mu;
  static std::map<std::tuple<int, bool, int>, Rule> rules;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(int(op), bcast, variant);
  if (auto it = rules.find(key); it != rules.end()) return it->second;
  // The probes count nothing, time nothing and record nothing, and must see compositions all the way down.
  const FlopIsolate isolate;
  const NoGradGuard ng;
  const bool profiling = prof::enabled();
  prof::set_enabled(false);
  t_deriving = true;
  Rule r;
  try {
    r = derive(op, variant, bcast);
  } catch (...) {
    t_deriving = false;
    prof::set_enabled(profiling);
    throw;
  }
  t_deriving = false;
  prof::set_enabled(profiling);
  return rules.emplace(key, r).first->second;
}

void count(FusedOp op, const Sizes& sizes, bool bcast, int variant) {
  const Rule r = rule(op, bcast, variant);
  for (size_t c = 0; c < size_t(FlopCat::Count); ++c)
    if (const int64_t n = r.at(FlopCat(c), sizes); n > 0) flops::add(FlopCat(c), uint64_t(n));
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
bool smaller(const Tensor& param, const Tensor& x) { return param.shape() != x.shape(); }
}  // namespace

std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps) {
  return kernel_or_composition(
      FusedOp::LayerNormVjp, x, {&x, &v, &dz}, false, 0, [&] { return raw::layer_norm_vjp(x, v, dz, eps); },
      [&] { return compose::layer_norm_vjp(x, v, dz, eps); });
}

std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps) {
  return kernel_or_composition(
      FusedOp::LayerNormAffineBackward, x, {&x, &gamma, &g}, smaller(gamma, x), 0,
      [&] { return raw::layer_norm_affine_backward(x, gamma, g, eps); },
      [&] { return compose::layer_norm_affine_backward(x, gamma, g, eps); });
}

std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g, double eps) {
  return kernel_or_composition(
      FusedOp::RmsNormAffineBackward, x, {&x, &weight, &g}, smaller(weight, x), 0,
      [&] { return raw::rms_norm_affine_backward(x, weight, g, eps); },
      [&] { return compose::rms_norm_affine_backward(x, weight, g, eps); });
}

std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps) {
  return kernel_or_composition(
      FusedOp::LnL2GradVjp, z, {&z, &t, &gamma, &beta, &w}, smaller(gamma, z), 0,
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
