// Reductions and cumulative sums. Deterministic by construction, with no atomics: a reduction gives
// each output one block, whose threads accumulate fixed strided subsets and combine them in a fixed
// shared-memory tree, so the same shapes always add in the same order. Floats accumulate in double,
// as on the CPU; a cumulative sum runs one sequential line per thread.
#include <limits>
#include <type_traits>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"

namespace ponder::cuda {
namespace {

constexpr int kReduceThreads = 256;  // the most threads per output; the tree needs a power of two

template <class Acc>
__device__ inline Acc combine(ReduceOp op, Acc a, Acc b) {
  if (op == ReduceOp::Sum) return a + b;
  if (op == ReduceOp::Max) return b > a ? b : a;
  return b < a ? b : a;
}

// out (kept) ← op over x (kept × reduced); blockDim.x is a power of two ≤ kReduceThreads.
template <class T, class Acc>
__global__ void reduce_kernel(T* out, const T* x, ReducePlan p, ReduceOp op, Acc init) {
  __shared__ Acc part[kReduceThreads];
  for (int64_t o = blockIdx.x; o < p.kept.numel; o += gridDim.x) {
    int64_t ko[2];
    offsets(p.kept, o, ko);
    Acc acc = init;
    for (int64_t r = threadIdx.x; r < p.reduced.numel; r += blockDim.x) {
      int64_t ro[1];
      offsets(p.reduced, r, ro);
      acc = combine(op, acc, Acc(x[ko[0] + ro[0]]));
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) part[threadIdx.x] = combine(op, part[threadIdx.x], part[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[ko[1]] = T(part[0]);
    __syncthreads();  // part[0] is read before the next output overwrites it
  }
}

// One line along the axis per thread: out[t] = Σ_{s ≤ t} x[s] (or s ≥ t when reverse).
template <class T, class Acc>
__global__ void cumsum_kernel(T* out, const T* x, CumsumPlan p, bool reverse) {
  PONDER_GRID_STRIDE(l, p.lines.numel) {
    int64_t o[2];
    offsets(p.lines, l, o);
    Acc acc = 0;
    for (int64_t j = 0; j < p.len; ++j) {
      const int64_t t = reverse ? p.len - 1 - j : j;
      acc += Acc(x[o[0] + t * p.x_stride]);
      out[o[1] + t * p.out_stride] = T(acc);
    }
  }
}

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<T>, double, T>;

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& x) {
  const ReducePlan p = plan_reduce(out, x);
  if (p.kept.numel == 0) return;
  // Enough threads for the reduced extent, at least a warp; the result depends only on the shapes.
  int threads = 32;
  while (threads < kReduceThreads && threads < p.reduced.numel) threads *= 2;
  const unsigned blocks = unsigned(std::min<int64_t>(p.kept.numel, kMaxBlocks));
  PONDER_DISPATCH_ALL(x.dtype(), "reduce", [&] {
    using Acc = acc_t<scalar_t>;
    const Acc init = op == ReduceOp::Sum   ? Acc(0)
                     : op == ReduceOp::Max ? Acc(std::numeric_limits<scalar_t>::lowest())
                                           : Acc(std::numeric_limits<scalar_t>::max());
    reduce_kernel<scalar_t, Acc><<<blocks, threads, 0, stream()>>>(out.data<scalar_t>(), x.data<scalar_t>(), p, op,
                                                                   init);
    cuda_check(cudaGetLastError());
  });
}

void cumsum(const Tensor& out, const Tensor& x, int axis, bool reverse) {
  if (x.numel() == 0) return;
  const CumsumPlan p = plan_cumsum(out, x, axis);
  PONDER_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    launch("cumsum", cumsum_kernel<scalar_t, acc_t<scalar_t>>, p.lines.numel, out.data<scalar_t>(),
           x.data<scalar_t>(), p, reverse);
  });
}

}  // namespace ponder::cuda
