// Where the host waits for the GPU, and how data crosses without waiting. One stream runs every kernel, copy and
// cuBLAS call, so a wait drains the whole queue and leaves the GPU idle until the host queues more: a training step
// should wait only where it reads a number (its loss, the gradient norm). Every wait goes through wait_stream, which
// counts it (cuda_host_waits() in cuda.h) and, with PONDER_CUDA_TRACE_WAITS=1, prints who waited.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/tensor.h"

namespace ponder::cuda {

// Blocks until the stream has drained; `why` names the caller in traces.
void wait_stream(const char* why);
// wait_stream, then raises the first index error the deferred checks found since the last read (std::out_of_range
// with the CPU kernels' message). Every read of device data to the host goes through here.
void wait_reporting(const char* why);

// Copies n host bytes to dev. Up to kStageBytes go through pinned staging blocks: the bytes are copied there and
// the transfer is queued behind earlier work, so the call returns at once and the caller may reuse its buffer.
// Larger copies wait for the stream.
constexpr size_t kStageBytes = size_t(1) << 20;
void upload(void* dev, const void* host, size_t n);

// Deferred index checks. begin_index_check keeps (op, idx, n) on the host and returns the device word and key
// base the check kernel records a bad position in: atomicMin(word, base + position). The smallest key is the
// earliest check's first bad index, read at the next wait_reporting. Kernels that read through idx skip indices
// outside [0, n) meanwhile. With PONDER_CUDA_SYNC=1 end_index_check waits and reports at once. One host thread
// drives the backend (its one stream): the word is read and reset outside the checks' lock, and the message names
// the index's value as it is at the read (the position is the checked one).
struct IndexCheck {
  unsigned long long* word;
  unsigned long long base;
};
IndexCheck begin_index_check(const char* op, const Tensor& idx, int64_t n);
void end_index_check();

}  // namespace ponder::cuda
