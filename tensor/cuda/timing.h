// Device-side timing of backend calls for `--profile` (tensor/cuda/timing.cu).
#pragma once
#include <cuda_runtime.h>

#include "tensor/profile.h"

namespace ponder::cuda {

// Times the GPU work queued during its lifetime into prof kind `kind` and `label` (a literal or a static name),
// when profiling is on; one relaxed load when it is off.
class KernelTimer {
 public:
  KernelTimer(prof::Kind kind, const char* label);
  ~KernelTimer();
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

 private:
  prof::Kind kind_;
  const char* label_;
  bool on_;
  cudaEvent_t start_ = nullptr;
};

// Waits for the timed work queued so far and adds its times to the profile (registered with
// prof::set_pending_flush by cuda_init).
void flush_kernel_times();

}  // namespace ponder::cuda
