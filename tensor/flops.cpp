#include "tensor/flops.h"

namespace ponder {
namespace {
thread_local FlopCounts t_counts;
thread_local Phase t_phase = Phase::Forward;
}  // namespace

uint64_t FlopCounts::phase(Phase p) const {
  uint64_t s = 0;
  for (auto& c : n) s += c[size_t(p)];
  return s;
}

FlopCounts FlopCounts::operator-(const FlopCounts& o) const {
  FlopCounts r;
  for (size_t c = 0; c < n.size(); ++c)
    for (size_t p = 0; p < 2; ++p) r.n[c][p] = n[c][p] - o.n[c][p];
  r.bytes_moved = bytes_moved - o.bytes_moved;
  return r;
}

FlopCounts& FlopCounts::operator+=(const FlopCounts& o) {
  for (size_t c = 0; c < n.size(); ++c)
    for (size_t p = 0; p < 2; ++p) n[c][p] += o.n[c][p];
  bytes_moved += o.bytes_moved;
  return *this;
}

std::string FlopCounts::str() const {
  return "matmul " + std::to_string(category(FlopCat::Matmul)) + ", elementwise " +
         std::to_string(category(FlopCat::Elementwise)) + ", reduction " +
         std::to_string(category(FlopCat::Reduction)) + " (forward " + std::to_string(phase(Phase::Forward)) +
         ", backward " + std::to_string(phase(Phase::Backward)) + ")";
}

namespace flops {
void add(FlopCat c, uint64_t count) { t_counts.n[size_t(c)][size_t(t_phase)] += count; }
void add_bytes(uint64_t bytes) { t_counts.bytes_moved += bytes; }
FlopCounts snapshot() { return t_counts; }
void absorb(const FlopCounts& c) { t_counts += c; }
Phase phase() { return t_phase; }
PhaseGuard::PhaseGuard(Phase p) : prev_(t_phase) { t_phase = p; }
PhaseGuard::~PhaseGuard() { t_phase = prev_; }
}  // namespace flops

FlopIsolate::~FlopIsolate() { t_counts = saved_; }

}  // namespace ponder
