// Causal softmax attention on the GPU, forward and backward: the tiles and phases of tensor/cuda/attention_body.h,
// one thread block per tile with a block barrier after each phase, the tiles in shared memory. Where the
// composition stores every head's (n × T) scores and probabilities and runs about ten launches each way, the
// forward is one launch and the backward two (dq by query tiles, dk and dv by key tiles), and every sum runs in a
// fixed order, so results repeat bit for bit.
#include <stdexcept>
#include <string>

#include "tensor/cuda/attention_body.h"
#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/dtype.h"

namespace ponder::cuda {
namespace {

constexpr int kAttnThreads = 128;

// Block blockIdx.x of kind K: its phases with a block barrier after each.
template <class T, attn::Kind K>
__global__ void __launch_bounds__(kAttnThreads) attn_kernel(attn::Args<T> a) {
  const int64_t block = int64_t(blockIdx.x);
  const int n = attn::phases(K, a, block);
  for (int ph = 0; ph < n; ++ph) {
    attn::phase(K, a, block, ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}

// The launch's operands from q (G, n, f) and k (G, Tk, f).
template <class T>
attn::Args<T> args_of(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& g) {
  attn::Args<T> a{};
  a.q = q.data<T>(), a.k = k.data<T>(), a.v = v.data<T>();
  a.G = q.shape()[0], a.n = q.shape()[1], a.f = q.shape()[2], a.Tk = k.shape()[1];
  a.geo = {g.scale, g.t0, g.first, g.window};
  return a;
}

// The blocks of kind K, with their shared memory checked against the device's.
template <attn::Kind K, class T>
void launch_tiles(const attn::Args<T>& a, const char* name) {
  const int64_t blocks = attn::blocks(K, a);
  if (blocks == 0) return;
  const size_t smem = size_t(attn::block_bytes(K, a.f, int64_t(sizeof(T))));
  if (smem > size_t(max_shared_bytes()))
    throw std::invalid_argument(std::string(name) + " (CUDA): head size " + std::to_string(a.f) + " needs " +
                                std::to_string(smem) + " bytes of shared memory per block; this device allows " +
                                std::to_string(max_shared_bytes()));
  allow_shared(attn_kernel<T, K>, smem);
  attn_kernel<T, K><<<unsigned(blocks), kAttnThreads, smem, stream()>>>(a);
  cuda_check_at(cudaGetLastError(), name, __FILE__, __LINE__);
  debug_sync(name, __FILE__, __LINE__);
}

}  // namespace

void attention(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
               const AttnGeometry& g) {
  PONDER_DISPATCH_FLOAT(q.dtype(), "attention", [&] {
    attn::Args<scalar_t> a = args_of<scalar_t>(q, k, v, g);
    a.y = y.data<scalar_t>(), a.lse = lse.data<scalar_t>();
    launch_tiles<attn::Kind::Forward>(a, "attention");
  });
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy, const AttnGeometry& g) {
  PONDER_DISPATCH_FLOAT(q.dtype(), "attention_backward", [&] {
    attn::Args<scalar_t> a = args_of<scalar_t>(q, k, v, g);
    a.y = y.data<scalar_t>(), a.lse = lse.data<scalar_t>(), a.dy = dy.data<scalar_t>();
    a.dq = dq.data<scalar_t>(), a.dk = dk.data<scalar_t>(), a.dv = dv.data<scalar_t>();
    launch_tiles<attn::Kind::Dq>(a, "attention_backward (dq)");
    launch_tiles<attn::Kind::Dkv>(a, "attention_backward (dk, dv)");
  });
}

}  // namespace ponder::cuda
