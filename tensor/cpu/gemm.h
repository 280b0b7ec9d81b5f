// Row-major GEMM on raw pointers for the kernels that work head by head (tensor/cpu/attention.cpp,
// tensor/cpu/ttt_dual.cpp): one OpenBLAS call, float or double; and the bf16-operand GEMM of mixed precision
// (tensor/cpu/gemm_bf16.cpp).
#pragma once
#include <cblas.h>

#include <cstdint>

namespace ponder::cpu {

// C (m × n, ldc) = alpha·A·B + beta·C; A is m × k (ta: stored k × m), B is k × n (tb: stored n × k).
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float beta, float* c, int64_t ldc, float alpha = 1) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
                 int64_t ldb, double beta, double* c, int64_t ldc, double alpha = 1) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// True where this build and CPU have bf16 dot products (AVX512-BF16) and PONDER_CPU_BF16_GEMM is not 0.
bool bf16_gemm_supported();
// C (m × n, ldc) = bf16(A)·bf16(B) with float32 sums (A m × k, ta: stored k × m; B k × n, tb: stored n × k), each
// element of C summed in an order fixed by k alone. Throws std::logic_error unless bf16_gemm_supported().
void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc);

}  // namespace ponder::cpu
