// Raw tensor functions: shape checks, output allocation, FLOP accounting and device dispatch.
// Nothing here records autograd history; autograd/ops.h wraps these into differentiable ops.
#pragma once
#include <array>
#include <utility>
#include <vector>

#include "tensor/backend.h"
#include "tensor/flops.h"
#include "tensor/tensor.h"

namespace ponder::raw {

// ---- creation and conversion
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
Tensor to_dtype(const Tensor& t, DType dtype);
Tensor to_device(const Tensor& t, Device device);
// Same, but keeps t's strides and offset by copying its whole storage: a view stays a view (for tests
// that exercise a device's kernels on non-contiguous inputs).
Tensor to_device_keep_layout(const Tensor& t, Device device);
// Moves t to `device` in place: the storage behind t's TensorImpl becomes a contiguous copy on `device`,
// so every handle to this tensor (not views made of it earlier, which keep the old storage) sees it.
// The new storage's version is one past the old one, so a graph that saved t refuses to backward.
// A no-op when t is already on `device`.
void to_device_(const Tensor& t, Device device);

// ---- in-place (each bumps the storage version)
void copy_(const Tensor& dst, const Tensor& src);
void fill_(const Tensor& dst, double value);

// ---- views (share storage; no copy)
Tensor reshape(const Tensor& t, const Shape& shape);  // a view when strides allow, else a copy
Tensor permute(const Tensor& t, const std::vector<int>& perm);
Tensor transpose(const Tensor& t, int a, int b);
Tensor slice(const Tensor& t, int axis, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor unsqueeze(const Tensor& t, int axis);
Tensor squeeze(const Tensor& t, int axis);
// Resolves one -1 in `shape` against numel; throws on mismatch.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op);

// ---- compute
Tensor unary(UnaryOp op, const Tensor& x, double p0 = 0, double p1 = 0);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim);
// Sums t down to `shape` (the inverse of broadcasting `shape` up to t's shape).
Tensor sum_to(const Tensor& t, const Shape& shape);
Tensor cumsum(const Tensor& x, int axis, bool reverse);
Tensor tri(const Tensor& x, int64_t k, bool upper);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor cat(const std::vector<Tensor>& ts, int axis);
// Zero tensor of `shape` with `src` written into the slice [start:end:step) of `axis`.
Tensor pad_slice(const Tensor& src, const Shape& shape, int axis, int64_t start, int64_t step);
Tensor index_select(const Tensor& x, int axis, const Tensor& idx);
Tensor index_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src);
Tensor gather(const Tensor& x, int axis, const Tensor& idx);
Tensor scatter_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src);
Tensor one_hot(const Tensor& idx, int64_t n, DType dtype);

// ---- fused kernels (FusedOp; the maps are stated in tensor/kernels.def). Each checks its operands, makes
// them contiguous (v, g, t, w and dz broadcast to x), allocates the outputs and runs the device's kernel. They
// neither compose nor count FLOPs: the op's definition is its composition in autograd/compose.cpp, and
// autograd/fused.h runs one or the other and counts the composition's FLOPs. Call them only where
// fused_available(op, x) holds; elsewhere the backend throws std::logic_error.
Tensor layer_norm_rows(const Tensor& x, double eps);
Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps);
std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps);  // {dx, dv}
Tensor rms_norm_rows(const Tensor& x, double eps);
Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps);
// γ and β of one shape, broadcast to x along its leading axes; dγ, dβ come back shaped like γ.
Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);
std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps);
Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps);
std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g, double eps);
Tensor ln_l2_grad(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta, double eps);
// {dz, dt (shaped like z), dγ, dβ}
std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps);
// a, b (and g) of one shape; {da, db}.
Tensor act_mul(GateAct act, const Tensor& a, const Tensor& b);
Tensor rope_rotate(const Tensor& x, const Tensor& cs, const Tensor& sn);  // compose::rope_rotate's map
std::pair<Tensor, Tensor> act_mul_backward(GateAct act, const Tensor& a, const Tensor& b, const Tensor& g);
double sum_squares(const Tensor& t);
// p, m, v contiguous, updated in place (versions bumped).
void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c);

