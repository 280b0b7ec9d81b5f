// GEMM through OpenBLAS: no copies for transposed views (a view whose last two axes are swapped is
// passed as a transposed operand). Batches of small products run in parallel over the batch with
// single-threaded BLAS calls; large products use BLAS's own threads.
#include <cblas.h>
#include <omp.h>

#include <stdexcept>
#include <type_traits>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/loop.h"
#include "tensor/mat_layout.h"
#include "tensor/precision.h"

namespace ponder::cpu {
namespace {

constexpr int64_t kParallelGemmMin = int64_t(1) << 20;  // multiply-adds in a batch worth two threads

MatLayout layout_of(const Tensor& t) {
  if (auto l = blas_layout(t)) return *l;
  throw std::logic_error("cpu::matmul: operand is not BLAS-compatible (caller must pass a contiguous copy)");
}

// C (m × n) = A·B through gemm.h, each operand with its stored layout.
template <class T>
void gemm_layout(MatLayout la, MatLayout lb, int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  cpu::gemm(la.trans, lb.trans, m, n, k, a, la.ld, b, lb.ld, T(0), c, n);
}

// Offsets of batch element `bi` in a and b (batch axes broadcast with stride 0).
void batch_offsets(int64_t bi, const Tensor& out, const Shape& sa, const Shape& sb, int64_t& oa, int64_t& ob) {
  oa = ob = 0;
  for (int d = int(out.dim()) - 3; d >= 0; --d) {
    int64_t i = bi % out.shape()[size_t(d)];
    bi /= out.shape()[size_t(d)];
    oa += i * sa[size_t(d)];
    ob += i * sb[size_t(d)];
  }
}

// Whether a bf16 product of this size goes to gemm_bf16 rather than to sgemm on rounded copies (the same rounding
// and float32 sums, in another order): below about 128³ multiply-adds its packing and thread start cost more than
// its faster instruction saves (`ponder bench matmul --precision bf16`).
bool bf16_gemm_pays(int64_t m, int64_t n, int64_t k) {
  return bf16_gemm_supported() && m >= 16 && n >= 16 && k >= 16 && m * n * k >= (int64_t(1) << 21);
}

}  // namespace

const char* matmul_path(MatmulPrecision p) {
  if (p == MatmulPrecision::F32) return "sgemm";
  if (p == MatmulPrecision::BF16 && bf16_gemm_supported())
    return "bf16 dot products (AVX512-BF16) from 128^3 multiply-adds, sgemm on rounded copies below";
  return "sgemm on rounded copies (a numerical reference, slower than f32)";
}

namespace {

// Reduced-precision products (tensor/precision.h): t's storage span (mat_layout.h) with every element rounded to `bits`
// mantissa bits, in `buf`; returns the pointer the GEMM reads instead of t's data.
const float* rounded_operand(const Tensor& t, int bits, std::vector<float>& buf) {
  const float* p = t.data<float>();
  buf.resize(size_t(storage_span(t)));
#pragma omp parallel for schedule(static) if (buf.size() >= (size_t(1) << 16))
  for (int64_t i = 0; i < int64_t(buf.size()); ++i) buf[size_t(i)] = round_mantissa(p[i], bits);
  return buf.data();
}

template <class T>
void matmul_t(const Tensor& out, const Tensor& a, const Tensor& b) {
  const size_t d = out.dim();
  const int64_t m = out.shape()[d - 2], n = out.shape()[d - 1], k = a.shape()[d - 1];
  const int64_t batch = out.numel() / std::max<int64_t>(m * n, 1);
  if (out.numel() == 0) return;
  if (k == 0) { fill(out, 0.0); return; }
  const MatLayout la = layout_of(a), lb = layout_of(b);
  const Shape sa = broadcast_strides(a, out.shape()), sb = broadcast_strides(b, out.shape());
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* pc = out.data<T>();
  // Small products: one BLAS call per thread (OpenBLAS runs single-threaded inside a parallel region),
  // once the batch holds enough work to pay for waking the threads.
  const bool par_batch = batch > 1 && m * n * k <= 96 * 96 * 96 && batch * m * n * k >= kParallelGemmMin;
  std::vector<float> ra, rb;  // rounded operands when products run below float32 precision
  bool bf16_dot = false;       // bf16 dot products instead, rounding the operands as they are packed
  if constexpr (std::is_same_v<T, float>)
    if (const int bits = mantissa_bits(matmul_precision()); bits < 23) {
      bf16_dot = bits == 7 && !par_batch && bf16_gemm_pays(m, n, k);
      if (!bf16_dot) {
        pa = rounded_operand(a, bits, ra);
        pb = rounded_operand(b, bits, rb);
      }
    }
  auto one = [&](int64_t bi) {
    int64_t oa, ob;
    batch_offsets(bi, out, sa, sb, oa, ob);
    if constexpr (std::is_same_v<T, float>)
      if (bf16_dot) return gemm_bf16(la.trans, lb.trans, m, n, k, pa + oa, la.ld, pb + ob, lb.ld, pc + bi * m * n, n);
    gemm_layout(la, lb, m, n, k, pa + oa, pb + ob, pc + bi * m * n);
  };
  if (!par_batch) {
    for (int64_t bi = 0; bi < batch; ++bi) one(bi);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t bi = 0; bi < batch; ++bi) one(bi);
}

template <class T>
void matmul_naive_t(const Tensor& out, const Tensor& a, const Tensor& b) {
  const size_t d = out.dim();
  const int64_t m = out.shape()[d - 2], n = out.shape()[d - 1], k = a.shape()[d - 1];
  const int64_t batch = out.numel() / std::max<int64_t>(m * n, 1);
  const Shape sa = broadcast_strides(a, out.shape()), sb = broadcast_strides(b, out.shape());
  const int64_t ar = a.strides()[d - 2], ac = a.strides()[d - 1], br = b.strides()[d - 2], bc = b.strides()[d - 1];
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t oa, ob;
    batch_offsets(bi, out, sa, sb, oa, ob);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += double(a.data<T>()[oa + i * ar + p * ac]) * double(b.data<T>()[ob + p * br + j * bc]);
        out.data<T>()[bi * m * n + i * n + j] = T(acc);
      }
  }
}

}  // namespace

void matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "matmul", [&] { matmul_t<scalar_t>(out, a, b); });
}

void matmul_naive(const Tensor& out, const Tensor& a, const Tensor& b) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "matmul_naive", [&] { matmul_naive_t<scalar_t>(out, a, b); });
}

void set_num_threads(int n) {
  if (n < 1) throw std::invalid_argument("set_num_threads: need at least 1 thread, got " + std::to_string(n));
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

}  // namespace ponder::cpu
