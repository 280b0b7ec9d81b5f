// Index kernels on contiguous tensors with int64 indices, mirroring tensor/cpu/index.cpp. Adds that
// may hit the same slot are owned by one thread each (a thread walks one line in index order), so
// index_add and scatter_add are deterministic without atomics. Bounds are checked on the device and reported at
// the next read to the host (check_indices).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/transfer.h"

namespace ponder::cuda {
namespace {

// word ← min(word, base + j) over positions j whose index lies outside [0, n) (transfer.h: deferred checks).
__global__ void first_bad_kernel(const int64_t* idx, int64_t count, int64_t n, unsigned long long* word,
                                 unsigned long long base) {
  PONDER_GRID_STRIDE(j, count) {
    if (idx[j] < 0 || idx[j] >= n) atomicMin(word, base + static_cast<unsigned long long>(j));
  }
}

// Queues the check of idx against [0, n). A bad index is reported, with the CPU kernels' std::out_of_range message,
// at the next read to the host (at once under PONDER_CUDA_SYNC=1): checking here would wait for the GPU on every
// index op. Until then the kernels below skip (or read as zero) what lies outside.
void check_indices(const Tensor& idx, int64_t n, const char* op) {
  const int64_t count = idx.numel();
  if (count == 0) return;
  const IndexCheck c = begin_index_check(op, idx, n);
  launch("check_indices", first_bad_kernel, count, idx.data<int64_t>(), count, n, c.word, c.base);
  end_index_check();
}

__device__ inline bool inside(int64_t k, int64_t n) { return k >= 0 && k < n; }

// out (outer, ni, inner) = x (outer, len, inner) at rows idx (ni).
template <class T>
__global__ void index_select_kernel(T* out, const T* x, const int64_t* idx, int64_t total, int64_t ni, int64_t len,
                                    int64_t inner) {
  PONDER_GRID_STRIDE(e, total) {
    const int64_t i = e % inner, j = (e / inner) % ni, o = e / (inner * ni), k = idx[j];
    out[e] = inside(k, len) ? x[(o * len + k) * inner + i] : T(0);
  }
}

// out (outer, len, inner) += src (outer, ni, inner) into rows idx (ni); one thread per (outer, inner).
template <class T>
__global__ void index_add_kernel(T* out, const T* src, const int64_t* idx, int64_t outer_inner, int64_t ni,
                                 int64_t len, int64_t inner) {
  PONDER_GRID_STRIDE(oi, outer_inner) {
    const int64_t o = oi / inner, i = oi % inner;
    for (int64_t j = 0; j < ni; ++j)
      if (inside(idx[j], len)) out[(o * len + idx[j]) * inner + i] += src[(o * ni + j) * inner + i];
  }
}

// The same over chunk c of C (indices [c·n, (c + 1)·n)) into part (C, outer, len, inner), zeroed; then out += the
// chunks' partials added in chunk order. One thread per (c, outer, inner) and then per element of out.
template <class T>
__global__ void index_add_chunk_kernel(T* part, const T* src, const int64_t* idx, int64_t C, int64_t outer_inner,
                                       int64_t ni, int64_t n, int64_t len, int64_t inner) {
  PONDER_GRID_STRIDE(x, C * outer_inner) {
    const int64_t c = x / outer_inner, oi = x % outer_inner, o = oi / inner, i = oi % inner;
    T* pc = part + c * (outer_inner / inner) * len * inner;
    const int64_t j1 = (c + 1) * n < ni ? (c + 1) * n : ni;
    for (int64_t j = c * n; j < j1; ++j)
      if (inside(idx[j], len)) pc[(o * len + idx[j]) * inner + i] += src[(o * ni + j) * inner + i];
  }
}
template <class T>
__global__ void add_chunks_kernel(T* out, const T* part, int64_t C, int64_t total) {
  PONDER_GRID_STRIDE(e, total) {
    T a = out[e];
    for (int64_t c = 0; c < C; ++c) a += part[c * total + e];
    out[e] = a;
  }
}

// out (outer, len, inner) = x (outer, xlen, inner) at idx (outer, len, inner) along the middle axis.
template <class T>
__global__ void gather_kernel(T* out, const T* x, const int64_t* idx, int64_t total, int64_t len, int64_t xlen,
                              int64_t inner) {
  PONDER_GRID_STRIDE(e, total) {
    const int64_t i = e % inner, o = e / (inner * len), k = idx[e];
    out[e] = inside(k, xlen) ? x[(o * xlen + k) * inner + i] : T(0);
  }
}

// out (outer, olen, inner) += src (outer, len, inner) at idx (outer, len, inner); one thread per line.
template <class T>
__global__ void scatter_add_kernel(T* out, const T* src, const int64_t* idx, int64_t outer_inner, int64_t len,
                                   int64_t olen, int64_t inner) {
  PONDER_GRID_STRIDE(oi, outer_inner) {
    const int64_t o = oi / inner, i = oi % inner;
    for (int64_t j = 0; j < len; ++j) {
      const int64_t e = (o * len + j) * inner + i;
      if (inside(idx[e], olen)) out[(o * olen + idx[e]) * inner + i] += src[e];
    }
  }
}

// out (count, n) already zero; out[j, idx[j]] = 1.
template <class T>
__global__ void one_hot_kernel(T* out, const int64_t* idx, int64_t count, int64_t n) {
  PONDER_GRID_STRIDE(j, count) {
    if (inside(idx[j], n)) out[j * n + idx[j]] = T(1);
  }
}

}  // namespace

void index_select(const Tensor& out, const Tensor& x, int axis, const Tensor& idx) {
  int64_t outer, len, inner;
  split_dims(x.shape(), axis, outer, len, inner);
  check_indices(idx, len, "index_select");
  PONDER_DISPATCH_ALL(x.dtype(), "index_select", [&] {
    launch("index_select", index_select_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), x.data<scalar_t>(),
           idx.data<int64_t>(), out.numel(), idx.numel(), len, inner);
  });
}

