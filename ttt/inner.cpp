#include "ttt/inner.h"

#include <optional>
#include <vector>

#include "autograd/compose.h"
#include "autograd/engine.h"

namespace ponder::ttt {

std::vector<Tensor> InnerState::tensors() const {
  if (mlp()) return {W1, b1, W2, b2};
  return {W1, b1};
}

InnerState InnerState::from(const std::vector<Tensor>& t, bool mlp) {
  if (mlp) return {t[0], t[1], t[2], t[3]};
  return {t[0], t[1], {}, {}};
}

Tensor inner_ln(const Tensor& z, const InnerNorm& n) { return layer_norm_affine(z, n.gamma, n.beta, n.eps); }

Tensor f_res(const InnerState& s, const Tensor& x) {
  Tensor z1 = add(matmul(x, s.W1), s.b1);
  if (!s.mlp()) return z1;
  return add(matmul(gelu_tanh(z1), s.W2), s.b2);
}

Tensor recon_loss_rows(const Tensor& z, const Tensor& target, const InnerNorm& n) {
  Tensor r = sub(inner_ln(z, n), target);
  return affine(sum(mul(r, r), {-1}), 0.5, 0);
}

Tensor inner_loss_rows(const InnerState& s, const Tensor& xk, const Tensor& target, const InnerNorm& n) {
  return recon_loss_rows(f_res(s, xk), target, n);
}

Tensor ln_l2_grad(const Tensor& z, const Tensor& target, const InnerNorm& n) {
  // (D·gy − Σgy − x̂·Σ(gy⊙x̂)) / (D·σ) with gy = (γ⊙x̂ + β − target)⊙γ: the closed form of docs/ttt.md §1.6
  // as one fused op, whose gradient in the outer backward (docs/ttt.md §2.2) is one fused kernel too.
  return ponder::ln_l2_grad(z, target, n.gamma, n.beta, n.eps);
}

Tensor gelu_grad(const Tensor& x) { return gelu_tanh_grad(x); }

Tensor inner_output(const InnerState& s, const Tensor& xq, const InnerNorm& n) {
  return add(xq, inner_ln(f_res(s, xq), n));
}

namespace {

// The state carried to the next mini-batch: W ← W − Σ_j ηlast_j·x_jᵀ·g_j and b ← b − Σ_j ηlast_j·g_j for each
// layer (the last row of the dual form's η mask). eta_last: (B,H,b,1); x1, g1, x2, g2 as in dual_combine.
InnerState carried_update(const InnerState& s, const Tensor& eta_last, const Tensor& x1, const Tensor& g1,
                          const Tensor& x2, const Tensor& g2, CostMeter* meter) {
  InnerState next;
  next.W1 = sub(s.W1, matmul(transpose(mul(eta_last, x1), -1, -2), g1));
  next.b1 = sub(s.b1, sum(mul(eta_last, g1), {-2}, true));
  if (s.mlp()) {
    next.W2 = sub(s.W2, matmul(transpose(mul(eta_last, x2), -1, -2), g2));
    next.b2 = sub(s.b2, sum(mul(eta_last, g2), {-2}, true));
  }
  if (meter) meter->charge(&UnitCost::update);
  return next;
}

// Given the per-token gradients at the start-of-mini-batch weights, the dual-form outputs and the
// carried state (docs/ttt.md §1.7–§1.8). g1: ∂ℓ/∂Z1 (B,H,b,h); g2: ∂ℓ/∂Z2 (B,H,b,f) for the MLP.
Tensor dual_combine(const InnerState& s, const Tensor& xq, const Tensor& x1, const Tensor& x2, const Tensor& g1,
                    const Tensor& g2, const Tensor& eta, const InnerNorm& n, InnerState& next, CostMeter* meter) {
  Tensor eta_tril = tril(eta);                                            // (B,H,b,b): η[i,j], j ≤ i
  // Layer 1: Z̄1 = XQ·W1 − (η ⊙ tril(XQ·X1ᵀ))·G1 + b1 − tril(η)·G1
  Tensor a1 = mul(eta_tril, matmul(xq, transpose(x1, -1, -2)));
  Tensor zbar1 = add(sub(matmul(xq, s.W1), matmul(a1, g1)), sub(s.b1, matmul(eta_tril, g1)));
  Tensor out;
  if (!s.mlp()) {
    out = add(xq, inner_ln(zbar1, n));
  } else {
    Tensor xbar2 = gelu_tanh(zbar1);
    Tensor a2 = mul(eta_tril, matmul(xbar2, transpose(x2, -1, -2)));
    Tensor zbar2 = add(sub(matmul(xbar2, s.W2), matmul(a2, g2)), sub(s.b2, matmul(eta_tril, g2)));
    out = add(xq, inner_ln(zbar2, n));
  }
  if (meter) meter->charge(&UnitCost::output);
  next = carried_update(s, eta_last_row(eta), x1, g1, x2, g2, meter);
  return out;
}

// ∂ℓ/∂Z1 (and ∂ℓ/∂Z2 for the MLP) at s, closed form; also returns the MLP's hidden activation.
void closed_form_grads(const InnerState& s, const Tensor& xk, const Tensor& target, const InnerNorm& n, Tensor& g1,
                       Tensor& x2, Tensor& g2, CostMeter* meter) {
  Tensor z1 = add(matmul(xk, s.W1), s.b1), z2;
  if (s.mlp()) {
    x2 = gelu_tanh(z1);
    z2 = add(matmul(x2, s.W2), s.b2);
  }
  if (meter) meter->charge(&UnitCost::inner_forward);
  if (!s.mlp()) {
    g1 = ln_l2_grad(z1, target, n);
  } else {
    g2 = ln_l2_grad(z2, target, n);
    g1 = mul(matmul(g2, transpose(s.W2, -1, -2)), gelu_grad(z1));
  }
  if (meter) meter->charge(&UnitCost::inner_grad);
}

}  // namespace

namespace {
// The cost field of a dual-form op's phase p (its mark(p)).
constexpr uint64_t UnitCost::*kDualPhase[] = {&UnitCost::inner_forward, &UnitCost::inner_grad, &UnitCost::output,
                                               &UnitCost::update};
}  // namespace

Tensor eta_last_row(const Tensor& eta) {
  const int64_t b = eta.shape()[2];
  return transpose(slice(eta, 2, b - 1, b), -1, -2);
}

Tensor dual_step(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                 const InnerNorm& n, InnerState& next, CostMeter* meter) {
  // One fused op per inner model (its composition where no kernel serves); the phases split a unit's cost.
  const auto charge = [&](int p) {
    if (meter) meter->charge(kDualPhase[p]);
  };
  if (!s.mlp()) {
    auto [out, W1, b1] = ttt_linear_dual(s.W1, s.b1, xq, xk, xv, eta, n.gamma, n.beta, n.eps, charge);
    next = InnerState{W1, b1, {}, {}};
    return out;
  }
  auto y = ttt_mlp_dual({s.W1, s.b1, s.W2, s.b2, xq, xk, xv, eta, n.gamma, n.beta}, n.eps, charge);
  next = InnerState{y[1], y[2], y[3], y[4]};
  return y[0];
}

Tensor dual_scan(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                 const InnerNorm& n, InnerState& next, std::vector<UnitCost>& costs) {
  const size_t first = costs.size();
  costs.resize(first + size_t(eta.shape()[2]));  // no reallocation below: the meter points into it
  std::optional<CostMeter> meter;
  const auto mark = [&](int64_t u, int p) {
    if (p < 0) {
      meter.emplace(&costs[first + size_t(u)]);
      return;
    }
    meter->charge(kDualPhase[p]);
  };
  if (s.mlp()) {
    auto y = ttt_mlp_scan({s.W1, s.b1, s.W2, s.b2, xq, xk, xv, eta, n.gamma, n.beta}, n.eps, mark);
    next = InnerState{y[1], y[2], y[3], y[4]};
    return y[0];
  }
  auto [out, W1, b1] = ttt_linear_scan(s.W1, s.b1, xq, xk, xv, eta, n.gamma, n.beta, n.eps, mark);
  next = InnerState{W1, b1, {}, {}};
  return out;
}

Tensor dual_step_autograd(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                          const Tensor& eta, const InnerNorm& n, InnerState& next, CostMeter* meter) {
  // The inner loss is always recorded (grad() needs a graph); its gradients are recorded only when
  // the outer pass is, so evaluation builds no second-order graph.
  const bool outer = GradMode::enabled();
  Tensor target = sub(xv, xk);
  Tensor z1 = add(matmul(xk, s.W1), s.b1);
  Tensor x2, g1, g2;
  {
    SetGradGuard on(true);
    Tensor z = tracked(z1);
    GradOptions go;
    go.create_graph = outer;
    go.retain_graph = true;
    if (!s.mlp()) {
      Tensor loss = sum(recon_loss_rows(z, target, n));
      if (meter) meter->charge(&UnitCost::inner_forward);
      g1 = grad({loss}, {z}, {}, go)[0];
    } else {
      x2 = gelu_tanh(z);
      Tensor z2 = add(matmul(x2, s.W2), s.b2);
      Tensor loss = sum(recon_loss_rows(z2, target, n));
      if (meter) meter->charge(&UnitCost::inner_forward);
      auto g = grad({loss}, {z, z2}, {}, go);
      g1 = g[0];
      g2 = g[1];
    }
    if (meter) meter->charge(&UnitCost::inner_grad);
  }
  return dual_combine(s, xq, xk, x2, g1, g2, eta, n, next, meter);
}

Tensor tracked(const Tensor& t) {
  if (requires_grad(t)) return t;
  Tensor leaf = detach(t);
  set_requires_grad(leaf);
  return leaf;
}

}  // namespace ponder::ttt

