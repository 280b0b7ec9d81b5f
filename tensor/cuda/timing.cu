// `--profile` on the GPU (tensor/profile.h). A kernel launch returns before the kernel runs, so host clocks
// around it measure the launch, not the kernel. Here each backend call is bracketed by two CUDA events on the
// stream, and the time between them is added to the profile when the profile is read (or when many are pending):
// the kinds then sum to the time the GPU spent in kernels, and the rest of a step's wall time is time the GPU
// waited for the host (launches, allocation, autograd bookkeeping).
#include <mutex>
#include <vector>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/timing.h"

namespace ponder::cuda {
namespace {

constexpr size_t kMaxPending = 4096;  // events in flight before a flush waits for them

struct Timed {
  prof::Kind kind;
  const char* label;
  cudaEvent_t start, end;
};

std::mutex g_mu;
std::vector<Timed> g_pending;
std::vector<cudaEvent_t> g_spare;

cudaEvent_t take_event() {
  if (!g_spare.empty()) {
    cudaEvent_t e = g_spare.back();
    g_spare.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  cuda_check(cudaEventCreate(&e));
  return e;
}

void flush_locked() {
  if (g_pending.empty()) return;
  cuda_check(cudaEventSynchronize(g_pending.back().end));
  for (const Timed& t : g_pending) {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, t.start, t.end));
    prof::add(t.kind, t.label, double(ms) * 1e-3);
    g_spare.push_back(t.start);
    g_spare.push_back(t.end);
  }
  g_pending.clear();
}

}  // namespace

void flush_kernel_times() {
  const std::lock_guard<std::mutex> lk(g_mu);
  flush_locked();
}

uint64_t kernel_timer_start() {
  const std::lock_guard<std::mutex> lk(g_mu);
  cudaEvent_t start = take_event();
  cuda_check(cudaEventRecord(start, stream()));
  return uint64_t(reinterpret_cast<uintptr_t>(start));
}

void kernel_timer_stop(uint64_t token, prof::Kind kind, const char* label) {
  cudaEvent_t start = reinterpret_cast<cudaEvent_t>(uintptr_t(token));
  const std::lock_guard<std::mutex> lk(g_mu);
  cudaEvent_t end = take_event();
  // Called from a destructor, so it must not throw: a failed record leaves this call out of the profile.
  if (cudaEventRecord(end, stream()) != cudaSuccess) {
    g_spare.push_back(start);
    g_spare.push_back(end);
    return;
  }
  g_pending.push_back({kind, label, start, end});
  if (g_pending.size() >= kMaxPending) flush_locked();
}

}  // namespace ponder::cuda
