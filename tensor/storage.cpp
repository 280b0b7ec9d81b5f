#include "tensor/storage.h"

#include <mutex>

#include "tensor/backend.h"

namespace ponder {
namespace {
std::mutex g_mem_mu;
MemoryStats g_mem[2];
}  // namespace

Storage::Storage(size_t n, Device d) : nbytes(n), device(d) {
  data = n ? backend(d).alloc(n) : nullptr;
  std::lock_guard<std::mutex> lk(g_mem_mu);
  MemoryStats& m = g_mem[size_t(d)];
  m.live_bytes += int64_t(n);
  m.allocations += 1;
  if (m.live_bytes > m.peak_bytes) m.peak_bytes = m.live_bytes;
}

Storage::~Storage() {
  if (data) backend(device).free(data, nbytes);
  std::lock_guard<std::mutex> lk(g_mem_mu);
  g_mem[size_t(device)].live_bytes -= int64_t(nbytes);
}

MemoryStats memory_stats(Device d) {
  std::lock_guard<std::mutex> lk(g_mem_mu);
  return g_mem[size_t(d)];
}

void reset_peak_memory(Device d) {
  std::lock_guard<std::mutex> lk(g_mem_mu);
  g_mem[size_t(d)].peak_bytes = g_mem[size_t(d)].live_bytes;
}

}  // namespace ponder
