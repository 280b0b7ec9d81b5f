// CPU kernels (OpenMP + OpenBLAS): the functions of tensor/kernels.def in namespace cpu (the CPU has every one but
// the TTT-MLP scan), which tensor/cpu/backend.cpp registers, and the CPU's own extras.
#pragma once
#include "tensor/backend.h"
#include "tensor/cpu/runtime.h"

namespace ponder::cpu {

#define PONDER_KERNEL(ret, name, kind, label, params, args) ret name params;
#include "tensor/kernels.def"

// Triple-loop reference GEMM (…, m, k)·(…, k, n) kept beside the BLAS path to validate it.
void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace ponder::cpu
