// Step schedules: how many inner gradient steps each unit (mini-batch) of each TTT layer gets.
// The layer asks the schedule unit by unit as its scan proceeds, so a schedule (a policy) can only
// use what is known at that point.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/flops.h"

namespace ponder::ttt {

// What the layer knows when it asks for a unit's step count.
struct UnitInfo {
  int layer = 0;        // index of the TTT layer in the model
  int64_t unit = 0;     // index of the unit in the sequence
  int64_t start = 0;    // first token of the unit
  int64_t length = 0;   // tokens in the unit
};

class StepSchedule {
 public:
  virtual ~StepSchedule() = default;
  virtual int steps(const UnitInfo& u) = 0;
  // True when steps() depends on the unit and the schedule's own draws only, never on what the scan computed so
  // far: the layer may then ask for a whole chunk's units before running them (and run them as one op).
  virtual bool decides_ahead() const { return false; }
};

// K for every unit.
class UniformSchedule final : public StepSchedule {
 public:
  explicit UniformSchedule(int k) : k_(k) {}
  int steps(const UnitInfo&) override { return k_; }
  bool decides_ahead() const override { return true; }
 private:
  int k_;
};

// An explicit list per unit (shared by every layer); units past the end get the last value.
class FixedSchedule final : public StepSchedule {
 public:
  explicit FixedSchedule(std::vector<int> ks) : ks_(std::move(ks)) {}
  int steps(const UnitInfo& u) override {
    if (ks_.empty()) return 1;
    return ks_[size_t(std::min<int64_t>(u.unit, int64_t(ks_.size()) - 1))];
  }
  bool decides_ahead() const override { return true; }
 private:
  std::vector<int> ks_;
};

// FLOPs the layer spent on one unit, by phase (from the engine's counters).
struct UnitCost {
  int layer = 0;
  int64_t unit = 0;
  int steps = 0;
  uint64_t inner_forward = 0;  // inner-model forward passes that feed inner gradients
  uint64_t inner_grad = 0;     // inner gradients (backward of the inner loss, or its closed form)
  uint64_t update = 0;         // W ← W − g
  uint64_t output = 0;         // the unit's query path: XQ through the (updated) inner model
  uint64_t total() const { return inner_forward + inner_grad + update + output; }
};

}  // namespace ponder::ttt
