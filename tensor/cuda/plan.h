// Host-side planning for the CUDA kernels: how a strided, broadcast iteration space is flattened into
// a few axes a kernel can index, how a reduction splits into kept and reduced axes, and how a matmul
// maps onto cuBLAS calls. Plain C++ with no CUDA dependency, so tests/test_cuda.cpp checks it on
// machines without a GPU.
#pragma once
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/mat_layout.h"
#include "tensor/tensor.h"

namespace ponder::cuda {

// Axes a kernel indexes after merging; more than this many unmergeable axes is rejected.
constexpr int kMaxDims = 12;

// An iteration space of `numel` elements over `ndim` axes, with each of N operands' element strides.
// Passed to kernels by value, so it is a plain aggregate.
template <int N>
struct Geometry {
  int ndim = 0;
  int64_t numel = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[N][kMaxDims] = {};
};

// Drops size-1 axes and merges neighbours that are contiguous for every operand (the rule of
// tensor/cpu/loop.h), so most kernels see one axis. strides[k] are operand k's strides aligned to
// `shape` (0 on broadcast axes). A scalar space becomes one axis of size 1.
template <int N>
Geometry<N> collapse(const Shape& shape, const std::array<Shape, N>& strides);

// Element-wise spaces over out's shape: out's strides first, then each input broadcast to out's shape.
Geometry<1> plan_map(const Tensor& out);
Geometry<2> plan_map(const Tensor& out, const Tensor& x);
Geometry<3> plan_map(const Tensor& out, const Tensor& a, const Tensor& b);
Geometry<4> plan_map(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b);

// Reduction of x into out (out has x's rank with size 1 on reduced axes), as in tensor/cpu/reduce.cpp:
// `kept` enumerates outputs with strides {x, out}; `reduced` enumerates one output's inputs in x.
struct ReducePlan {
  Geometry<2> kept;
  Geometry<1> reduced;
};
ReducePlan plan_reduce(const Tensor& out, const Tensor& x);

// Cumulative sum along `axis`: `lines` enumerates the lines with strides {x, out}.
struct CumsumPlan {
  Geometry<2> lines;
  int64_t len = 0, x_stride = 0, out_stride = 0;
};
CumsumPlan plan_cumsum(const Tensor& out, const Tensor& x, int axis);

// Throws std::logic_error for views neither layout covers (raw::matmul passes a contiguous copy then).
MatLayout mat_layout(const Tensor& t);

// out (…, m, n) = a (…, m, k) · b (…, k, n) as cuBLAS calls, in cuBLAS's column-major terms (the
// parameters of cublas<t>gemm, named as there). A row-major matrix read column-major is its transpose,
// so out = a·b is issued as outᵀ = bᵀ·aᵀ: cuBLAS's A is the engine's b, its B is the engine's a, and its
// m × n result is out's n × m. Batch axes of a and b are broadcast to out's (stride 0 where broadcast)
// and out is contiguous. When each batch entry of a and of b is a fixed stride from the previous one
// the batch is one strided-batched call. Otherwise the longest run of trailing batch axes that a and b each
// walk with one stride is one strided-batched call of `inner` entries, issued once per entry of the leading
// axes at the listed offsets (a batch broadcast along one axis, as the prefix path's per-position weights
// against their inputs, is a few calls, not one per entry).
struct GemmPlan {
  bool transa = false, transb = false;  // CUBLAS_OP_T, else CUBLAS_OP_N
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 0;
  bool uniform = true;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries (within a call)
  int64_t inner = 0;                                 // batch entries per call
  std::vector<int64_t> offset_a, offset_b;           // per call, when not uniform
};
GemmPlan plan_gemm(const Tensor& out, const Tensor& a, const Tensor& b);

// ---- implementation of the template

template <int N>
Geometry<N> collapse(const Shape& shape, const std::array<Shape, N>& strides) {
  Geometry<N> g;
  g.numel = shape_numel(shape);
  std::vector<int64_t> sz;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !sz.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      sz.back() *= shape[d];
      for (int k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      sz.push_back(shape[d]);
      for (int k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  if (sz.empty()) {
    sz.push_back(1);
    for (int k = 0; k < N; ++k) st[k].push_back(0);
  }
  if (sz.size() > size_t(kMaxDims))
    throw std::invalid_argument("cuda: iteration space " + shape_str(shape) + " has more than " +
                                std::to_string(kMaxDims) + " axes that cannot be merged");
  g.ndim = int(sz.size());
  for (int d = 0; d < g.ndim; ++d) {
    g.size[d] = sz[size_t(d)];
    for (int k = 0; k < N; ++k) g.stride[k][d] = st[k][size_t(d)];
  }
  return g;
}

}  // namespace ponder::cuda
