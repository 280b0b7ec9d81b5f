// The CPU backend: 64-byte aligned host memory, kept in a size-keyed cache when freed (allocation and release timed
// by tensor/profile.h's profiling), and the kernels of tensor/cpu/ registered with the wall clock to time them.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

namespace ponder {
namespace {

using prof::Kind;

// Freed blocks by exact (64-byte rounded) size. A training step frees and requests the same sizes every
// step; handing them out again skips malloc's bookkeeping and, for blocks above malloc's mmap threshold,
// the page faults and zeroing of fresh pages. Blocks beyond the limit go back to the system.
class BlockCache {
 public:
  void* get(size_t size) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }
  // Never throws: it runs on the free path, inside destructors (a graph torn down when memory has run out). Where
  // the cache's own bookkeeping cannot grow, the block goes back to the system instead.
  bool put(void* p, size_t size) noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    if (cached_ + size > limit_) return false;
    try {
      free_[size].push_back(p);
    } catch (...) {
      return false;
    }
    cached_ += size;
    return true;
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  void set_limit(size_t bytes) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      limit_ = bytes;
      if (cached_ <= limit_) return;
    }
    release();
  }
  size_t cached() const {
    std::lock_guard<std::mutex> lk(mu_);
    return cached_;
  }
  ~BlockCache() { release(); }

 private:
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t limit_ = size_t(1) << 30;
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;  // never destroyed: storages may outlive static destructors
  return *cache;
}

size_t block_size(size_t nbytes) { return (nbytes + 63) / 64 * 64; }

}  // namespace

// The CPU's counter-based draws (tensor/rng.h): element i reads draw counter + i (normal: two draws per element).
namespace cpu {
void rng_uniform(const Tensor& out, uint64_t seed, uint64_t counter, double lo, double hi) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "rng_uniform", [&] {
    scalar_t* p = out.data<scalar_t>();
    const int64_t n = out.numel();
_Pragma("omp parallel for schedule(static) if (n >= cpu::kParallelMin)")
    for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(lo + (hi - lo) * rng_uniform_at(seed, counter + uint64_t(i)));
  });
}
void rng_normal(const Tensor& out, uint64_t seed, uint64_t counter, double mean, double std) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "rng_normal", [&] {
    scalar_t* p = out.data<scalar_t>();
    const int64_t n = out.numel();
_Pragma("omp parallel for schedule(static) if (n >= cpu::kParallelMin)")
    for (int64_t i = 0; i < n; ++i) {  // Box–Muller on two draws per element
      double u1 = 1.0 - rng_uniform_at(seed, counter + 2 * uint64_t(i));
      double u2 = rng_uniform_at(seed, counter + 2 * uint64_t(i) + 1);
      p[i] = scalar_t(mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  });
}
}  // namespace cpu

namespace {

// Every kernel of tensor/kernels.def, fused ones included (each checked against its composition in
// tests/test_ops.cpp), and TTT-Linear's scan; not TTT-MLP's: the TTT-Linear one made no measurable difference on
// the CPU, so the MLP has none and its units run one by one (docs/engine.md).
constexpr Kernels cpu_kernels() {
  Kernels k;
#define PONDER_KERNEL(ret, name, ...) k.name = cpu::name;
#define PONDER_SCAN_KERNEL(...)
#include "tensor/kernels.def"
  k.ttt_linear_scan = cpu::ttt_linear_scan;
  k.ttt_linear_scan_backward = cpu::ttt_linear_scan_backward;
  return k;
}

// The wall clock around each call: a CPU kernel has finished when it returns.
uint64_t wall_start() { return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()); }
void wall_stop(uint64_t token, Kind kind, const char* label) {
  const auto t0 = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(token));
  prof::add(kind, label, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

class CpuBackend final : public Backend {
 public:
  constexpr CpuBackend() : Backend(cpu_kernels(), {wall_start, wall_stop}, true) {}
  void* alloc(size_t nbytes) override {
    prof::Scope t(Kind::Alloc, "alloc");
    const size_t size = block_size(nbytes);
    if (void* p = block_cache().get(size)) return p;
    void* p = std::aligned_alloc(64, size);
    if (!p) {  // memory held in the cache may be what is missing
      block_cache().release();
      p = std::aligned_alloc(64, size);
    }
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free(void* p, size_t nbytes) override {
    prof::Scope t(Kind::Alloc, "free");
    if (!block_cache().put(p, block_size(nbytes))) std::free(p);
  }
  void to_host(void* host, const void* dev, size_t n) override { std::memcpy(host, dev, n); }
  void from_host(void* dev, const void* host, size_t n) override { std::memcpy(dev, host, n); }
};

constinit CpuBackend g_cpu;
Backend* g_backends[2] = {&g_cpu, nullptr};

}  // namespace

Backend& backend(Device d) {
  Backend* b = g_backends[size_t(d)];
  if (!b)
    throw std::runtime_error(std::string("device ") + device_name(d) +
                             " is not available (this build has no backend for it, or no device was found)");
  return *b;
}

namespace cpu {
void set_alloc_cache_limit(size_t bytes) { block_cache().set_limit(bytes); }
size_t alloc_cache_bytes() { return block_cache().cached(); }
void release_alloc_cache() { block_cache().release(); }
}  // namespace cpu

bool backend_available(Device d) { return g_backends[size_t(d)] != nullptr; }
void register_backend(Device d, Backend* b) { g_backends[size_t(d)] = b; }

}  // namespace ponder
