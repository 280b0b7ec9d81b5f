// Wall-time accounting of kernels by kind, for `ponder bench train --profile`: where a training step's time
// goes (GEMM, element-wise, reductions, data movement, allocation). Off by default; when off, a timed scope
// costs one relaxed load. Every call site times one device kernel or one allocation, never a nesting of
// them, so the kinds add up to the time spent inside kernels; a step's wall time minus that sum is the
// framework's own work (shape logic, autograd bookkeeping, the engine). Totals are per thread, like the
// FLOP counters.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ponder::prof {

enum class Kind : uint8_t {
  Matmul,       // GEMM (BLAS or device)
  Elementwise,  // unary, binary, where, tri, fill
  Fused,        // fused row kernels (layer norm and its gradients)
  Reduction,    // sum/max/min, cumsum
  Copy,         // copies, casts, concatenation, index kernels, rng
  Alloc,        // device allocation and release
  Count
};
const char* kind_name(Kind k);

struct Totals {
  std::array<double, size_t(Kind::Count)> seconds{};
  std::array<uint64_t, size_t(Kind::Count)> calls{};
  double total_seconds() const;
  Totals operator-(const Totals& o) const;
  Totals& operator+=(const Totals& o);
};

// Time and calls of one labelled kernel (a label names the kernel within its kind: "mul", "exp", …).
struct LabelTotal {
  std::string label;
  Kind kind;
  double seconds = 0;
  uint64_t calls = 0;
};

bool enabled();
void set_enabled(bool on);
Totals snapshot();  // this thread's totals since it started
// This thread's totals per label since it started, one entry per label text and kind, most time first.
std::vector<LabelTotal> label_snapshot();
// Per-label difference of two label snapshots (labels absent from `before` count from zero), most time first.
std::vector<LabelTotal> label_diff(const std::vector<LabelTotal>& after, const std::vector<LabelTotal>& before);
// `label` must outlive the program (a string literal or a static name table entry); null adds to the kind only.
void add(Kind k, const char* label, double seconds);
// A backend whose kernels finish after their call returns (CUDA) times them on the device and registers how to add
// those times here: snapshot() and label_snapshot() call `flush` first, so they include every kernel queued so far.
void set_pending_flush(void (*flush)());

// Times its own lifetime into `k` (and `label`) when profiling is on.
class Scope {
 public:
  explicit Scope(Kind k, const char* label = nullptr) : kind_(k), label_(label), on_(enabled()) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  ~Scope() {
    if (on_) add(kind_, label_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Kind kind_;
  const char* label_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace ponder::prof
