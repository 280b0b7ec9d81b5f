// One home per fused op (FusedOp, tensor/kernels.def). Each fused op is defined once, as a composition of
// differentiable ops (autograd/compose.h). Where the device's backend supports() the op and no graph needs the
// kernel's history, the op runs as that backend's one kernel (tensor/kernels.h) instead; either way the FLOPs
// counted are the composition's, by a rule this file derives from the composition itself.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "tensor/backend.h"
#include "tensor/flops.h"
#include "tensor/tensor.h"

namespace ponder {
namespace fused {

// Whether `op` runs as its kernel for operand x: raw::fused_available(op, x) and this thread is not deriving a
// FLOP rule (which must see the composition).
bool use(FusedOp op, const Tensor& x);

// Whether `op` is recorded as one node for operand x: raw::fused_enabled(op, x) and this thread is not deriving a
// rule. The node's values come from x's backend's kernel where it has one, else from the composition run as one
// step (forward() below), so the op's FLOPs and its backward rule are the same on every device; a backend
// without the kernel costs only speed. With the op switched off (raw::set_fused_kernel) the composition is
// recorded op by op instead: the reference the kernels are tested against.
bool node(FusedOp op, const Tensor& x);

// A fused node's values: kernel() where x's backend has the kernel (use()), else composition() run without
// recording a graph and without counting FLOPs (the node counts the op's rule, derived from that composition).
template <class Kernel, class Composition>
auto forward(FusedOp op, const Tensor& x, Kernel kernel, Composition composition) -> decltype(kernel()) {
  if (use(op, x)) return kernel();
  const NoGradGuard no_graph;
  const FlopIsolate uncounted;
  return composition();
}

// The sizes a fused op's FLOPs depend on: {R, D} (rows and the row length) for the row ops, act_mul, the squared
// norm and AdamW; {G, n, T, f} (heads × batch, queries, keys, head width) for attention; {G, b, f} (heads × batch,
// mini-batch, head width) for the TTT dual form.
using Sizes = std::vector<int64_t>;
Sizes rows_of(const Tensor& x);  // {R, D} of x: D its last axis (1 for a scalar), R = numel / D
Sizes attention_sizes(const Tensor& q, const Tensor& k);  // {G, n, T, f} of q (…, n, f) and k (…, T, f)
Sizes dual_sizes(const Tensor& xq);  // {G, b, f} of the TTT dual form's queries (…, b, f)

// The composition's FLOPs as a polynomial in the op's sizes, per category, of degree at most deg[v] in size v
// (1 for every op but the TTT dual form's, which is quadratic in its mini-batch and head width): coef[m] holds
// the coefficient of the monomial whose exponents are the mixed-radix digits of m (digit v in 0 … deg[v], the
// first size varying fastest; for a multilinear op, m is the bit mask of the sizes in the monomial).
struct Rule {
  std::vector<int> deg;
  std::vector<std::array<int64_t, size_t(FlopCat::Count)>> coef;
  int64_t at(FlopCat c, const Sizes& s) const;
  // The coefficient of the product of the sizes listed (indices into Sizes, repeated for a power):
  // term(Elementwise, {0, 1}) is a row op's element-wise FLOPs per element, term(Elementwise, {0}) its FLOPs per
  // row, term(Matmul, {0, 1, 2, 2}) the G·b·f² term of the TTT dual form.
  int64_t term(FlopCat c, std::initializer_list<int> sizes) const;
};
// Derived once per process by running the composition in float64 on the grid where size v takes the values
// 1 … deg[v] + 1 and interpolating, then checked at sizes off the grid; a composition whose count is not of this
// form, or that counts nothing, is a std::logic_error naming the op. `bcast`: the per-row parameters (γ, β, w)
// are smaller than x, so their gradients are sums over rows. `variant` tells apart ops whose composition depends
// on a setting (act_mul's activation: int(GateAct); the TTT dual form's phase).
// The reference stays valid for the process (rules are kept, never replaced).
const Rule& rule(FusedOp op, bool bcast = false, int variant = 0);
// Adds rule(op, bcast, variant) at `sizes` to this thread's FLOP counters.
void count(FusedOp op, const Sizes& sizes, bool bcast = false, int variant = 0);
// Prefix mode's closed-form steps (ttt_prefix_steps): the FLOPs of compose::ttt_prefix_steps at the op's shapes per
// category, its forward split by phase (0 inner forward, 1 inner gradients, 2 updates) and its backward with every
// input needing a gradient. Measured once per shape by running the composition in float64 with nothing counted or
// recorded outside (its FLOPs depend on the shapes only): they enter through the pair count b(b + 1)/2 and the steps,
// which the polynomial rules above do not take.
using Counts = std::array<int64_t, size_t(FlopCat::Count)>;
struct PhasedCounts {
  std::array<Counts, 4> forward{};  // per phase mark (prefix steps use the first three)
  Counts backward{};
};
using PrefixCounts = PhasedCounts;
PrefixCounts prefix_counts(const Shape& z0, const Shape& gamma, int steps);
// TTT-MLP's dual form (ttt_mlp_dual) likewise, per shape of its ten operands: its forward split at the phases of
// compose::ttt_mlp_dual (0 inner forward, 1 inner gradients, 2 output, 3 update), its backward with every operand
// needing a gradient. Its count depends on b, f and h through terms (b²·h, b·f·h, …) no single rule above spans.
PhasedCounts mlp_dual_counts(const std::vector<Shape>& shapes);
// Adds c to this thread's FLOP counters.
void add_counts(const Counts& c);
// A row op's `bcast`: its per-row parameter is broadcast over x's rows (its gradient is then a sum over them).
inline bool broadcast_param(const Tensor& param, const Tensor& x) { return param.shape() != x.shape(); }

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
// {dW, dbias, dxq, dxk, dxv, deta, dγ, dβ} of ttt_linear_dual (autograd/ops.h) for the upstream of its three
// results, dy = {dout (…, b, f), dW' (…, f, f), dbias' (…, 1, f)}, W and bias already of xq's leading shape.
// saved: the forward kernel's intermediates (raw::ttt_linear_dual), or undefined.
std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                               const std::array<Tensor, 3>& dy, double eps);

}  // namespace ponder
