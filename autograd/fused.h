// One home per fused op (PONDER_FUSED_OPS, tensor/backend.h). Each fused op is defined once, as a composition of
// differentiable ops (autograd/compose.h). Where the device's backend supports() the op and no graph needs the
// kernel's history, the op runs as that backend's one kernel (tensor/kernels.h) instead; either way the FLOPs
// counted are the composition's, by a rule this file derives from the composition itself.
#pragma once
#include <array>
#include <cstdint>
#include <utility>

#include "tensor/backend.h"
#include "tensor/flops.h"
#include "tensor/tensor.h"

namespace ponder {
namespace fused {

// Whether `op` runs as its kernel for operand x: raw::fused_available(op, x) and this thread is not deriving a
// FLOP rule (which must see the composition).
bool use(FusedOp op, const Tensor& x);

// The composition's FLOPs on an operand x of n elements in R rows (R = n / x's last axis), per category:
// per_elem·n + per_row·R, plus per_elem_bcast·n when the op's per-row parameters (γ, β, w) are smaller than x
// and their gradients are sums over rows.
struct Rule {
  std::array<int64_t, size_t(FlopCat::Count)> per_elem{}, per_row{}, per_elem_bcast{};
};
// Derived once per process by running the composition on small probes in float64 and solving for the three
// coefficients, then checked on a larger probe; a composition whose count is not of this form is a
// std::logic_error naming the op. `variant` tells apart ops whose composition depends on a setting
// (act_mul's activation: int(GateAct)).
Rule rule(FusedOp op, int variant = 0);
// Adds rule(op, variant) on x to this thread's FLOP counters; params_broadcast as in Rule.
void count(FusedOp op, const Tensor& x, bool params_broadcast = false, int variant = 0);

}  // namespace fused

// The fused ops that have no node of their own: gradients computed inside backward rules, and the optimiser's
// two. Each runs its kernel when fused::use() holds and no graph is being recorded, else its composition
// (recorded when grad mode is on: so gradients of these gradients work); FLOPs are counted either way.
std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps);
std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps);
std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g, double eps);
std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps);
std::pair<Tensor, Tensor> act_mul_backward(GateAct act, const Tensor& a, const Tensor& b, const Tensor& g);
double sum_squares(const Tensor& t);
void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c);

}  // namespace ponder
