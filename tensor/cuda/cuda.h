// The CUDA device as the rest of the engine sees it: registration, settings, allocator statistics and
// the facts `ponder` reports. Plain C++ (no CUDA headers), and every function exists in every build: a
// build without nvcc or with -Dcuda=disabled links tensor/cuda/stub.cpp, whose cuda_init says why.
#pragma once
#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace ponder {

// True when this binary contains the CUDA backend (it may still find no GPU at run time).
bool cuda_built();

// Looks for a GPU and, when there is one, registers the CUDA backend for Device::CUDA (device 0, one
// stream, one cuBLAS handle). Idempotent. Returns false and says why (never empty) when it cannot.
bool cuda_init(std::string* why_not);

// Blocks until all queued GPU work has finished (kernels run asynchronously; timings need this). Raises an index
// error that a deferred check found meanwhile (tensor/cuda/transfer.h), as every read to the host does.
void cuda_synchronize();

// How many times the host has waited for the GPU so far: reads to the host, cuda_synchronize, uploads over 1 MiB,
// freeing device memory. A training step waits only where it reads its loss and gradient norm; test_cuda counts.
// PONDER_CUDA_TRACE_WAITS=1 prints each wait's call stack.
int64_t cuda_host_waits();

struct CudaDeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t total_bytes = 0;
  int runtime_version = 0, driver_version = 0;  // e.g. 13000 for 13.0
  // Peaks computed from the device's attributes; 0 where the architecture is not in our table.
  double peak_fp32_gflops = 0;   // CUDA cores: SMs × FP32 lanes per SM × 2 × boost clock
  double peak_fp64_gflops = 0;
  // Tensor cores, dense bf16 products with f32 accumulation: SMs × FLOP per clock per SM × boost clock (the MFU
  // denominator of `ponder bench train --device cuda`; 0 where the architecture is not in the table).
  double peak_bf16_dense_gflops = 0;
  double peak_bandwidth_gbs = 0;  // 2 × memory clock × bus width
};
// Throws when no CUDA backend is registered (call cuda_init first).
CudaDeviceInfo cuda_device_info();

// The caching allocator behind Device::CUDA storages. Live and peak bytes of tensors are in
// memory_stats(Device::CUDA); these count what the cache holds on top of that.
struct CudaAllocatorStats {
  int64_t reserved_bytes = 0;  // obtained from cudaMalloc and not returned
  int64_t cached_bytes = 0;    // reserved but free, waiting for reuse
  int64_t device_mallocs = 0;  // cudaMalloc calls so far
  int64_t cache_hits = 0;      // allocations served from the cache
};
CudaAllocatorStats cuda_allocator_stats();
// Returns every cached block to the driver (tensors in use are untouched).
void cuda_empty_cache();

// How the TTT-Linear dual-form kernels run (tensor/cuda/ttt_dual.cu). shared_scratch: a head's intermediates in the
// block's shared memory when they fit (the default), else in global memory (the reference `ponder bench dual` times
// against). unroll: outputs each thread keeps in flight in the products, 1, 2 or 4, or kDualTiles: 2 × 2 tiles of
// outputs whose terms share their operands' loads, or kDualMma: float32 products on the tensor cores in three TF32
// parts (float32 accuracy; float64 runs as 1) (default kDualMma, the fastest measured on an H200: docs/engine.md;
// or the environment's PONDER_CUDA_DUAL_UNROLL: 1, 2, 4, tiles or mma). *_phases < 0 runs every phase; n >= 0 only
// the first n, for timing a phase by difference (the results are then wrong: for benchmarks only).
constexpr int kDualTiles = 0;
constexpr int kDualMma = -2;
struct CudaDualOptions {
  bool shared_scratch = true;
  int unroll = kDualMma;
  int forward_phases = -1, backward_phases = -1;
};
void cuda_set_dual_options(const CudaDualOptions& o);
CudaDualOptions cuda_dual_options();

// Direct library calls on the engine's buffers: the references `ponder bench` times the engine against.
// Queued on the backend's stream like every kernel (time them with cuda_synchronize).
// out (…, m, n) = a (…, m, k) · b (…, k, n), contiguous float32/float64 CUDA tensors with equal batch
// axes: the textbook cublas<t>gemm (strided-batched when batched) call.
void cuda_gemm_direct(const Tensor& out, const Tensor& a, const Tensor& b);
// cudaMemcpyAsync device-to-device of src's bytes into dst (contiguous CUDA tensors of equal size).
void cuda_memcpy(const Tensor& dst, const Tensor& src);

}  // namespace ponder
