// The definition of every fused op (FusedOp, tensor/kernels.def), written once as a composition of
// differentiable ops. Under no-grad a composition runs the primitive kernels; under grad mode it records them, so
// gradients of any order flow through it with no rule of its own. A backend's fused kernel is an optimisation of
// one of these (tests/test_ops.cpp compares the two in values and FLOPs), and the FLOPs counted for a fused kernel
// are its composition's (autograd/fused.h). Code calls the ops of autograd/ops.h and autograd/fused.h, which pick
// kernel or composition; only those and the tests call these directly.
//
// Rows are the last axis (D). Means are over it. x̂ = (x − mean x)·s with s = 1/sqrt(mean((x − mean x)²) + eps);
// y = x·r with r = 1/sqrt(mean(x²) + eps). v, g, dz, t and w broadcast to x (z); γ, β and the RMS weight
// broadcast to x along its leading axes, and their gradients are summed back to their own shape.
#pragma once
#include <array>
#include <functional>
#include <utility>

#include "autograd/ops.h"

namespace ponder::compose {

Tensor layer_norm_rows(const Tensor& x, double eps);                       // x̂
Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps);  // s·(v − mean v − x̂·mean(v⊙x̂))
// The VJP of (x, v) ↦ layer_norm_backward(x, v) for upstream dz: {dx, dv}, both shaped like x.
std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps);
Tensor rms_norm_rows(const Tensor& x, double eps);                         // y
Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps);    // r·(g − y·mean(g⊙y))
Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);  // γ⊙x̂ + β
// Its gradients for upstream g: {dx, dγ, dβ}.
std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps);
Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps);  // w⊙y
std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g,
                                               double eps);  // {dx, dw}
// ∂/∂z of ½‖γ⊙x̂ + β − t‖² row by row (x̂ of z): layer_norm_backward(z, (γ⊙x̂ + β − t)⊙γ) (docs/ttt.md §1.6).
Tensor ln_l2_grad(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta, double eps);
// Its VJP for upstream w: {dz, dt (shaped like z), dγ, dβ} (docs/ttt.md §2.2).
std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps);
Tensor act_mul(GateAct act, const Tensor& a, const Tensor& b);  // act(a)⊙b
// Rotary position embedding: x (…, N, f), cs, sn (N, f/2); pair i of row t turned by the angle whose cosine and
// sine are cs[t, i], sn[t, i] (tensor/kernels.def states the map).
Tensor rope_rotate(const Tensor& x, const Tensor& cs, const Tensor& sn);
// {da, db} = {(g⊙b)⊙act'(a), g⊙act(a)}
std::pair<Tensor, Tensor> act_mul_backward(GateAct act, const Tensor& a, const Tensor& b, const Tensor& g);
// Σ t², t converted to float64 first: a float64 scalar on t's device, and that scalar read to the host.
Tensor sum_squares_scalar(const Tensor& t);
double sum_squares(const Tensor& t);
// One AdamW step on p, m, v in place (AdamWCoeffs in tensor/backend.h states the rule, in this order of
// float operations, which the fused kernels follow bit for bit).
void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c);
// Causal softmax attention per head (AttnGeometry in tensor/backend.h says which keys each query sees):
// softmax(scale·q·kᵀ, hidden keys at −1e9)·v, q (…, n, f), k and v (…, T, f); and its gradients {dq, dk, dv}
// for upstream dy (the softmax's VJP: dS = scale·P⊙(dP − Σ dP⊙P) with dP = dy·vᵀ).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo);
std::array<Tensor, 3> attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dy,
                                         const AttnGeometry& geo);
// TTT-Linear's dual form on one mini-batch of b tokens, per head (docs/ttt.md §1.7–§1.8). W (…, f, f), bias
// (…, 1, f), xq, xk, xv (…, b, f), eta (…, b, b) with the same leading axes; γ, β broadcast to (…, b, f). With
// Z = xk·W + bias, G = ln_l2_grad(Z, xv − xk) (each token's inner gradient at W), E = tril(eta) and
// A = E⊙(xq·xkᵀ):
//   out = xq + LN_{γ,β}(xq·W − A·G + bias − E·G),  W' = W − (ηl⊙xk)ᵀ·G,  bias' = bias − Σ_j ηl_j·G_j,
// ηl (…, b, 1) the last row of eta. Returns {out, W', bias'}. mark(p), when given, is called at the end of each
// phase of the work: 0 the inner forward (Z, and the target xv − xk), 1 the inner gradient G, 2 the output,
// 3 the update; a unit's cost is split by these (ttt/schedule.h).
std::array<Tensor, 3> ttt_linear_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk,
                                      const Tensor& xv, const Tensor& eta, const Tensor& gamma, const Tensor& beta,
                                      double eps, const std::function<void(int)>& mark = {});