// Causal attention: q (…, n, f), k and v (…, T, f) with the same leading axes; {y (…, n, f), lse (…, n)}, and
// the gradients {dq, dk, dv} of y for upstream dy (…, n, f) from y and lse.
std::pair<Tensor, Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo);
std::array<Tensor, 3> attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                                         const Tensor& lse, const Tensor& dy, const AttnGeometry& geo);
// The operand checks attention and its composition share: floating q, k, v on one device and dtype, q
// (…, n, f) and k, v (…, T, f) with equal leading axes, T ≥ 1, and a positive finite scale.
void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo);

// TTT-Linear's dual form on one mini-batch (autograd/compose.h states it): W (…, f, f), bias (…, 1, f), xq, xk,
// xv (…, b, f), eta (…, b, b) with one leading shape, γ, β broadcasting to (…, b, f). Returns the packed
// (…, b + f + 1, f) (the outputs, then the next W, then the next bias) and the intermediates the backward reads
// ((G, kDualSaved(b, f)), tensor/backend.h). The backward takes the upstream of the three pieces, dout (…, b, f),
// dW' (…, f, f) and dbias' (…, 1, f), read where they lie (or of the packed tensor, split into them), and those
// intermediates (undefined: recomputed), and returns {dW, dbias, dxq, dxk, dxv, deta, dγ, dβ}, each shaped like
// its operand.
std::pair<Tensor, Tensor> ttt_linear_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk,
                                          const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                                          const Tensor& beta, double eps);
std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                               const std::array<Tensor, 3>& dy, double eps);
std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                               const Tensor& dy, double eps);
// The same, writing into buffers the caller owns (a scan's per-unit parts: autograd/ops_ttt_scan.cpp): y (…, b + f
// + 1, f) and saved (G, kDualSaved(b, f)); g shaped like W, bias, xq, xk, xv, eta, γ, β. All contiguous.
void ttt_linear_dual_into(const Tensor& y, const Tensor& saved, const Tensor& W, const Tensor& bias, const Tensor& xq,
                          const Tensor& xk, const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                          const Tensor& beta, double eps);
void ttt_linear_dual_backward_into(const std::array<Tensor, 8>& g, const Tensor& W, const Tensor& bias,
                                   const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                   const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                   const std::array<Tensor, 3>& dy, double eps);
// The dual form's operands as the backend's kernels take them (DualOperands, saved left undefined): head views, with
// γ and β as the row kernels take them. Checks them as check_dual does.
DualOperands dual_operands(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                           const Tensor& eta, const Tensor& gamma, const Tensor& beta, double eps);
// TTT-Linear's dual form over the n units (mini-batches of b rows) of a sequence, the state carried from each to the
// next, into buffers the caller owns: exactly what n calls of ttt_linear_dual_into write, unit u's W and bias being
// rows b … b + f of unit u − 1's part of Y (W0, b0 for unit 0). xq, xk, xv (…, n·b, f), eta (…, n, b, b), W0
// (…, f, f) and b0 (…, 1, f) of xq's leading shape, γ and β as for ttt_linear_dual; Y (n, …, b + f + 1, f) and S
// (n, G, kDualSaved(b, f)) contiguous. One call of the backend's scan kernel where it has one (Backend::dual_scan)
// and the operands' units lie a fixed step apart, else the one-unit kernel unit by unit.
void ttt_linear_scan_into(const Tensor& Y, const Tensor& S, const Tensor& W0, const Tensor& b0, const Tensor& xq,
                          const Tensor& xk, const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                          const Tensor& beta, double eps);