namespace ponder::ttt {

namespace {
InnerState minus(const InnerState& s, const std::vector<Tensor>& g, CostMeter* meter) {
  std::vector<Tensor> t = s.tensors();
  for (size_t i = 0; i < t.size(); ++i) t[i] = sub(t[i], g[i]);
  if (meter) meter->charge(&UnitCost::update);
  return InnerState::from(t, s.mlp());
}

// Takes the gradient of `loss_fn(state)` with respect to the state by the engine. The loss is
// always recorded; the gradient is recorded only when the outer pass is.
template <class LossFn>
std::vector<Tensor> engine_grad(const InnerState& s, LossFn loss_fn, CostMeter* meter) {
  const bool outer = GradMode::enabled();
  SetGradGuard on(true);
  std::vector<Tensor> t = s.tensors();
  for (Tensor& x : t) x = tracked(x);
  Tensor loss = loss_fn(InnerState::from(t, s.mlp()));
  if (meter) meter->charge(&UnitCost::inner_forward);
  GradOptions go;
  go.create_graph = outer;
  go.retain_graph = true;
  std::vector<Tensor> g = grad({loss}, t, {}, go);
  if (!outer)
    for (Tensor& x : g) x = detach(x);
  if (meter) meter->charge(&UnitCost::inner_grad);
  return g;
}
}  // namespace

InnerState carry_step_closed(const InnerState& s, const Tensor& xk, const Tensor& xv, const Tensor& eta_last,
                             const InnerNorm& n, CostMeter* meter) {
  Tensor g1, x2, g2;
  closed_form_grads(s, xk, sub(xv, xk), n, g1, x2, g2, meter);
  return carried_update(s, eta_last, xk, g1, x2, g2, meter);
}

InnerState carry_step_autograd(const InnerState& s, const Tensor& xk, const Tensor& xv, const Tensor& eta_last,
                               const InnerNorm& n, CostMeter* meter) {
  Tensor target = sub(xv, xk);
  Tensor w = reshape(eta_last, {eta_last.shape()[0], eta_last.shape()[1], -1});  // (B, H, b)
  auto loss = [&](const InnerState& t) { return sum(mul(w, inner_loss_rows(t, xk, target, n))); };
  return minus(s, engine_grad(s, loss, meter), meter);
}

InnerState per_position(const InnerState& s, int64_t b) {
  std::vector<Tensor> t = s.tensors();
  for (Tensor& x : t) {
    Shape sh = x.shape();
    sh.insert(sh.begin() + 2, b);
    x = expand(unsqueeze(x, 2), sh);
  }
  return InnerState::from(t, s.mlp());
}

InnerState position(const InnerState& per_pos, int64_t i) {
  std::vector<Tensor> t = per_pos.tensors();
  for (Tensor& x : t) x = squeeze(slice(x, 2, i, i + 1), 2);
  return InnerState::from(t, per_pos.mlp());
}

InnerState prefix_step(const InnerState& per_pos, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                       const InnerNorm& n5, CostMeter* meter) {
  Tensor xk5 = unsqueeze(xk, 2);                // (B, H, 1, b, f): every position sees all b rows…
  Tensor target5 = unsqueeze(sub(xv, xk), 2);
  Tensor w = tril(eta);                          // …weighted by η[i, j] for j ≤ i only
  auto loss = [&](const InnerState& t) { return sum(mul(w, inner_loss_rows(t, xk5, target5, n5))); };  // (B,H,b,b)
  return minus(per_pos, engine_grad(per_pos, loss, meter), meter);
}

InnerState prefix_step_closed(const InnerState& per_pos, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                              const InnerNorm& n5, CostMeter* meter) {
  // Position i's step is a carry step on the unit's rows with weights η[i, ·] masked to j ≤ i: the rows
  // broadcast over positions (axis 2) and the weights over features.
  return carry_step_closed(per_pos, unsqueeze(xk, 2), unsqueeze(xv, 2), unsqueeze(tril(eta), -1), n5, meter);
}

Tensor prefix_dual(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                   const InnerNorm& n, int steps, InnerState& next, CostMeter* meter) {
  // W_i = W − XKᵀ·A_i and b_i = b − 1ᵀ·A_i, where A_i (b × f) sums position i's weighted per-token gradients
  // over the steps taken. So Z_i = XK·W_i + b_i = Z0 − M·A_i with M = XK·XKᵀ + 1 shared by every position:
  // one (b × b)·(b × b·f) product a step instead of b products with (f × f) weights (docs/ttt.md §3.3). The steps
  // are one op (ttt_prefix_steps: a kernel where the backend has one); A comes back packed, one row per pair j ≤ i.
  const int64_t B = xk.shape()[0], H = xk.shape()[1], b = xk.shape()[2], f = xk.shape()[3];
  const compose::PrefixPairs pp = compose::prefix_pairs(b, xk.device());
  const Tensor xkt = transpose(xk, -1, -2);
  const Tensor z0 = add(matmul(xk, s.W1), s.b1), target = sub(xv, xk);  // (B, H, b, f)
  const Tensor w = compose::at_pairs(eta, pp);  // (B, H, P, 1): η[i, j]
  // −M (not M and a subtraction: the same values, and no negation of (B, H, P, f) gradients in the backward); only
  // steps after the first read it.
  const Tensor neg_m =
      steps > 1 ? affine(matmul(xk, xkt), -1, -1) : Tensor::zeros({B, H, b, b}, xk.dtype(), xk.device());
  if (meter) meter->charge(&UnitCost::inner_forward);
  static constexpr uint64_t UnitCost::*kPhase[] = {&UnitCost::inner_forward, &UnitCost::inner_grad, &UnitCost::update};
  const Tensor a = ttt_prefix_steps(z0, target, neg_m, w, n.gamma, n.beta, steps, n.eps, [&](int p) {
    if (meter) meter->charge(kPhase[p]);
  });  // (B, H, P, f): A_i's row j at pair (j, i)
  // Outputs: XQ_i·W_i + b_i = XQ_i·W + b − Σ_{j ≤ i} (XQ_i·XK_j + 1)·A_i[j].
  const Tensor neg_pq = compose::at_pairs(affine(matmul(xq, xkt), -1, -1), pp);  // (B, H, P, 1)
  const Tensor zq = add(add(matmul(xq, s.W1), s.b1), index_add({B, H, b, f}, 2, pp.i, mul(neg_pq, a)));
  Tensor out = add(xq, inner_ln(zq, n));
  if (meter) meter->charge(&UnitCost::output);
  const Tensor a_last = index_select(a, 2, pp.last);  // (B, H, b, f): the last position's A
  next = InnerState{sub(s.W1, matmul(xkt, a_last)), sub(s.b1, sum(a_last, {-2}, true)), {}, {}};
  if (meter) meter->charge(&UnitCost::update);
  return out;
}

Tensor prefix_output(const InnerState& per_pos, const Tensor& xq, const InnerNorm& n5) {
  Tensor q = unsqueeze(xq, 3);  // (B, H, b, 1, f)
  return squeeze(inner_output(per_pos, q, n5), 3);
}

}  // namespace ponder::ttt
