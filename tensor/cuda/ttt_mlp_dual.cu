// TTT-MLP's dual form on one mini-batch on the GPU, forward and backward: one thread block per head, whose threads
// run the phases of tensor/cuda/ttt_mlp_dual_body.h and ttt_mlp_dual_backward.h with a block barrier after each (one
// launch per call, where the composition takes about forty ops and their backward). The scan kernels run every
// unit of a sequence that way in one launch (the backward in blocks of units), each block keeping its head. A head's intermediates live in
// global memory; the row formulas run in double over column chunks (tensor/cuda/ttt_dual_rows.h); dγ and dβ are
// summed per head in row order and then over heads in order (sum_head_gamma_parts), so results do not depend on
// scheduling. A first version: its products are the TTT-Linear body's loops at one output per thread, with no
// shared-memory staging, or with PONDER_CUDA_DUAL_UNROLL=mma (float32) on the tensor cores (ttt_dual_mma.h).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/ttt_mlp_dual_backward.h"
#include "tensor/dtype.h"

namespace ponder::cuda {
namespace {

constexpr int kMlpThreads = 256;

// The kernels' products: U = 1 (one output per thread) or, in float32 when the options ask for it
// (PONDER_CUDA_DUAL_UNROLL=mma), dual::kMma on the tensor cores; the other unrolls leave TTT-MLP at 1. pick_mlp
// chooses between the two instantiations MLP_KERNELS lists.
template <class T>
constexpr int kMlpMma = std::is_same_v<T, float> ? dual::kMma : 1;
template <class K>
K pick_mlp(const char* op, K one, K mma) {
  return dual_unroll(op) == kDualMma ? mma : one;
}
#define MLP_KERNELS(k) k<scalar_t, 1>, k<scalar_t, kMlpMma<scalar_t>>

template <class T, int U>
__global__ void __launch_bounds__(kMlpThreads) mlp_forward_kernel(mlp::Args<T> a) {
  for (int ph = 0; ph < mlp::kForwardPhases; ++ph) {
    mlp::forward_phase<U>(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}

template <class T, int U>
__global__ void __launch_bounds__(kMlpThreads) mlp_backward_kernel(mlp::Args<T> a) {
  if (!a.saved)
    for (int ph = 0; ph < mlp::kRecomputePhases; ++ph) {
      mlp::forward_phase<U>(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
      __syncthreads();
    }
  for (int ph = 0; ph < mlp::kBackwardPhases; ++ph) {
    mlp::backward_phase<U>(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}

// The scan: every unit of the sequence in one launch (the forward) or units hi … lo (a block of the backward's),
// each unit's phases on the launch's Args moved to it, a barrier after each phase.
template <class T, int U>
__global__ void __launch_bounds__(kMlpThreads) mlp_scan_forward_kernel(mlp::Args<T> a, mlp::Scan<T> s) {
  for (int64_t u = 0; u < s.units; ++u)
    for (int ph = 0; ph < mlp::kForwardPhases; ++ph) {
      mlp::scan_forward_phase<U>(a, s, u, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
      __syncthreads();
    }
}
template <class T, int U>
__global__ void __launch_bounds__(kMlpThreads) mlp_scan_backward_kernel(mlp::Args<T> a, mlp::Scan<T> s) {
  for (int64_t u = s.hi; u >= s.lo; --u)
    for (int ph = 0; ph < mlp::kBackwardPhases; ++ph) {
      mlp::scan_backward_phase<U>(a, s, u, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
      __syncthreads();
    }
}

// The operands (contiguous (G, r, c) heads: raw::ttt_mlp_dual makes them so) and global scratch for G heads.
template <class T>
mlp::Args<T> args(const MlpDualOperands& o, const Tensor& saved, Tensor& scratch, Tensor& dscratch) {
  const int64_t G = o.xq.shape()[0], b = o.xq.shape()[1], f = o.xq.shape()[2], h = o.W1.shape()[2];
  if (G > int64_t(0x7fffffff))
    throw std::invalid_argument("ttt_mlp_dual (CUDA): " + std::to_string(G) + " heads exceed the grid");
  scratch = Tensor::empty({G, mlp::scratch_t(b, f, h, saved.defined())}, o.xq.dtype(), Device::CUDA);
  dscratch = Tensor::empty({G, mlp::scratch_d(b, f)}, DType::F64, Device::CUDA);
  mlp::Args<T> a{};
  a.W1 = o.W1.data<T>(), a.b1 = o.b1.data<T>(), a.W2 = o.W2.data<T>(), a.b2 = o.b2.data<T>();
  a.q = o.xq.data<T>(), a.k = o.xk.data<T>(), a.v = o.xv.data<T>(), a.eta = o.eta.data<T>();
  a.gamma = o.gamma.data<T>(), a.beta = o.beta.data<T>();
  a.saved = saved.defined() ? saved.data<T>() : nullptr;
  a.scratch = scratch.data<T>();
  a.dscr = dscratch.data<double>();
  a.rows = row_geom(o.rows.sizes, o.rows.strides, "ttt_mlp_dual");
  a.b = b, a.f = f, a.h = h, a.P = o.gamma.numel(), a.eps = o.eps;
  return a;
}

// The backward's upstream dy, gradients g (the first eight; dγ, dβ come from parts) and per-head dγ, dβ parts.
template <class T>
void backward_pointers(mlp::Args<T>& a, const std::array<Tensor, 10>& g, const std::array<Tensor, 5>& dy,
                       const Tensor& parts) {
  a.dO = dy[0].data<T>(), a.dW1u = dy[1].data<T>(), a.db1u = dy[2].data<T>(), a.dW2u = dy[3].data<T>();
  a.db2u = dy[4].data<T>();
  a.dW1 = g[0].data<T>(), a.db1 = g[1].data<T>(), a.dW2 = g[2].data<T>(), a.db2 = g[3].data<T>();
  a.dq = g[4].data<T>(), a.dk = g[5].data<T>(), a.dv = g[6].data<T>(), a.deta = g[7].data<T>();
  a.parts = parts.data<double>();
}

}  // namespace

void ttt_mlp_dual(const std::array<Tensor, 5>& y, const Tensor& saved, const MlpDualOperands& o) {
  const int64_t G = o.xq.shape()[0];  // checked against the grid in args() before it is narrowed
  if (G == 0) return;
  if (!saved.defined()) throw std::invalid_argument("ttt_mlp_dual (CUDA): the forward needs the saved buffer");
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_mlp_dual", [&] {
    Tensor scratch, dscratch;
    mlp::Args<scalar_t> a = args<scalar_t>(o, saved, scratch, dscratch);
    a.out = y[0].data<scalar_t>(), a.W1o = y[1].data<scalar_t>(), a.b1o = y[2].data<scalar_t>();
    a.W2o = y[3].data<scalar_t>(), a.b2o = y[4].data<scalar_t>();
    const auto kernel = pick_mlp("ttt_mlp_dual", MLP_KERNELS(mlp_forward_kernel));
    kernel<<<unsigned(G), kMlpThreads, 0, stream()>>>(a);
    cuda_check_at(cudaGetLastError(), "mlp_forward_kernel", __FILE__, __LINE__);
    debug_sync("mlp_forward_kernel", __FILE__, __LINE__);
  });
}

void ttt_mlp_dual_backward(const std::array<Tensor, 10>& g, const MlpDualOperands& o, const Tensor& saved,
                           const std::array<Tensor, 5>& dy) {
  const int64_t G = o.xq.shape()[0], P = o.gamma.numel();
  if (G == 0) return;
  const Tensor parts = Tensor::zeros({G, 2, P}, DType::F64, Device::CUDA);
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_mlp_dual_backward", [&] {
    Tensor scratch, dscratch;
    mlp::Args<scalar_t> a = args<scalar_t>(o, saved, scratch, dscratch);
    backward_pointers(a, g, dy, parts);
    const auto kernel = pick_mlp("ttt_mlp_dual_backward", MLP_KERNELS(mlp_backward_kernel));
    kernel<<<unsigned(G), kMlpThreads, 0, stream()>>>(a);
    cuda_check_at(cudaGetLastError(), "mlp_backward_kernel", __FILE__, __LINE__);
    debug_sync("mlp_backward_kernel", __FILE__, __LINE__);
  });
  sum_head_gamma_parts(parts, g[8], g[9]);
}

namespace {
// The scan's units-first results and intermediates.
template <class T>
mlp::Scan<T> scan_of(const MlpScanOperands& so, const std::array<Tensor, 5>& Y, const Tensor& S) {
  mlp::Scan<T> s;
  s.units = so.units, s.lo = 0, s.hi = so.units - 1, s.G = so.first.xq.shape()[0];
  s.out = Y[0].data<T>(), s.W1 = Y[1].data<T>(), s.b1 = Y[2].data<T>(), s.W2 = Y[3].data<T>(), s.b2 = Y[4].data<T>();
  s.S = S.data<T>();
  return s;
}
}  // namespace

void ttt_mlp_scan(const std::array<Tensor, 5>& Y, const Tensor& S, const MlpScanOperands& so) {
  const int64_t G = so.first.xq.shape()[0];
  if (G == 0 || so.units == 0) return;
  PONDER_DISPATCH_FLOAT(so.first.xq.dtype(), "ttt_mlp_scan", [&] {
    Tensor scratch, dscratch;
    const mlp::Args<scalar_t> a = args<scalar_t>(so.first, S, scratch, dscratch);  // saved: unit 0's part of S
    const auto kernel = pick_mlp("ttt_mlp_scan", MLP_KERNELS(mlp_scan_forward_kernel));
    kernel<<<unsigned(G), kMlpThreads, 0, stream()>>>(a, scan_of<scalar_t>(so, Y, S));
    cuda_check_at(cudaGetLastError(), "mlp_scan_forward_kernel", __FILE__, __LINE__);
    debug_sync("mlp_scan_forward_kernel", __FILE__, __LINE__);
  });
}

void ttt_mlp_scan_backward(const std::array<Tensor, 10>& g, const MlpScanOperands& so, const std::array<Tensor, 5>& Y,
                           const Tensor& S, const std::array<Tensor, 5>& dy) {
  const MlpDualOperands& o = so.first;
  const int64_t G = o.xq.shape()[0], P = o.gamma.numel(), n = so.units, f = o.xq.shape()[2], h = o.W1.shape()[2];
  if (G == 0 || n == 0) return;
  const int64_t per = scan_backward_units_per_launch(G, P, n);
  const auto carry = [&](int64_t r, int64_t c) { return Tensor::empty({2, G, r, c}, o.xq.dtype(), Device::CUDA); };
  const Tensor parts = Tensor::empty({per, G, 2, P}, DType::F64, Device::CUDA),
               sums = Tensor::empty({per, gamma_head_chunks(G), 2, P}, DType::F64, Device::CUDA), cW1 = carry(f, h),
               cb1 = carry(1, h), cW2 = carry(h, f), cb2 = carry(1, f);
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_mlp_scan_backward", [&] {
    Tensor scratch, dscratch;
    mlp::Args<scalar_t> a = args<scalar_t>(o, S, scratch, dscratch);
    backward_pointers(a, g, dy, parts);
    mlp::Scan<scalar_t> s = scan_of<scalar_t>(so, Y, S);
    s.cW1 = cW1.data<scalar_t>(), s.cb1 = cb1.data<scalar_t>(), s.cW2 = cW2.data<scalar_t>();
    s.cb2 = cb2.data<scalar_t>();
    const auto kernel = pick_mlp("ttt_mlp_scan_backward", MLP_KERNELS(mlp_scan_backward_kernel));
    for (int64_t hi = n - 1; hi >= 0; hi -= per) {
      s.hi = hi, s.lo = std::max<int64_t>(0, hi - per + 1);
      fill(parts, 0.0);
      kernel<<<unsigned(G), kMlpThreads, 0, stream()>>>(a, s);
      cuda_check_at(cudaGetLastError(), "mlp_scan_backward_kernel", __FILE__, __LINE__);
      debug_sync("mlp_scan_backward_kernel", __FILE__, __LINE__);
      sum_unit_gamma_parts(parts, sums, n, s.lo, s.hi, g[8], g[9]);
    }
  });
}

}  // namespace ponder::cuda