// Whether the scans (ttt_linear_scan_into, ttt_mlp_scan_into) and their backwards take the backend's scan kernel
// where it has one (default on;
// PONDER_DUAL_SCAN=0 at start-up turns it off): off, they run the one-unit kernel unit by unit, which gives the same
// bits (for comparisons and `ponder bench train --variants dual-units`).
void set_dual_scan(bool on);
bool dual_scan_enabled();
// Its backward, exactly what ttt_linear_dual_backward_into called on the units in reverse writes (each unit's dW and
// dbias the upstream of the unit before; dγ and dβ each unit's, added from the last unit to the first): g = {dW0,
// db0 shaped like W0, b0; dxq, dxk, dxv (n, …, b, f); deta (n, …, b, b); dγ, dβ shaped like γ, β}, contiguous; Y and
// S the forward's; dy = {dout (…, n·b, f), dW_n (…, f, f), dbias_n (…, 1, f)}.
void ttt_linear_scan_backward_into(const std::array<Tensor, 8>& g, const Tensor& W0, const Tensor& b0,
                                   const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                   const Tensor& gamma, const Tensor& beta, const Tensor& Y, const Tensor& S,
                                   const std::array<Tensor, 3>& dy, double eps);
// x (…, r, c) as a (n0, n1, r, c) view of the same storage: its leading axes merged into at most two with unit
// stride along c, and rows c apart unless rows_apart allows any row stride; a contiguous copy, viewed so, where the
// strides do not allow it. The head views of DualOperands.
Tensor dual_head_view(const Tensor& x, bool rows_apart);
// The checks the dual form's kernel and composition share: floating operands on one device and dtype, shaped as
// above, b ≥ 1.
void check_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                const Tensor& eta);

// Prefix mode's K closed-form inner steps on one unit (autograd/compose.h states them): z0 and t (…, b, f), neg_m
// (…, b, b), w (…, P, 1) with P = b(b + 1)/2, one leading shape; γ, β broadcasting to z0 with one row per head.
// Returns A (…, P, f) and the intermediates the backward reads ((G, kPrefixSaved(b, f, steps)), tensor/backend.h);
// the backward takes them and the upstream da (…, P, f) and returns {dz0, dt, dneg_m, dw, dγ, dβ}, each shaped like
// its operand.
std::pair<Tensor, Tensor> ttt_prefix_steps(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w,
                                           const Tensor& gamma, const Tensor& beta, int steps, double eps);
std::array<Tensor, 6> ttt_prefix_steps_backward(const Tensor& z0, const Tensor& t, const Tensor& neg_m,
                                                const Tensor& w, const Tensor& gamma, const Tensor& beta, int steps,
                                                double eps, const Tensor& saved, const Tensor& da);
// The checks the kernel and the composition share: floating operands on one device and dtype, shaped as above,
// b ≥ 1, steps ≥ 1.
void check_prefix(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w, const Tensor& gamma,
                  int steps);

// TTT-MLP's dual form on one mini-batch (autograd/compose.h states it): W1 (…, f, h), b1 (…, 1, h), W2 (…, h, f),
// b2 (…, 1, f), xq, xk, xv (…, b, f), eta (…, b, b), one leading shape; γ, β broadcasting to xq with one row per
// head. Returns {out, W1', b1', W2', b2'}, each shaped like xq or its weight, and the intermediates the backward
// reads ((G, kMlpDualSaved(b, f, h)), tensor/backend.h); the backward takes them and the five outputs' upstream
// gradients and returns {dW1, db1, dW2, db2, dxq, dxk, dxv, deta, dγ, dβ}, each shaped like its operand.
std::pair<std::array<Tensor, 5>, Tensor> ttt_mlp_dual(const std::array<Tensor, 10>& x, double eps);
std::array<Tensor, 10> ttt_mlp_dual_backward(const std::array<Tensor, 10>& x, double eps, const Tensor& saved,
                                             const std::array<Tensor, 5>& dy);
// The same, writing into buffers the caller owns (a scan's per-unit parts): y and g contiguous, each with its
// operand's element count (y: out, W1', b1', W2', b2'; g: the ten operands'), saved (G, kMlpDualSaved(b, f, h)).
void ttt_mlp_dual_into(const std::array<Tensor, 5>& y, const Tensor& saved, const std::array<Tensor, 10>& x,
                       double eps);
