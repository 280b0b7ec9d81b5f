// Index kernels on contiguous tensors with int64 indices. Adds that may hit the same slot run in a
// fixed sequential order per slot, so scatter/index adds are deterministic.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"

namespace ponder::cpu {
namespace {

void check_index(int64_t v, int64_t n, const char* op) {
  if (v < 0 || v >= n)
    throw std::out_of_range(std::string(op) + ": index " + std::to_string(v) + " out of range [0, " +
                            std::to_string(n) + ")");
}

}  // namespace

void index_select(const Tensor& out, const Tensor& x, int axis, const Tensor& idx) {
  int64_t outer, len, inner;
  split_dims(x.shape(), axis, outer, len, inner);
  const int64_t ni = idx.numel();
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t j = 0; j < ni; ++j) check_index(pi[j], len, "index_select");
  const size_t es = dtype_size(x.dtype());
  PONDER_DISPATCH_ALL(x.dtype(), "index_select", [&] {
    const scalar_t* src = x.data<scalar_t>();
    scalar_t* dst = out.data<scalar_t>();
_Pragma("omp parallel for schedule(static) if (out.numel() >= kParallelMin)")
    for (int64_t oj = 0; oj < outer * ni; ++oj) {
      int64_t o = oj / ni, j = oj % ni;
      std::memcpy(dst + oj * inner, src + (o * len + pi[j]) * inner, size_t(inner) * es);
    }
  });
}

void index_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src) {
  int64_t outer, len, inner;
  split_dims(out.shape(), axis, outer, len, inner);
  const int64_t ni = idx.numel();
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t j = 0; j < ni; ++j) check_index(pi[j], len, "index_add");
  PONDER_DISPATCH_ALL(out.dtype(), "index_add", [&] {
    const scalar_t* s = src.data<scalar_t>();
    scalar_t* y = out.data<scalar_t>();
    // Blocks of a row's elements, each adding the source rows in index order: the same sum for every element
    // whatever the thread count, with whole row segments read and written at a time.
    constexpr int64_t kBlock = 64;
    const int64_t nb = (inner + kBlock - 1) / kBlock;
_Pragma("omp parallel for schedule(static) if (src.numel() >= kParallelMin)")
    for (int64_t ob = 0; ob < outer * nb; ++ob) {
      const int64_t o = ob / nb, c0 = (ob % nb) * kBlock, c1 = std::min(inner, c0 + kBlock);
      for (int64_t j = 0; j < ni; ++j) {
        scalar_t* yr = y + (o * len + pi[j]) * inner;
        const scalar_t* sr = s + (o * ni + j) * inner;
        for (int64_t c = c0; c < c1; ++c) yr[c] += sr[c];
      }
    }
  });
}

void gather(const Tensor& out, const Tensor& x, int axis, const Tensor& idx) {
  // out and idx share a shape; x may differ from it only along `axis`.
  int64_t outer, len, inner;
  split_dims(idx.shape(), axis, outer, len, inner);
  const int64_t xlen = x.shape()[size_t(axis)];
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t j = 0; j < idx.numel(); ++j) check_index(pi[j], xlen, "gather");
  PONDER_DISPATCH_ALL(x.dtype(), "gather", [&] {
    const scalar_t* px = x.data<scalar_t>();
    scalar_t* py = out.data<scalar_t>();
_Pragma("omp parallel for schedule(static) if (out.numel() >= kParallelMin)")
    for (int64_t e = 0; e < out.numel(); ++e) {
      int64_t i = e % inner, o = e / (inner * len);
      py[e] = px[(o * xlen + pi[e]) * inner + i];
    }
  });
}

void scatter_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src) {
  int64_t outer, len, inner;
  split_dims(idx.shape(), axis, outer, len, inner);
  const int64_t olen = out.shape()[size_t(axis)];
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t j = 0; j < idx.numel(); ++j) check_index(pi[j], olen, "scatter_add");
  PONDER_DISPATCH_ALL(out.dtype(), "scatter_add", [&] {
    const scalar_t* ps = src.data<scalar_t>();
    scalar_t* py = out.data<scalar_t>();
_Pragma("omp parallel for schedule(static) if (src.numel() >= kParallelMin)")
    for (int64_t oi = 0; oi < outer * inner; ++oi) {  // one line along `axis` per iteration
      int64_t o = oi / inner, i = oi % inner;
      for (int64_t j = 0; j < len; ++j) {
        int64_t e = (o * len + j) * inner + i;
        py[(o * olen + pi[e]) * inner + i] += ps[e];
      }
    }
  });
}

void one_hot(const Tensor& out, const Tensor& idx) {
  const int64_t n = out.shape().back();
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t j = 0; j < idx.numel(); ++j) check_index(pi[j], n, "one_hot");
  fill(out, 0.0);
  PONDER_DISPATCH_ALL(out.dtype(), "one_hot", [&] {
    scalar_t* py = out.data<scalar_t>();
    for (int64_t j = 0; j < idx.numel(); ++j) py[j * n + pi[j]] = scalar_t(1);
  });
}

}  // namespace ponder::cpu
