// GEMM through cuBLAS. cuBLAS is column-major and a row-major matrix read column-major is its
// transpose, so row-major C = A·B is issued as Cᵀ = Bᵀ·Aᵀ: a plain row-major operand goes in as
// CUBLAS_OP_N and a transposed view (column-major storage) as CUBLAS_OP_T, with no copies, as the
// CPU backend does with CBLAS. float32 products follow matmul_precision() (tensor/precision.h): TF32 through the
// handle's math mode, bf16 through cublasGemmEx on bf16 copies of the operands with float32 accumulation.
#include <cuda_bf16.h>

#include <stdexcept>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/mat_layout.h"
#include "tensor/precision.h"

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

// `batch` products of p's shape on bf16 operands (the same layout as the float ones), float32 accumulation
// and output: the tensor cores' bf16 path.
void gemm(const GemmPlan& p, const __nv_bfloat16* A, const __nv_bfloat16* B, float* C, int64_t batch) {
  const float one = 1, zero = 0;
  if (batch == 1)
    cublas_check(cublasGemmEx(blas(), op(p.transa), op(p.transb), int(p.m), int(p.n), int(p.k), &one, A, CUDA_R_16BF,
                              int(p.lda), B, CUDA_R_16BF, int(p.ldb), &zero, C, CUDA_R_32F, int(p.ldc),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else
    cublas_check(cublasGemmStridedBatchedEx(blas(), op(p.transa), op(p.transb), int(p.m), int(p.n), int(p.k), &one, A,
                                            CUDA_R_16BF, int(p.lda), p.stride_a, B, CUDA_R_16BF, int(p.ldb), p.stride_b,
                                            &zero, C, CUDA_R_32F, int(p.ldc), p.stride_c, int(batch),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// y[i] = x[i] rounded to bf16, to nearest even (tensor/precision.h's round_mantissa(x, 7) is the reference).
__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  PONDER_GRID_STRIDE(i, n) y[i] = __float2bfloat16_rn(x[i]);
}

// t's storage span (mat_layout.h) as bf16 in `buf` (a byte buffer kept alive by the caller until the GEMM is
// queued: the stream orders its reuse); returns the pointer the GEMM reads.
const __nv_bfloat16* bf16_operand(const Tensor& t, Tensor& buf) {
  const int64_t n = storage_span(t);
  buf = Tensor::empty({(n + 1) / 2}, DType::I32, Device::CUDA);  // two bf16 per 4-byte element
  auto* y = reinterpret_cast<__nv_bfloat16*>(buf.data<int32_t>());
  launch("to_bf16", to_bf16_kernel, n, t.data<float>(), y, n);
  return y;
}

// Issues the products of plan p (uniform batch, or one call of p.inner entries at each listed offset).
template <class TA, class TC>
void gemm_plan(const GemmPlan& p, const TA* A, const TA* B, TC* C) {
  if (p.uniform) {
    gemm(p, A, B, C, p.batch);
    return;
  }
  for (size_t ci = 0; ci < p.offset_a.size(); ++ci)
    gemm(p, A + p.offset_a[ci], B + p.offset_b[ci], C + int64_t(ci) * p.inner * p.stride_c, p.inner);
}

// cuBLAS's math mode follows matmul_precision(): TF32 tensor cores only when asked for (bf16 GEMMs use the
// tensor cores in either mode). Set before each float32 product, only when it changes.
void use_math_mode(MatmulPrecision prec) {
  static cublasMath_t current = CUBLAS_DEFAULT_MATH;
  const cublasMath_t want = prec == MatmulPrecision::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  if (want == current) return;
  cublas_check(cublasSetMathMode(blas(), want));
  current = want;
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
  const MatmulPrecision prec = matmul_precision();
  if (out.dtype() == DType::F32) use_math_mode(prec);
  if (out.dtype() == DType::F32 && prec == MatmulPrecision::BF16) {
    Tensor abuf, bbuf;  // cuBLAS's A is the engine's b (see GemmPlan)
    gemm_plan(p, bf16_operand(b, bbuf), bf16_operand(a, abuf), out.data<float>());
    return;
  }
  PONDER_DISPATCH_FLOAT(out.dtype(), "matmul", [&] {
    gemm_plan(p, b.data<scalar_t>(), a.data<scalar_t>(), out.data<scalar_t>());
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
    cuda::use_math_mode(matmul_precision());  // TF32 as the engine's products have it; bf16 is not offered here
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