void ttt_mlp_dual_backward_into(const std::array<Tensor, 10>& g, const std::array<Tensor, 10>& x, double eps,
                                const Tensor& saved, const std::array<Tensor, 5>& dy);
// TTT-MLP's operands as the backend's kernels take them: contiguous heads (copies where x's are not), γ and β as the
// row kernels take them. Checks them as check_mlp_dual does.
MlpDualOperands mlp_operands(const std::array<Tensor, 10>& x, double eps);
// TTT-MLP's dual form over the n units of a sequence, the state carried from each to the next, into buffers the
// caller owns: exactly what n calls of ttt_mlp_dual_into write, unit u's weights being what unit u − 1 wrote into
// Y (x's for unit 0). x = {W1 (…, f, h), b1 (…, 1, h), W2 (…, h, f), b2 (…, 1, f) of xq's leading shape, xq, xk, xv
// (…, n·b, f), eta (…, n, b, b), γ, β as for ttt_mlp_dual}; Y = {out (n, …, b, f), W1 (n, …, f, h), b1 (n, …, 1, h),
// W2 (n, …, h, f), b2 (n, …, 1, f)} and S (n, G, kMlpDualSaved(b, f, h)), contiguous.
void ttt_mlp_scan_into(const std::array<Tensor, 5>& Y, const Tensor& S, const std::array<Tensor, 10>& x, double eps);
// Its backward, exactly what ttt_mlp_dual_backward_into called on the units in reverse writes (each unit's weight
// gradients the upstream of the unit before; dγ, dβ each unit's, added from the last unit to the first): g = {dW1,
// db1, dW2, db2 shaped like x's; dxq, dxk, dxv (n, …, b, f); deta (n, …, b, b); dγ, dβ shaped like γ, β},
// contiguous; Y and S the forward's; dy = {dout (…, n·b, f), and the last unit's weights' gradients}.
void ttt_mlp_scan_backward_into(const std::array<Tensor, 10>& g, const std::array<Tensor, 10>& x,
                                const std::array<Tensor, 5>& Y, const Tensor& S, const std::array<Tensor, 5>& dy,
                                double eps);
// The checks the kernel and the composition share (x as above): floating operands on one device and dtype, shaped
// as above, b ≥ 1.
void check_mlp_dual(const std::array<Tensor, 10>& x);

// Whether fused op `op` is on for operand x: fused kernels are on (set_fused_kernels, set_fused_kernel) and x is a
// floating tensor. autograd then records the op as one node, whatever x's backend has a kernel for.
bool fused_enabled(FusedOp op, const Tensor& x);
// Whether fused op `op` runs as its kernel for operand x: fused_enabled(op, x) and x's backend supports() it.
bool fused_available(FusedOp op, const Tensor& x);
// Off: every fused op runs as its composition (tests compare the two). On by default.
void set_fused_kernels(bool on);
bool fused_kernels();
// Off: fused op `op` alone runs as its composition (benchmarks compare one kernel with its composition).
void set_fused_kernel(FusedOp op, bool on);
// On: every backend acts as one without fused kernels (as the CUDA backend is today): fused ops stay one node each,
// whose values come from the composition. Lets CPU tests cover the path a GPU takes. Off by default.
void set_fused_kernels_hidden(bool on);
// The operand checks the fused kernels and their compositions share, so both refuse the same inputs:
// γ, β of one shape, on x's device and dtype, broadcasting to x along its leading axes (last axis D kept);
// a, b of one floating shape; AdamW's p, m, v, g of one shape.
void check_row_params(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& beta);
void check_gate(const char* op, const Tensor& a, const Tensor& b);
// x (…, N, f) with f even and at least two axes, cs and sn (N, f/2), one dtype and device.
void check_rope(const Tensor& x, const Tensor& cs, const Tensor& sn);
void check_adamw(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g);

// Throws std::invalid_argument naming `op` when devices or dtypes of the operands differ.
void check_same(const char* op, const Tensor& a, const Tensor& b);

}  // namespace ponder::raw
