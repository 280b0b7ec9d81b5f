// Reference-counted device memory shared by a tensor and all its views.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace ponder {

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device = Device::CPU;
  // Bumped by every in-place write; autograd compares it against the value seen when a tensor was
  // saved for backward, so a modified saved tensor is caught instead of silently giving wrong grads.
  std::atomic<uint32_t> version{0};

  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// Live and peak bytes held by storages of a device (the leak tests watch these).
struct MemoryStats {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t allocations = 0;
};
MemoryStats memory_stats(Device d);
void reset_peak_memory(Device d);

}  // namespace ponder
