// The inner model of a TTT layer, batched over (B, H) and any extra leading axes:
//   f(x) = x + LN(f_res(x)),  f_res = x·W1 + b1 (linear) or gelu(x·W1 + b1)·W2 + b2 (MLP),
// the per-token reconstruction loss ℓ_j = ½‖LN(f_res(XK_j)) − (XV_j − XK_j)‖², the closed-form
// gradient through LN + L2 (docs/ttt.md §1.6), and one mini-batch step in the dual form (docs/ttt.md §1.7–§1.8).
#pragma once
#include "autograd/ops.h"
#include "ttt/schedule.h"

namespace ponder::ttt {

// Attributes the FLOPs done since the previous mark to a phase of a unit's cost (no-op when null).
class CostMeter {
 public:
  explicit CostMeter(UnitCost* cost) : cost_(cost), last_(flops::snapshot().total()) {}
  void charge(uint64_t UnitCost::*phase) {
    uint64_t now = flops::snapshot().total();
    if (cost_) cost_->*phase += now - last_;
    last_ = now;
  }
 private:
  UnitCost* cost_;
  uint64_t last_;
};

// Inner weights of every (batch, head): the TTT layer's hidden state.
struct InnerState {
  Tensor W1;  // (…, f, h)   h = f (linear) or 4f (MLP)
  Tensor b1;  // (…, 1, h)
  Tensor W2;  // (…, h, f)   MLP only
  Tensor b2;  // (…, 1, f)   MLP only
  bool mlp() const { return W2.defined(); }
  std::vector<Tensor> tensors() const;
  static InnerState from(const std::vector<Tensor>& t, bool mlp);
};

struct InnerNorm {
  Tensor gamma, beta;  // broadcastable to (…, rows, f)
  double eps = 1e-6;
};

Tensor inner_ln(const Tensor& z, const InnerNorm& n);                   // LN over the last axis
Tensor f_res(const InnerState& s, const Tensor& x);                      // (…, rows, f) → (…, rows, f)
// ½‖LN(z) − target‖² per row: (…, rows).
Tensor recon_loss_rows(const Tensor& z, const Tensor& target, const InnerNorm& n);
// ℓ per row: (…, rows).
Tensor inner_loss_rows(const InnerState& s, const Tensor& xk, const Tensor& target, const InnerNorm& n);
// ∂ℓ/∂z for ℓ = ½‖LN(z) − target‖², row-wise (docs/ttt.md §1.6), written with differentiable ops.
Tensor ln_l2_grad(const Tensor& z, const Tensor& target, const InnerNorm& n);
// d/dx gelu_tanh(x), with differentiable ops.
Tensor gelu_grad(const Tensor& x);

// t itself when it is recorded, else a detached leaf that requires grad: a tensor grad() can
// differentiate with respect to even when the surrounding pass records nothing.
Tensor tracked(const Tensor& t);

// Queries through weights: out = XQ + LN(f_res(XQ)).
Tensor inner_output(const InnerState& s, const Tensor& xq, const InnerNorm& n);

// One official TTT step on a mini-batch, dual form. xq, xk, xv: (B, H, b, f); eta: (B, H, b, b).
// Returns the outputs (B, H, b, f) and writes the state after the mini-batch into `next`.
// Every unit of xq (…, n·b, f) at one dual step each, the state carried (ttt_linear_scan or ttt_mlp_scan: one node
// for the whole scan where the dual kernels run); eta (…, n, b, b). Appends each unit's UnitCost, its
// FLOPs charged by phase as dual_step charges them (layer, unit and steps left for the caller).
Tensor dual_scan(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                 const InnerNorm& n, InnerState& next, std::vector<UnitCost>& costs);
Tensor dual_step(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                 const InnerNorm& n, InnerState& next, CostMeter* meter = nullptr);

// The same outputs and next state, but with the per-token gradients ∂ℓ/∂Z taken by the engine
// (grad with create_graph) instead of the closed form. Used by the iterative path for K = 1.
Tensor dual_step_autograd(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                          const Tensor& eta, const InnerNorm& n, InnerState& next, CostMeter* meter = nullptr);

}  // namespace ponder::ttt

namespace ponder::ttt {

// η's last row as a column, (B, H, b, b) → (B, H, b, 1): the per-token rates every step after a unit's first (and the
// state a unit hands on) is taken with.
Tensor eta_last_row(const Tensor& eta);

// One more full step of the carry rule, closed form: W ← W − ∇_W Σ_j ηlast_j·ℓ_j(W) with the
// gradient written out (docs/ttt.md §3.2). eta_last: (B, H, b, 1).
InnerState carry_step_closed(const InnerState& s, const Tensor& xk, const Tensor& xv, const Tensor& eta_last,
                             const InnerNorm& n, CostMeter* meter = nullptr);
// The same step with the gradient taken by the engine (grad, create_graph when the outer pass records).
InnerState carry_step_autograd(const InnerState& s, const Tensor& xk, const Tensor& xv, const Tensor& eta_last,
                               const InnerNorm& n, CostMeter* meter = nullptr);

// Prefix mode (docs/ttt.md §3.3): every position i of the unit has its own weights W_i, (B, H, b, …),
// and takes one step on its causal prefix: W_i ← W_i − ∇ Σ_{j≤i} η[i,j]·ℓ_j(W_i). `n5` broadcasts
// against (B, H, b, b, f).
InnerState prefix_step(const InnerState& per_pos, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                       const InnerNorm& n5, CostMeter* meter = nullptr);
// The same step with the gradient in closed form (carry_step_closed on every position at once).
InnerState prefix_step_closed(const InnerState& per_pos, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                              const InnerNorm& n5, CostMeter* meter = nullptr);
// A whole prefix-mode unit of TTT-Linear, K ≥ 1 steps, in the dual form: the outputs and, in `next`, W_{b−1}.
// The same values as per_position + K × prefix_step_closed + prefix_output without the b weight copies.
Tensor prefix_dual(const InnerState& s, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                   const InnerNorm& n, int steps, InnerState& next, CostMeter* meter = nullptr);
// Per-position weights all equal to s: (B, H, …) → (B, H, b, …).
InnerState per_position(const InnerState& s, int64_t b);
// Weights of position i: (B, H, b, …) → (B, H, …).
InnerState position(const InnerState& per_pos, int64_t i);
// Outputs of prefix mode: token i through its own weights. xq (B, H, b, f) → (B, H, b, f).
Tensor prefix_output(const InnerState& per_pos, const Tensor& xq, const InnerNorm& n5);

}  // namespace ponder::ttt
