// Shared by the CUDA kernel files: error checks with file and line (llm.c's cudaCheck habit), the one
// stream and cuBLAS handle, grid-stride launches and strided index arithmetic.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <utility>

#include "tensor/cuda/plan.h"

namespace ponder::cuda {

[[noreturn]] void cuda_fail(cudaError_t err, const char* what, const char* file, int line);
[[noreturn]] void cublas_fail(cublasStatus_t status, const char* what, const char* file, int line);

inline void cuda_check_at(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) cuda_fail(err, what, file, line);
}
inline void cublas_check_at(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) cublas_fail(status, what, file, line);
}

// Every CUDA runtime and cuBLAS call goes through these; a failure throws std::runtime_error naming the
// call, the error string and where it was made.
#define cuda_check(call) ::ponder::cuda::cuda_check_at((call), #call, __FILE__, __LINE__)
#define cublas_check(call)                                                  \
  do {                                                                      \
    ::ponder::cuda::cublas_check_at((call), #call, __FILE__, __LINE__);     \
    ::ponder::cuda::debug_sync(#call, __FILE__, __LINE__);                  \
  } while (0)

// The backend's single stream and cuBLAS handle (bound to that stream); defined in backend.cu.
cudaStream_t stream();
cublasHandle_t blas();

// PONDER_CUDA_SYNC=1 (read once): synchronise the stream after every kernel launch and cuBLAS call and check for
// errors there, so a fault is reported at the kernel that made it instead of at the next synchronising call.
// Slow; a debugging mode (README, "CUDA").
bool sync_each_launch();
// In that mode: waits for the stream and raises its error naming `what` (a kernel or cuBLAS call); else nothing.
void debug_sync(const char* what, const char* file, int line);

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;  // kernels loop over the rest (grid-stride)

// Launches `kernel` over n items on the stream, one thread per item up to kMaxBlocks blocks; a launch
// error is reported with the kernel's `name`.
template <class... Params, class... Args>
void launch(const char* name, void (*kernel)(Params...), int64_t n, Args&&... args) {
  if (n <= 0) return;
  const unsigned blocks = unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  kernel<<<blocks, kThreads, 0, stream()>>>(std::forward<Args>(args)...);
  cuda_check_at(cudaGetLastError(), name, __FILE__, __LINE__);
  debug_sync(name, __FILE__, __LINE__);
}

// The most dynamic shared memory a block may ask for on this device (the opt-in limit: 227 KB on sm_90).
inline int max_shared_bytes() {
  static const int bytes = [] {
    int dev = 0, v = 0;
    cuda_check(cudaGetDevice(&dev));
    cuda_check(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return v;
  }();
  return bytes;
}

// Lets `kernel` take `bytes` of dynamic shared memory (above 48 KB a kernel must be allowed first); remembers the
// largest allowed so far per kernel. Called from the one stream's host thread only.
template <class... P>
void allow_shared(void (*kernel)(P...), size_t bytes) {
  static std::map<const void*, size_t> allowed;
  size_t& done = allowed[reinterpret_cast<const void*>(kernel)];
  if (bytes <= done || bytes <= 48 * 1024) return;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  done = bytes;
}

#define PONDER_GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)

// Element offsets of flat position i (row-major over g's axes) for each of the N operands.
template <int N>
__device__ inline void offsets(const Geometry<N>& g, int64_t i, int64_t (&off)[N]) {
  if (g.ndim == 1) {  // a collapsed (e.g. contiguous) space: no 64-bit division per element
    for (int k = 0; k < N; ++k) off[k] = i * g.stride[k][0];
    return;
  }
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (g.numel <= 0x7fffffff) {  // 32-bit division, several times cheaper than 64-bit on a GPU: most spaces fit
    uint32_t j = uint32_t(i);
    for (int d = g.ndim - 1; d >= 0; --d) {
      const uint32_t s = uint32_t(g.size[d]), q = j / s;
      for (int k = 0; k < N; ++k) off[k] += int64_t(j - q * s) * g.stride[k][d];
      j = q;
    }
    return;
  }
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t q = i / g.size[d], r = i - q * g.size[d];
    i = q;
    for (int k = 0; k < N; ++k) off[k] += r * g.stride[k][d];
  }
}

}  // namespace ponder::cuda
