// CUDA kernels: the functions of tensor/kernels.def in namespace cuda, with the CPU's semantics (strides, stride-0
// broadcasting, int64 indices with the same out-of-range errors), and the helpers the dual-form kernels share. Of the
// fused and scan kernels tensor/cuda/backend.cu registers those CUDA has; the others stay declared and undefined.
#pragma once
#include "tensor/backend.h"

namespace ponder::cuda {

#define PONDER_KERNEL(ret, name, kind, label, params, args) ret name params;
#include "tensor/kernels.def"
// The fused ones CUDA has are defined in rows.cu (the norms with and without γ, the layer norm's double backward,
// the inner loss gradient and its VJP), fused.cu (the gated products, RoPE and the AdamW step), attention.cu,
// ttt_dual.cu (TTT-Linear's dual form, and its scan: one launch for the forward, one per block of units for the
// backward), ttt_prefix.cu (prefix mode's closed-form steps) and ttt_mlp_dual.cu (TTT-MLP's, its scan likewise).

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

}  // namespace ponder::cuda
