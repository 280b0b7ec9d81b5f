// Prefix mode's K closed-form inner steps on one unit on the GPU, forward and backward: one thread block per head,
// whose threads run the phases of tensor/cuda/ttt_prefix_body.h with a block barrier after each (one launch per
// call, where the composition takes index ops, a batched product and element-wise passes per step, each with its
// backward). A head's intermediates live in global memory; dγ and dβ are summed per head in row order and then
// over heads in order (sum_head_gamma_parts), so results do not depend on scheduling. A first version, with
// the products at one output per thread and no shared-memory staging.
#include <stdexcept>
#include <string>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/ttt_prefix_body.h"
#include "tensor/dtype.h"

namespace ponder::cuda {
namespace {

constexpr int kPrefixThreads = 256;

template <class T>
__global__ void __launch_bounds__(kPrefixThreads) prefix_forward_kernel(prefix::Args<T> a) {
  const int n = prefix::forward_phases(a.steps);
  for (int ph = 0; ph < n; ++ph) {
    prefix::forward_phase(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}
template <class T>
__global__ void __launch_bounds__(kPrefixThreads) prefix_backward_kernel(prefix::Args<T> a) {
  const int n = prefix::backward_phases(a.steps);
  for (int ph = 0; ph < n; ++ph) {
    prefix::backward_phase(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}

// The operands (contiguous heads: raw::ttt_prefix_steps makes them so) and global scratch for G heads.
template <class T>
prefix::Args<T> args(const PrefixOperands& o, const Tensor& saved, Tensor& scratch, Tensor& dscratch) {
  const int64_t G = o.z0.shape()[0], b = o.z0.shape()[1], f = o.z0.shape()[2];
  if (G > int64_t(0x7fffffff))
    throw std::invalid_argument("ttt_prefix_steps (CUDA): " + std::to_string(G) + " heads exceed the grid");
  scratch = Tensor::empty({G, prefix::scratch_t(b, f)}, o.z0.dtype(), Device::CUDA);
  dscratch = Tensor::empty({G, prefix::scratch_d(b, f)}, DType::F64, Device::CUDA);
  prefix::Args<T> a{};
  a.z0 = o.z0.data<T>(), a.t = o.t.data<T>(), a.neg_m = o.neg_m.data<T>(), a.w = o.w.data<T>();
  a.gamma = o.gamma.data<T>(), a.beta = o.beta.data<T>();
  a.saved = saved.data<T>();
  a.scratch = scratch.data<T>();
  a.dscr = dscratch.data<double>();
  a.geo = row_geom(o.rows.sizes, o.rows.strides, "ttt_prefix_steps");
  a.b = b, a.f = f, a.P = prefix::pairs(b), a.Pg = o.gamma.numel(), a.steps = o.steps, a.eps = o.eps;
  return a;
}

}  // namespace

void ttt_prefix_steps(const Tensor& out, const Tensor& saved, const PrefixOperands& o) {
  const int64_t G = o.z0.shape()[0];
  if (G == 0) return;
  PONDER_DISPATCH_FLOAT(o.z0.dtype(), "ttt_prefix_steps", [&] {
    Tensor scratch, dscratch;
    prefix::Args<scalar_t> a = args<scalar_t>(o, saved, scratch, dscratch);
    a.a = out.data<scalar_t>();
    prefix_forward_kernel<scalar_t><<<unsigned(G), kPrefixThreads, 0, stream()>>>(a);
    cuda_check_at(cudaGetLastError(), "prefix_forward_kernel", __FILE__, __LINE__);
    debug_sync("prefix_forward_kernel", __FILE__, __LINE__);
  });
}

void ttt_prefix_steps_backward(const std::array<Tensor, 6>& g, const PrefixOperands& o, const Tensor& saved,
                               const Tensor& da) {
  const int64_t G = o.z0.shape()[0], Pg = o.gamma.numel();
  if (G == 0) return;
  const Tensor parts = Tensor::zeros({G, 2, Pg}, DType::F64, Device::CUDA);
  PONDER_DISPATCH_FLOAT(o.z0.dtype(), "ttt_prefix_steps_backward", [&] {
    Tensor scratch, dscratch;
    prefix::Args<scalar_t> a = args<scalar_t>(o, saved, scratch, dscratch);
    a.da = da.data<scalar_t>();
    a.dz0 = g[0].data<scalar_t>(), a.dt = g[1].data<scalar_t>(), a.dnm = g[2].data<scalar_t>();
    a.dw = g[3].data<scalar_t>();
    a.parts = parts.data<double>();
    prefix_backward_kernel<scalar_t><<<unsigned(G), kPrefixThreads, 0, stream()>>>(a);
    cuda_check_at(cudaGetLastError(), "prefix_backward_kernel", __FILE__, __LINE__);
    debug_sync("prefix_backward_kernel", __FILE__, __LINE__);
  });
  sum_head_gamma_parts(parts, g[4], g[5]);
}

}  // namespace ponder::cuda
