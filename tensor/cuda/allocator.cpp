#include "tensor/cuda/allocator.h"

#include <bit>
#include <stdexcept>
#include <string>

namespace ponder::cuda {

constexpr size_t kMinBlock = 256;  // cudaMalloc's own alignment; smaller requests share one bucket

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::bucket_size(size_t n) {
  if (n <= kMinBlock) return kMinBlock;
  const size_t step = (size_t(1) << (std::bit_width(n - 1) - 1)) / 4;  // 2^k < n ≤ 2^(k+1): steps of 2^k/4
  return (n + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t n) {
  const size_t size = bucket_size(n);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= int64_t(size);
    stats_.cache_hits++;
    in_use_[p] = size;
    return p;
  }
  void* p = raw_alloc_(size);
  if (!p) {
    const int64_t cached = stats_.cached_bytes;
    empty_cache_locked();
    p = raw_alloc_(size);
    if (!p)
      throw std::runtime_error("cuda: out of device memory allocating " + std::to_string(size) + " bytes (" +
                               std::to_string(stats_.reserved_bytes) + " bytes in use; " + std::to_string(cached) +
                               " cached bytes were released first)");
  }
  stats_.raw_allocs++;
  stats_.reserved_bytes += int64_t(size);
  in_use_[p] = size;
  return p;
}

void CachingAllocator::release(void* p) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = in_use_.find(p);
  if (it == in_use_.end()) throw std::logic_error("cuda: release of a pointer the allocator did not hand out");
  free_[it->second].push_back(p);
  stats_.cached_bytes += int64_t(it->second);
  in_use_.erase(it);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lk(mu_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  for (auto& [size, blocks] : free_) {
    for (void* p : blocks) raw_free_(p);
    stats_.reserved_bytes -= int64_t(size * blocks.size());
  }
  free_.clear();
  stats_.cached_bytes = 0;
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace ponder::cuda
