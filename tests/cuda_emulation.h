// How tests/test_cuda.cpp runs the CUDA kernels' phases on the CPU: a launch's blocks one after another, each block's
// phases in turn, and a phase's threads one after another, the phase boundary standing for the block barrier.
//
// On a GPU a phase's threads (and a launch's blocks) run at once, in no fixed order, so a phase must not read what
// another thread writes in the same phase, nor two threads write one place. The emulation can run the threads and
// blocks in three orders; a kernel whose phases keep that rule gives the same bits in all three, and one that breaks
// it (a missing barrier, an index that lands in another thread's outputs) gives different bits in some order.
// `drop_barrier` plants that bug: the barrier after one phase is left out, each thread running it and the next one
// back to back, so the tests can show the order check catches it.
#pragma once
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace ponder::emu {

enum class Order { Ascending, Descending, Shuffled };
inline const char* order_name(Order o) {
  return o == Order::Ascending ? "ascending" : o == Order::Descending ? "descending" : "shuffled";
}

struct Emulation {
  Order order = Order::Ascending;
  int drop_barrier = -1;  // ≥ 0: the barrier after this phase is left out (a planted race)
};
// The emulation's settings for the test in progress (set through Scoped).
inline Emulation& current() {
  static Emulation e;
  return e;
}
// Sets the emulation for one scope and restores the previous one after it.
struct Scoped {
  Emulation saved;
  explicit Scoped(Emulation e) : saved(current()) { current() = e; }
  ~Scoped() { current() = saved; }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;
};

// 0 … n − 1 in the emulation's order. Shuffled: a Fisher–Yates shuffle driven by a fixed 64-bit LCG, the same
// permutation on every platform.
inline std::vector<int64_t> in_order(int64_t n) {
  std::vector<int64_t> v(size_t(n > 0 ? n : 0));
  std::iota(v.begin(), v.end(), int64_t(0));
  if (current().order == Order::Descending) return {v.rbegin(), v.rend()};
  if (current().order == Order::Shuffled) {
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int64_t i = n - 1; i > 0; --i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(v[size_t(i)], v[size_t((s >> 33) % uint64_t(i + 1))]);
    }
  }
  return v;
}

// One block: phases 0 … n − 1, each run by threads 0 … nt − 1 in the emulation's order; phase(ph, tid).
template <class Phase>
void run_block(int n, int nt, Phase phase) {
  const std::vector<int64_t> order = in_order(nt);
  for (int ph = 0; ph < n; ++ph) {
    const bool merged = ph == current().drop_barrier && ph + 1 < n;
    for (int64_t tid : order) {
      phase(ph, int(tid));
      if (merged) phase(ph + 1, int(tid));
    }
    ph += merged ? 1 : 0;
  }
}

// FNV-1a over the bytes of values, continuing from h (kDigestStart for a new one): the fingerprint the order check
// compares.
constexpr uint64_t kDigestStart = 0xcbf29ce484222325ull;
template <class T>
uint64_t digest(const std::vector<T>& values, uint64_t h = kDigestStart) {
  for (const T& x : values) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &x, sizeof(T));
    for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  }
  return h;
}

}  // namespace ponder::emu
