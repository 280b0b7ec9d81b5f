// One home per fused op (PONDER_FUSED_OPS, tensor/backend.h). Each fused op is defined once, as a composition of
// differentiable ops (autograd/compose.h). Where the device's backend supports() the op and no graph needs the
// kernel's history, the op runs as that backend's one kernel (tensor/kernels.h) instead; either way the FLOPs
// counted are the composition's, by a rule this file derives from the composition itself.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "tensor/backend.h"
#include "tensor/flops.h"
#include "tensor/tensor.h"

namespace ponder {
namespace fused {

// Whether `op` runs as its kernel for operand x: raw::fused_available(op, x) and this thread is not deriving a
// FLOP rule (which must see the composition).
bool use(FusedOp op, const Tensor& x);

// The sizes a fused op's FLOPs depend on: {R, D} (rows and the row length) for the row ops, act_mul, the squared
// norm and AdamW; {G, n, T, f} (heads × batch, queries, keys, head width) for attention.
using Sizes = std::vector<int64_t>;
Sizes rows_of(const Tensor& x);  // {R, D} of x: D its last axis (1 for a scalar), R = numel / D
Sizes attention_sizes(const Tensor& q, const Tensor& k);  // {G, n, T, f} of q (…, n, f) and k (…, T, f)

// The composition's FLOPs as a polynomial in the op's sizes that has degree at most one in each (multilinear),
// per category: coef[m] holds the coefficient of the product of the sizes whose bits are set in m.
struct Rule {
  std::vector<std::array<int64_t, size_t(FlopCat::Count)>> coef;  // 2^(number of sizes) monomials
  int64_t at(FlopCat c, const Sizes& s) const;
  // The coefficient of the product of the sizes listed (indices into Sizes): term(Elementwise, {0, 1}) is a
  // row op's element-wise FLOPs per element, term(Elementwise, {0}) its FLOPs per row.
  int64_t term(FlopCat c, std::initializer_list<int> sizes) const;
};
// Derived once per process by running the composition in float64 on the probes where every size is 1 or 2
// and interpolating, then checked where the sizes are 3, 4, 5, …; a composition whose count is not of this form,
// or that counts nothing, is a std::logic_error naming the op. `bcast`: the per-row parameters (γ, β, w) are
// smaller than x, so their gradients are sums over rows. `variant` tells apart ops whose composition depends on
// a setting (act_mul's activation: int(GateAct)).
Rule rule(FusedOp op, bool bcast = false, int variant = 0);
// Adds rule(op, bcast, variant) at `sizes` to this thread's FLOP counters.
void count(FusedOp op, const Sizes& sizes, bool bcast = false, int variant = 0);

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
// {dq, dk, dv} of attention(q, k, v, geo) for upstream dy; y and lse are the forward kernel's (the composition
// recomputes what it needs and ignores them).
std::array<Tensor, 3> attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                                         const Tensor& lse, const Tensor& dy, const AttnGeometry& geo);

}  // namespace ponder
