// CUDA kernels with the semantics of tensor/cpu/cpu_kernels.h (strides, stride-0 broadcasting, int64
// indices with the same out-of-range errors). The CudaBackend in backend.cu forwards to these.
#pragma once
#include "tensor/backend.h"

namespace ponder::cuda {

void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, double p0, double p1, const Tensor& out, const Tensor& x);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void tri(const Tensor& out, const Tensor& x, int64_t k, bool upper);
void reduce(ReduceOp op, const Tensor& out, const Tensor& x);
void cumsum(const Tensor& out, const Tensor& x, int axis, bool reverse);
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
void index_select(const Tensor& out, const Tensor& x, int axis, const Tensor& idx);
void index_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src);
void gather(const Tensor& out, const Tensor& x, int axis, const Tensor& idx);
void scatter_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src);
void one_hot(const Tensor& out, const Tensor& idx);
void rng_uniform(const Tensor& out, uint64_t seed, uint64_t counter, double lo, double hi);
void rng_normal(const Tensor& out, uint64_t seed, uint64_t counter, double mean, double std);
// Fused (tensor/backend.h states each map): layer and RMS norms without parameters and with per-element γ, the
// layer norm's double backward, the inner loss gradient and its VJP (rows.cu); gated products, RoPE and the AdamW
// step (fused.cu).
void layer_norm_rows(const Tensor& out, const Tensor& x, double eps);
void layer_norm_backward(const Tensor& dx, const Tensor& x, const Tensor& v, double eps);
void layer_norm_vjp(const Tensor& dx, const Tensor& dv, const Tensor& x, const Tensor& v, const Tensor& dz,
                    double eps);
void rms_norm_rows(const Tensor& out, const Tensor& x, double eps);
void rms_norm_backward(const Tensor& dx, const Tensor& x, const Tensor& g, double eps);
void layer_norm_affine(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const RowOffsets& ro, double eps);
void layer_norm_affine_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                const Tensor& gamma, const Tensor& g, const RowOffsets& ro, double eps);
void rms_norm_affine(const Tensor& out, const Tensor& x, const Tensor& w, const RowOffsets& ro, double eps);
void rms_norm_affine_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                              const RowOffsets& ro, double eps);
void ln_l2_grad(const Tensor& out, const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                const RowOffsets& ro, double eps);
void ln_l2_grad_vjp(const Tensor& dz, const Tensor& dt, const Tensor& dgamma, const Tensor& dbeta, const Tensor& z,
                    const Tensor& t, const Tensor& gamma, const Tensor& beta, const Tensor& w, const RowOffsets& ro,
                    double eps);
// Causal attention per head on contiguous (G, ·, f) tensors (attention.cu).
void attention(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
               const AttnGeometry& g);
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy, const AttnGeometry& g);
void act_mul(GateAct act, const Tensor& out, const Tensor& a, const Tensor& b);
void act_mul_backward(GateAct act, const Tensor& da, const Tensor& db, const Tensor& a, const Tensor& b,
                      const Tensor& g);
void adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c);
// RoPE's rotation of x (…, N, f) by cs, sn (N, f/2), all contiguous (fused.cu).
void rope(const Tensor& out, const Tensor& x, const Tensor& cs, const Tensor& sn);
// Fused: TTT-Linear's dual form (tensor/backend.h's DualOperands; tensor/cuda/ttt_dual.cu).
void ttt_linear_dual(const Tensor& y, const DualOperands& o);
// dy: the upstream of out, W' and bias' as head views (tensor/backend.h), read where they lie.
void ttt_linear_dual_backward(const std::array<Tensor, 8>& g, const DualOperands& o, const std::array<Tensor, 3>& dy);
// TTT-Linear's dual form over every unit (tensor/backend.h's ScanOperands; ttt_dual.cu): one launch for the forward,
// one per block of units for the backward.
void ttt_linear_scan(const Tensor& Y, const Tensor& S, const ScanOperands& so);
void ttt_linear_scan_backward(const std::array<Tensor, 8>& g, const ScanOperands& so, const Tensor& Y,
                              const Tensor& S, const std::array<Tensor, 3>& dy, int64_t step_dout);
// Fused: prefix mode's K closed-form steps (tensor/backend.h's PrefixOperands; tensor/cuda/ttt_prefix.cu).
void ttt_prefix_steps(const Tensor& out, const Tensor& saved, const PrefixOperands& o);
void ttt_prefix_steps_backward(const std::array<Tensor, 6>& g, const PrefixOperands& o, const Tensor& saved,
                               const Tensor& da);
// Fused: TTT-MLP's dual form (tensor/backend.h's MlpDualOperands; tensor/cuda/ttt_mlp_dual.cu).
void ttt_mlp_dual(const std::array<Tensor, 5>& y, const Tensor& saved, const MlpDualOperands& o);
void ttt_mlp_dual_backward(const std::array<Tensor, 10>& g, const MlpDualOperands& o, const Tensor& saved,
                           const std::array<Tensor, 5>& dy);
// dγ, dβ (each γ's shape, float32/64) from the dual kernels' per-head sums parts (G, 2, P) float64: over heads in
// head order, 16 at a time and then the chunks in order (ttt_dual.cu).
void sum_head_gamma_parts(const Tensor& parts, const Tensor& dgamma, const Tensor& dbeta);
// A scan's backward launch over units hi down to lo (of n): dγ, dβ from their per-head parts (hi − lo + 1, G, 2, P)
// float64, each unit's summed over heads as sum_head_gamma_parts sums them, rounded to dγ's dtype and added from
// unit hi down to lo onto the units' after them (unit n − 1's start the sums); sums (hi − lo + 1, head chunks, 2, P)
// is scratch (ttt_dual.cu).
void sum_unit_gamma_parts(const Tensor& parts, const Tensor& sums, int64_t units, int64_t lo, int64_t hi,
                          const Tensor& dgamma, const Tensor& dbeta);
// Units per launch of a scan's backward: their dγ, dβ parts (G, 2, P doubles each) within 64 MB.
int64_t scan_backward_units_per_launch(int64_t G, int64_t P, int64_t n);
// The head chunks sum_unit_gamma_parts' scratch holds per unit.
int64_t gamma_head_chunks(int64_t G);
// The dual-form kernels' products for this run (cuda_dual_options().unroll): 1, 2, 4, kDualTiles or kDualMma; any
// other value (a mistyped PONDER_CUDA_DUAL_UNROLL) throws, naming op and the variable (ttt_dual.cu).
int dual_unroll(const char* op);
// TTT-MLP's dual form over every unit (tensor/backend.h's MlpScanOperands; ttt_mlp_dual.cu): one launch for the
// forward, one per block of units for the backward. dy[0] is dout units-first (n, G, b, f), dy[1 …] the last
// unit's weights' upstream.
void ttt_mlp_scan(const std::array<Tensor, 5>& Y, const Tensor& S, const MlpScanOperands& so);
void ttt_mlp_scan_backward(const std::array<Tensor, 10>& g, const MlpScanOperands& so, const std::array<Tensor, 5>& Y,
                           const Tensor& S, const std::array<Tensor, 5>& dy);

}  // namespace ponder::cuda
