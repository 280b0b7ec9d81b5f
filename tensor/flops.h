// Exact FLOP accounting. Every kernel reports what it computed; callers read counters through
// scopes. Counting rules (documented once, here):
//   matmul [m×k]·[k×n]             2·m·k·n per batch element
//   element-wise op                1 per output element (add, exp, gelu, where, … alike)
//   reduction (sum, max, cumsum)   1 per input element
//   data movement (copy, gather,
//   concat, views, index ops)      0 (counted as bytes moved, not FLOPs)
// Work done while the autograd engine runs a backward pass is counted in the backward phase.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace ponder {

enum class FlopCat : uint8_t { Matmul, Elementwise, Reduction, Count };
enum class Phase : uint8_t { Forward, Backward, Count };

struct FlopCounts {
  std::array<std::array<uint64_t, 2>, 3> n{};  // [category][phase]
  uint64_t bytes_moved = 0;

  uint64_t get(FlopCat c, Phase p) const { return n[size_t(c)][size_t(p)]; }
  uint64_t category(FlopCat c) const { return get(c, Phase::Forward) + get(c, Phase::Backward); }
  uint64_t phase(Phase p) const;
  uint64_t total() const { return phase(Phase::Forward) + phase(Phase::Backward); }
  FlopCounts operator-(const FlopCounts& o) const;
  FlopCounts& operator+=(const FlopCounts& o);
  std::string str() const;
};

namespace flops {
void add(FlopCat c, uint64_t count);
void add_bytes(uint64_t bytes);
// Totals since the thread started; counters are per thread (kernels are launched from one thread).
FlopCounts snapshot();
// Adds counts made on other threads to this thread's totals (work a caller farmed out to a thread team, such as
// episodes run side by side: policy/episodes.h), so the caller's scopes see it.
void absorb(const FlopCounts& c);
Phase phase();
// RAII: sets the phase (the engine uses it around backward), restoring the previous one.
class PhaseGuard {
 public:
  explicit PhaseGuard(Phase p);
  ~PhaseGuard();
 private:
  Phase prev_;
};
}  // namespace flops

// Measures exactly the work done between construction and counts(); nested scopes add up because
// each one is a difference of the same monotone totals.
class FlopScope {
 public:
  FlopScope() : start_(flops::snapshot()) {}
  FlopCounts counts() const { return flops::snapshot() - start_; }
 private:
  FlopCounts start_;
};

// RAII: the work done in its lifetime is not counted (this thread's totals are put back as they were), for
// work done only to measure something, such as deriving a fused op's FLOP rule from its composition.
class FlopIsolate {
 public:
  FlopIsolate() : saved_(flops::snapshot()) {}
  ~FlopIsolate();
  FlopIsolate(const FlopIsolate&) = delete;
  FlopIsolate& operator=(const FlopIsolate&) = delete;
 private:
  FlopCounts saved_;
};

}  // namespace ponder
