// GEMM through cuBLAS. cuBLAS is column-major and a row-major matrix read column-major is its
// transpose, so row-major C = A·B is issued as Cᵀ = Bᵀ·Aᵀ: a plain row-major operand goes in as
// CUBLAS_OP_N and a transposed view (column-major storage) as CUBLAS_OP_T, with no copies, as the
// CPU backend does with CBLAS. TF32 follows the handle's math mode (see cuda_set_tf32 in backend.cu).
#include <stdexcept>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/cuda_kernels.h"

namespace ponder::cuda {
namespace {

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// `batch` products of p's shape, A/B/C entries p.stride_* apart (see GemmPlan).
void gemm(const GemmPlan& p, const float* A, const float* B, float* C, int64_t batch) {
  const float one = 1, zero = 0;
  if (batch == 1)
    cublas_check(cublasSgemm(blas(), op(p.transa), op(p.transb), int(p.m), int(p.n), int(p.k), &one, A, int(p.lda), B,
                             int(p.ldb), &zero, C, int(p.ldc)));
  else
    cublas_check(cublasSgemmStridedBatched(blas(), op(p.transa), op(p.transb), int(p.m), int(p.n), int(p.k), &one, A,
                                           int(p.lda), p.stride_a, B, int(p.ldb), p.stride_b, &zero, C, int(p.ldc),
                                           p.stride_c, int(batch)));
}

void gemm(const GemmPlan& p, const double* A, const double* B, double* C, int64_t batch) {
  const double one = 1, zero = 0;
  if (batch == 1)
    cublas_check(cublasDgemm(blas(), op(p.transa), op(p.transb), int(p.m), int(p.n), int(p.k), &one, A, int(p.lda), B,
                             int(p.ldb), &zero, C, int(p.ldc)));
  else
    cublas_check(cublasDgemmStridedBatched(blas(), op(p.transa), op(p.transb), int(p.m), int(p.n), int(p.k), &one, A,
                                           int(p.lda), p.stride_a, B, int(p.ldb), p.stride_b, &zero, C, int(p.ldc),
                                           p.stride_c, int(batch)));
}

}  // namespace

// out (…, m, n) contiguous; a (…, m, k), b (…, k, n) with batch axes broadcast to out's.
void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  if (a.shape().back() == 0) {  // empty inner dimension: the product is all zeros
    fill(out, 0.0);
    return;
  }
  const GemmPlan p = plan_gemm(out, a, b);
  PONDER_DISPATCH_FLOAT(out.dtype(), "matmul", [&] {
    const scalar_t* A = b.data<scalar_t>();  // cuBLAS's A is the engine's b (see GemmPlan)
    const scalar_t* B = a.data<scalar_t>();
    scalar_t* C = out.data<scalar_t>();
    if (p.uniform) {
      gemm(p, A, B, C, p.batch);
      return;
    }
    for (int64_t bi = 0; bi < p.batch; ++bi)
      gemm(p, A + p.offset_a[size_t(bi)], B + p.offset_b[size_t(bi)], C + bi * p.stride_c, 1);
  });
}

}  // namespace ponder::cuda

namespace ponder {

void cuda_gemm_direct(const Tensor& out, const Tensor& a, const Tensor& b) {
  for (const Tensor* t : {&out, &a, &b})
    if (t->device() != Device::CUDA || t->dim() < 2 || t->dim() != out.dim() || !t->is_contiguous() ||
        t->dtype() != out.dtype() || !is_float(t->dtype()))
      throw std::invalid_argument("cuda_gemm_direct: needs contiguous float CUDA tensors of one dtype and rank");
  if (out.numel() == 0 || a.shape().back() == 0) throw std::invalid_argument("cuda_gemm_direct: empty operands");
  const size_t d = out.dim();
  const int64_t m = a.shape()[d - 2], k = a.shape()[d - 1], n = b.shape()[d - 1], batch = out.numel() / (m * n);
  if (b.shape()[d - 2] != k || out.shape()[d - 2] != m || out.shape()[d - 1] != n || a.numel() != batch * m * k ||
      b.numel() != batch * k * n)
    throw std::invalid_argument("cuda_gemm_direct: shapes do not form (…, m, k)·(…, k, n) = (…, m, n)");
  // Row-major (m, k)·(k, n) is column-major (n, k)·(k, m): the textbook call, no layout logic.
  const int M = int(n), N = int(m), K = int(k);
  if (out.dtype() == DType::F32) {
    const float one = 1, zero = 0;
    cublas_check(cublasSgemmStridedBatched(cuda::blas(), CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, b.data<float>(), M,
                                           k * n, a.data<float>(), K, m * k, &zero, out.data<float>(), M, m * n,
                                           int(batch)));
  } else {
    const double one = 1, zero = 0;
    cublas_check(cublasDgemmStridedBatched(cuda::blas(), CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, b.data<double>(), M,
                                           k * n, a.data<double>(), K, m * k, &zero, out.data<double>(), M, m * n,
                                           int(batch)));
  }
}

}  // namespace ponder