void index_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src) {
  int64_t outer, len, inner;
  split_dims(out.shape(), axis, outer, len, inner);
  check_indices(idx, len, "index_add");
  // Few lines over many indices (an embedding's gradient: one line per column, every token in it) keep most of the
  // GPU idle: the indices go in C chunks, each into its own zeroed copy of out, added in chunk order afterwards.
  // C depends only on the shapes (at least 256 indices a chunk, copies of out within kIndexAddParts elements).
  const int64_t ni = idx.numel(), lines = outer * inner;
  constexpr int64_t kIndexAddParts = int64_t(1) << 24, kFewLines = 16384;
  const int64_t C = lines >= kFewLines || out.numel() == 0 ? 1
                    : std::min({int64_t(256), ni / 256, kIndexAddParts / out.numel()});
  PONDER_DISPATCH_ALL(out.dtype(), "index_add", [&] {
    if (C < 2) {
      launch("index_add", index_add_kernel<scalar_t>, lines, out.data<scalar_t>(), src.data<scalar_t>(),
             idx.data<int64_t>(), lines, ni, len, inner);
      return;
    }
    const Tensor part = Tensor::zeros({C, out.numel()}, out.dtype(), Device::CUDA);
    launch("index_add_chunk", index_add_chunk_kernel<scalar_t>, C * lines, part.data<scalar_t>(),
           src.data<scalar_t>(), idx.data<int64_t>(), C, lines, ni, (ni + C - 1) / C, len, inner);
    launch("add_chunks", add_chunks_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), part.data<scalar_t>(), C,
           out.numel());
  });
}

void gather(const Tensor& out, const Tensor& x, int axis, const Tensor& idx) {
  int64_t outer, len, inner;
  split_dims(idx.shape(), axis, outer, len, inner);
  const int64_t xlen = x.shape()[size_t(axis)];
  check_indices(idx, xlen, "gather");
  PONDER_DISPATCH_ALL(x.dtype(), "gather", [&] {
    launch("gather", gather_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), x.data<scalar_t>(),
           idx.data<int64_t>(), out.numel(), len, xlen, inner);
  });
}

void scatter_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src) {
  int64_t outer, len, inner;
  split_dims(idx.shape(), axis, outer, len, inner);
  const int64_t olen = out.shape()[size_t(axis)];
  check_indices(idx, olen, "scatter_add");
  PONDER_DISPATCH_ALL(out.dtype(), "scatter_add", [&] {
    launch("scatter_add", scatter_add_kernel<scalar_t>, outer * inner, out.data<scalar_t>(), src.data<scalar_t>(),
           idx.data<int64_t>(), outer * inner, len, olen, inner);
  });
}

void one_hot(const Tensor& out, const Tensor& idx) {
  const int64_t n = out.shape().back();
  check_indices(idx, n, "one_hot");
  fill(out, 0.0);
  PONDER_DISPATCH_ALL(out.dtype(), "one_hot", [&] {
    launch("one_hot", one_hot_kernel<scalar_t>, idx.numel(), out.data<scalar_t>(), idx.data<int64_t>(), idx.numel(),
           n);
  });
}

}  // namespace ponder::cuda
