// Device-side timing of backend calls for `--profile` (tensor/cuda/timing.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "tensor/profile.h"

namespace ponder::cuda {

// The CUDA backend's KernelClock (tensor/backend.h), when profiling is on: start records an event on the stream and
// returns it as the token; stop records a second one after the GPU work queued since, and files the time between
// them under `kind` and `label` (a literal or a static name) when the profile is read.
uint64_t kernel_timer_start();
void kernel_timer_stop(uint64_t token, prof::Kind kind, const char* label);

// Waits for the timed work queued so far and adds its times to the profile (registered with
// prof::set_pending_flush by cuda_init).
void flush_kernel_times();

}  // namespace ponder::cuda
