// A caching allocator over a raw device allocator (cudaMalloc/cudaFree for the CUDA backend; the tests
// plug in malloc/free). cudaMalloc and cudaFree synchronise the device and cost far more than a kernel,
// and a training step frees and re-requests the same sizes every time, so freed blocks wait in
// free lists by size bucket and are handed out again. Reuse right after release is safe because the
// CUDA backend runs everything on one stream: a kernel that still reads a freed block is queued before
// any kernel that writes the block's next owner.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ponder::cuda {

class CachingAllocator {
 public:
  using RawAlloc = std::function<void*(size_t)>;  // returns nullptr when the device is out of memory
  using RawFree = std::function<void(void*)>;

  struct Stats {
    int64_t reserved_bytes = 0;  // held from the raw allocator
    int64_t cached_bytes = 0;    // of which free, in the lists
    int64_t raw_allocs = 0;
    int64_t cache_hits = 0;
  };

  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free);
  ~CachingAllocator();  // returns cached blocks; blocks still in use are the owners' leak
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least n bytes. When the raw allocator fails, the cache is emptied and the request
  // retried once before throwing std::runtime_error.
  void* allocate(size_t n);
  // Puts a block from allocate() back in its bucket's list; throws std::logic_error for foreign pointers.
  void release(void* p);
  void empty_cache();
  Stats stats() const;

  // Requests are rounded up to one of four sizes per power of two (at least 256 bytes), so at most a
  // quarter of a block is wasted while nearby sizes share a bucket.
  static size_t bucket_size(size_t n);

 private:
  void empty_cache_locked();

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;    // bucket size → free blocks
  std::unordered_map<void*, size_t> in_use_;     // block → bucket size
  Stats stats_;
};

}  // namespace ponder::cuda
