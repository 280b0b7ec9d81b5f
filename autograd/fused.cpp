// Kernel or composition for each fused op, and FLOP rules derived from the compositions (autograd/fused.h).
#include "autograd/fused.h"

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "autograd/compose.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

namespace ponder {
namespace fused {
namespace {

thread_local bool t_deriving = false;  // on while this thread runs compositions to derive a rule

using CatCounts = std::array<int64_t, size_t(FlopCat::Count)>;

// A probe: x of R rows of D, per-row parameters of shape (D) (broadcast) or (R, D).
struct Probe {
  int64_t R, D;
  bool bcast;
};

// Runs op's composition once on `p` (float64, CPU) and returns what it counted, per category.
void run_composition(FusedOp op, int variant, const Probe& p) {
  Generator gen(7);
  auto rows = [&] { return gen.normal({p.R, p.D}, 0, 1, DType::F64); };
  const Shape ps = p.bcast ? Shape{p.D} : Shape{p.R, p.D};
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
      compose::adamw_step_(rows(), rows(), gen.uniform({p.R, p.D}, 0, 1e-3, DType::F64), x,
                           AdamWCoeffs{1e-3, 0.9, 0.95, 1e-8, 0.1, 0.1, 0.05});
      break;
    case FusedOp::Count: throw std::logic_error("fused::rule: FusedOp::Count is not an op");
  }
}

CatCounts measure(FusedOp op, int variant, const Probe& p) {
  const FlopScope scope;
  run_composition(op, variant, p);
  const FlopCounts c = scope.counts();
  CatCounts out{};
  for (size_t k = 0; k < out.size(); ++k) out[k] = int64_t(c.category(FlopCat(k)));
  return out;
}

int64_t predict(const Rule& r, size_t k, int64_t R, int64_t D, bool bcast) {
  return r.per_elem[k] * R * D + r.per_row[k] * R + (bcast ? r.per_elem_bcast[k] * R * D : 0);
}

// Solves count = a·n + b·R (+ c·n when broadcast) from probes (1,1), (1,2), (2,1) and (2,1) broadcast, then
// checks the rule, with no constant term, on (3,4) both ways.
Rule derive(FusedOp op, int variant) {
  const CatCounts m11 = measure(op, variant, {1, 1, false}), m12 = measure(op, variant, {1, 2, false}),
                  m21 = measure(op, variant, {2, 1, false}), b21 = measure(op, variant, {2, 1, true});
  Rule r;
  bool ok = true;
  for (size_t k = 0; k < m11.size(); ++k) {
    r.per_elem[k] = m12[k] - m11[k];
    r.per_row[k] = m21[k] - m11[k] - r.per_elem[k];
    r.per_elem_bcast[k] = (b21[k] - m21[k]) / 2;
    ok = ok && m11[k] == r.per_elem[k] + r.per_row[k] && (b21[k] - m21[k]) % 2 == 0;
  }
  int64_t work = 0;  // a probe that counted nothing ran no composition (a missing case above)
  for (bool bcast : {false, true}) {
    const CatCounts m34 = measure(op, variant, {3, 4, bcast});
    for (size_t k = 0; k < m34.size(); ++k) {
      ok = ok && m34[k] == predict(r, k, 3, 4, bcast);
      work += m34[k];
    }
  }
  ok = ok && work > 0;
  if (!ok)
    throw std::logic_error(std::string("fused::rule: the composition of ") + fused_op_name(op) +
                           " counts no FLOPs, or not a·elements + b·rows (+ c·elements when its parameters broadcast)");
  return r;
}

}  // namespace

bool use(FusedOp op, const Tensor& x) { return !t_deriving && raw::fused_available(op, x); }

Rule rule(FusedOp op, int variant) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, Rule> rules;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(int(op), variant);
  if (auto it = rules.find(key); it != rules.end()) return it->second;
  // The probes count nothing, time nothing and record nothing, and must see compositions all the way down.
  const FlopIsolate isolate;
  const NoGradGuard ng;
  const bool profiling = prof::enabled();
  prof::set_enabled(false);
  t_deriving = true;
  Rule r;
  try {
    r = derive(op, variant);
  } catch (...) {
    t_deriving = false;
    prof::set_enabled(profiling);
    throw;
  }
  t_deriving = false;
  prof::set_enabled(profiling);
  return rules.emplace(key, r).first->second;
}

void count(FusedOp op, const Tensor& x, bool params_broadcast, int variant) {
  const Rule r = rule(op, variant);
  const int64_t n = x.numel(), D = x.dim() ? x.shape().back() : 1, R = D ? n / D : 0;
  for (size_t k = 0; k < r.per_elem.size(); ++k)
    if (const int64_t c = predict(r, k, R, D, params_broadcast); c > 0) flops::add(FlopCat(k), uint64_t(c));
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
  fused::count(op, x, bcast, variant);
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

double sum_squares(const Tensor& t) {
  if (!fused::use(FusedOp::SumSquares, t)) return compose::sum_squares(t);
  const double out = raw::sum_squares(t);
  fused::count(FusedOp::SumSquares, t);
  return out;
}

void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  const bool dense = p.is_contiguous() && m.is_contiguous() && v.is_contiguous();
  if (!dense || !fused::use(FusedOp::AdamwStep, p)) return compose::adamw_step_(p, m, v, g, c);
  raw::adamw_step_(p, m, v, g, c);
  fused::count(FusedOp::AdamwStep, p);
}

}  // namespace ponder
