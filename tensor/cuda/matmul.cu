// GEMM through cuBLAS. cuBLAS is column-major and a row-major matrix read column-major is its
// transpose, so row-major C = A·B is issued as Cᵀ = Bᵀ·Aᵀ: a plain row-major operand goes in as
// CUBLAS_OP_N and a transposed view (column-major storage) as CUBLAS_OP_T, with no copies, as the
// CPU backend does with CBLAS. TF32 follows the handle's math mode (see cuda_set_tf32 in backend.cu).
#include <chrono>
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

double cuda_time_gemm_direct(const Tensor& out, const Tensor& a, const Tensor& b, int reps) {
  for (const Tensor* t : {&out, &a, &b})
    if (t->device() != Device::CUDA || t->dim() != 2 || !t->is_contiguous() || t->dtype() != out.dtype() ||
        !is_float(t->dtype()))
      throw std::invalid_argument("cuda_time_gemm_direct: needs contiguous 2-d float CUDA tensors of one dtype");
  const int m = int(a.shape()[0]), k = int(a.shape()[1]), n = int(b.shape()[1]);
  if (b.shape()[0] != k || out.shape()[0] != m || out.shape()[1] != n)
    throw std::invalid_argument("cuda_time_gemm_direct: shapes do not form (m, k)·(k, n) = (m, n)");
  // Row-major (m, k)·(k, n) is column-major (n, k)·(k, m): the textbook call, no layout logic.
  auto call = [&] {
    if (out.dtype() == DType::F32) {
      const float one = 1, zero = 0;
      cublas_check(cublasSgemm(cuda::blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b.data<float>(), n,
                               a.data<float>(), k, &zero, out.data<float>(), n));
    } else {
      const double one = 1, zero = 0;
      cublas_check(cublasDgemm(cuda::blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b.data<double>(), n,
                               a.data<double>(), k, &zero, out.data<double>(), n));
    }
  };
  call();  // warm-up: cuBLAS picks and loads its kernel on the first call
  cuda_synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) call();
  cuda_synchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

}  // namespace ponder