// Its gradients for upstream {dout, dW', dbias'}: {dW, dbias, dxq, dxk, dxv, deta, dγ, dβ}, each shaped like its
// input (deta zero above the diagonal: the map reads only E and the last row). It first recomputes the forward's
// intermediates (Z, G, S, zb), then calls recomputed(): the kernel saves them instead, so its FLOP rule counts what
// comes after (autograd/fused.cpp).
std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& dout,
                                               const Tensor& dW, const Tensor& dbias, double eps,
                                               const std::function<void()>& recomputed = {});

// TTT-MLP's dual form on one mini-batch (docs/ttt.md §1.7–§1.8), x = {W1 (…, f, h), b1 (…, 1, h), W2 (…, h, f),
// b2 (…, 1, f), xq, xk, xv (…, b, f), eta (…, b, b), γ, β}. With Z1 = xk·W1 + b1, X2 = gelu(Z1), Z2 = X2·W2 + b2, the
// inner gradients are G2 = ln_l2_grad(Z2, xv − xk) and G1 = (G2·W2ᵀ)⊙gelu'(Z1); with E = tril(η), the queries see
// Zb1 = xq·W1 + b1 − (E⊙(xq·xkᵀ))·G1 − E·G1 and Zb2 likewise from gelu(Zb1), X2, W2, b2 and G2, and out = xq +
// LN(Zb2). Returns {out, W1', b1', W2', b2'}, the state after the mini-batch (W' = W − (ηl⊙x)ᵀ·G per layer). mark
// as for ttt_linear_dual.
std::array<Tensor, 5> ttt_mlp_dual(const std::array<Tensor, 10>& x, double eps,
                                   const std::function<void(int)>& mark = {});

// The causal pairs (j, i), j ≤ i, of a unit of b positions in j-major order: prefix mode's layout, one row per pair
// (position i's gradient row j); only these are non-zero, η being causal. On `device`, as the index ops take them.
struct PrefixPairs {
  Tensor flat;  // (P): j·b + i, a row of the (b·b) grid of all pairs
  Tensor j, i;  // (P): each pair's j and i
  Tensor last;  // (b): the pairs of the last position (j, b − 1), in the order of j
};
PrefixPairs prefix_pairs(int64_t b, Device device);
// x (…, b(i), b(j)) read at the pairs: x[i, j] for j ≤ i, as (…, P, 1).
Tensor at_pairs(const Tensor& x, const PrefixPairs& pp);

// Prefix mode's K closed-form inner steps on one unit of TTT-Linear (docs/ttt.md §3.3). Position i's weights after
// its steps are W_i = W − XKᵀ·A_i and bias_i = bias − 1ᵀ·A_i, so its Z at step k is Z0 − M·A_i with Z0 = XK·W +
// bias and M = XK·XKᵀ + 1 shared by every position. z0, t (…, b, f) are Z0 and the targets, neg_m (…, b, b) is −M,
// w (…, P, 1) is η[i, j] at the pairs (at_pairs); γ, β of the inner layer norm, one row per head. Returns A
// (…, P, f), row (j, i) of position i's A_i: the first step adds η[i, j]·∇ℓ_j(Z0_j); each later one spreads A to
// the (b, b·f) grid, takes Z at the pairs from one product with −M and adds η[i, j]·∇ℓ(Z_{j,i}). mark(p), when
// given, is called after each step's inner forward (0), its inner gradients (1) and its update of A (2).
Tensor ttt_prefix_steps(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w, const Tensor& gamma,
                        const Tensor& beta, int steps, double eps, const std::function<void(int)>& mark = {});

}  // namespace ponder::compose
