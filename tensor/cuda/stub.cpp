// Builds without CUDA (nvcc not found at configure time, or -Dcuda=disabled): the same API, reporting
// that this binary has no CUDA backend.
#include <stdexcept>

#include "tensor/cuda/cuda.h"

namespace ponder {
namespace {

const char* const kNoCuda = "this build has no CUDA backend (nvcc was not found when it was configured, or it was "
                            "configured with -Dcuda=disabled)";

[[noreturn]] void no_cuda() { throw std::runtime_error(kNoCuda); }

}  // namespace

bool cuda_built() { return false; }

bool cuda_init(std::string* why_not) {
  if (why_not) *why_not = kNoCuda;
  return false;
}

void cuda_synchronize() { no_cuda(); }
int64_t cuda_host_waits() { no_cuda(); }
CudaDeviceInfo cuda_device_info() { no_cuda(); }
CudaAllocatorStats cuda_allocator_stats() { no_cuda(); }
void cuda_empty_cache() { no_cuda(); }
void cuda_gemm_direct(const Tensor&, const Tensor&, const Tensor&) { no_cuda(); }
void cuda_memcpy(const Tensor&, const Tensor&) { no_cuda(); }
void cuda_set_dual_options(const CudaDualOptions&) { no_cuda(); }
CudaDualOptions cuda_dual_options() { no_cuda(); }

}  // namespace ponder
