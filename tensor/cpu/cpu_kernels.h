// CPU kernels (OpenMP + OpenBLAS). The CpuBackend in backend.cpp forwards to these.
#pragma once
#include "tensor/backend.h"
#include "tensor/cpu/runtime.h"

namespace ponder::cpu {

void copy(const Tensor& dst, const Tensor& src);
void fill(const Tensor& dst, double value);
void unary(UnaryOp op, double p0, double p1, const Tensor& out, const Tensor& x);
void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void tri(const Tensor& out, const Tensor& x, int64_t k, bool upper);
void reduce(ReduceOp op, const Tensor& out, const Tensor& x);
// Σ x² of a contiguous floating tensor, accumulated in double (cpu/reduce.cpp).
double sum_squares(const Tensor& x);
void cumsum(const Tensor& out, const Tensor& x, int axis, bool reverse);
void matmul(const Tensor& out, const Tensor& a, const Tensor& b);
// Triple-loop reference GEMM (…, m, k)·(…, k, n) kept beside the BLAS path to validate it.
void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b);
void index_select(const Tensor& out, const Tensor& x, int axis, const Tensor& idx);
void index_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src);
void gather(const Tensor& out, const Tensor& x, int axis, const Tensor& idx);
void scatter_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src);
void one_hot(const Tensor& out, const Tensor& idx);
// Fused row kernels on contiguous tensors of one shape (definitions in tensor/backend.h; cpu/norm.cpp).
void layer_norm_rows(const Tensor& out, const Tensor& x, double eps);
void layer_norm_backward(const Tensor& out, const Tensor& x, const Tensor& v, double eps);
void layer_norm_vjp(const Tensor& dx, const Tensor& dv, const Tensor& x, const Tensor& v, const Tensor& dz, double eps);
void rms_norm_rows(const Tensor& out, const Tensor& x, double eps);
void rms_norm_backward(const Tensor& out, const Tensor& x, const Tensor& g, double eps);
void layer_norm_affine(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const int64_t* goff, double eps);
void layer_norm_affine_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                const Tensor& gamma, const Tensor& g, const int64_t* goff, double eps);
void rms_norm_affine(const Tensor& out, const Tensor& x, const Tensor& w, const int64_t* goff, double eps);
void rms_norm_affine_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                              const int64_t* goff, double eps);
void ln_l2_grad(const Tensor& out, const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                const int64_t* goff, double eps);
void ln_l2_grad_vjp(const Tensor& dz, const Tensor& dt, const Tensor& dgamma, const Tensor& dbeta, const Tensor& z,
                    const Tensor& t, const Tensor& gamma, const Tensor& beta, const Tensor& w, const int64_t* goff,
                    double eps);
// One AdamW step in place on contiguous p, m, v from contiguous g (cpu/elementwise.cpp).
void adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c);
// Gated products on contiguous tensors of one shape (tensor/backend.h; cpu/elementwise.cpp).
void act_mul(GateAct act, const Tensor& out, const Tensor& a, const Tensor& b);
void rope(const Tensor& out, const Tensor& x, const Tensor& cs, const Tensor& sn);
void act_mul_backward(GateAct act, const Tensor& da, const Tensor& db, const Tensor& a, const Tensor& b, const Tensor& g);
// Causal attention per head on contiguous (G, ·, f) tensors (tensor/backend.h; cpu/attention.cpp).
void attention(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
               const AttnGeometry& g);
void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy, const AttnGeometry& g);
// TTT-Linear's dual form on one mini-batch, head by head (tensor/backend.h; cpu/ttt_dual.cpp).
void ttt_linear_dual(const Tensor& y, const DualOperands& o);
void ttt_linear_dual_backward(const std::array<Tensor, 8>& g, const DualOperands& o, const std::array<Tensor, 3>& dy);
// TTT-Linear's dual form over every unit of each head (ScanOperands; tensor/backend.h states the map).
void ttt_linear_scan(const Tensor& Y, const Tensor& S, const ScanOperands& s);
void ttt_linear_scan_backward(const std::array<Tensor, 8>& g, const ScanOperands& s, const Tensor& Y, const Tensor& S,
                              const std::array<Tensor, 3>& dy, int64_t step_dout);
void ttt_prefix_steps(const Tensor& a, const Tensor& saved, const PrefixOperands& o);
void ttt_prefix_steps_backward(const std::array<Tensor, 6>& g, const PrefixOperands& o, const Tensor& saved,
                               const Tensor& da);
// TTT-MLP's dual form on one mini-batch, head by head (tensor/backend.h; cpu/ttt_mlp_dual.cpp).
void ttt_mlp_dual(const std::array<Tensor, 5>& y, const Tensor& saved, const MlpDualOperands& o);
void ttt_mlp_dual_backward(const std::array<Tensor, 10>& g, const MlpDualOperands& o, const Tensor& saved,
                           const std::array<Tensor, 5>& dy);

}  // namespace ponder::cpu
