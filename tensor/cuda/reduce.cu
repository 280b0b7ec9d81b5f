// Reductions and cumulative sums. Deterministic by construction, with no atomics: a reduction gives
// each output one block (or, for few outputs over a long extent, one block per fixed chunk of it and then one
// over the chunks), whose threads accumulate fixed strided subsets and combine them in a fixed
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

// Block blk = o·C + c combines reduced elements [c·len, min((c + 1)·len, R)) of kept output o, its threads taking fixed
// strided subsets combined in a fixed shared-memory tree, and writes the result to out[blk] (to_parts: a chunk's
// partial, contiguous) or to output o's place. C = 1 and len = R is the whole reduction in one block.
// blockDim.x is a power of two ≤ kReduceThreads.
template <class TO, class TI, class Acc>
__global__ void reduce_kernel(TO* out, const TI* x, ReducePlan p, ReduceOp op, Acc init, int64_t C, int64_t len,
                              bool to_parts) {
  __shared__ Acc part[kReduceThreads];
  for (int64_t blk = blockIdx.x; blk < p.kept.numel * C; blk += gridDim.x) {
    const int64_t o = blk / C, r0 = (blk % C) * len, r1 = r0 + len < p.reduced.numel ? r0 + len : p.reduced.numel;
    int64_t ko[2];
    offsets(p.kept, o, ko);
    Acc acc = init;
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
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
    if (threadIdx.x == 0) out[to_parts ? blk : ko[1]] = TO(part[0]);
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

// A reduction with few outputs and a long reduced extent (a gradient's sum of squares, a bias gradient over every
// token) in one block per output leaves most of the GPU idle: it is split into C chunks of the extent, reduced by
// kept × C blocks into partials and then per output over its C partials. C depends only on the shapes, so the
// order of the additions, and the result, do too.
constexpr int64_t kSplitKeptBelow = 1024, kSplitMinWork = int64_t(1) << 20, kChunkMin = 4096, kMaxChunks = 1024;
int64_t split_chunks(const ReducePlan& p) {
  if (p.kept.numel >= kSplitKeptBelow || p.kept.numel * p.reduced.numel < kSplitMinWork) return 1;
  return std::min(kMaxChunks, (p.reduced.numel + kChunkMin - 1) / kChunkMin);
}

// The plan of the second stage: output o's C partials, contiguous at o·C, into the original output.
ReducePlan parts_plan(const ReducePlan& p, int64_t C) {
  ReducePlan q = p;
  int64_t stride = C;
  for (int d = q.kept.ndim - 1; d >= 0; --d) {
    q.kept.stride[0][d] = stride;
    stride *= q.kept.size[d];
  }
  q.reduced = Geometry<1>{};
  q.reduced.ndim = 1;
  q.reduced.numel = q.reduced.size[0] = C;
  q.reduced.stride[0][0] = 1;
  return q;
}

int threads_for(int64_t n) {  // enough for n, at least a warp; a power of two
  int threads = 32;
  while (threads < kReduceThreads && threads < n) threads *= 2;
  return threads;
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& x) {
  const ReducePlan p = plan_reduce(out, x);
  if (p.kept.numel == 0) return;
  const int64_t C = split_chunks(p), len = (p.reduced.numel + C - 1) / C;
  PONDER_DISPATCH_ALL(x.dtype(), "reduce", [&] {
    using Acc = acc_t<scalar_t>;
    const Acc init = op == ReduceOp::Sum   ? Acc(0)
                     : op == ReduceOp::Max ? Acc(std::numeric_limits<scalar_t>::lowest())
                                           : Acc(std::numeric_limits<scalar_t>::max());
    if (C == 1) {
      const unsigned blocks = unsigned(std::min<int64_t>(p.kept.numel, kMaxBlocks));
      reduce_kernel<scalar_t, scalar_t, Acc><<<blocks, threads_for(p.reduced.numel), 0, stream()>>>(
          out.data<scalar_t>(), x.data<scalar_t>(), p, op, init, 1, p.reduced.numel, false);
      cuda_check_at(cudaGetLastError(), "reduce_kernel", __FILE__, __LINE__);
      debug_sync("reduce_kernel", __FILE__, __LINE__);
      return;
    }
    const DType acc_dtype = std::is_floating_point_v<scalar_t> ? DType::F64 : x.dtype();
    const Tensor parts = Tensor::empty({p.kept.numel * C}, acc_dtype, Device::CUDA);
    reduce_kernel<Acc, scalar_t, Acc><<<unsigned(std::min<int64_t>(p.kept.numel * C, kMaxBlocks)), kReduceThreads,
                                        0, stream()>>>(parts.data<Acc>(), x.data<scalar_t>(), p, op, init, C, len, true);
    cuda_check_at(cudaGetLastError(), "reduce_kernel (chunks)", __FILE__, __LINE__);
    debug_sync("reduce_kernel (chunks)", __FILE__, __LINE__);
    const unsigned blocks = unsigned(std::min<int64_t>(p.kept.numel, kMaxBlocks));
    reduce_kernel<scalar_t, Acc, Acc><<<blocks, threads_for(C), 0, stream()>>>(
        out.data<scalar_t>(), parts.data<Acc>(), parts_plan(p, C), op, init, 1, C, false);
    cuda_check_at(cudaGetLastError(), "reduce_kernel (partials)", __FILE__, __LINE__);
    debug_sync("reduce_kernel (partials)", __FILE__, __LINE__);
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
