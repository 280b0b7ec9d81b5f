// replay:FILE[+FILE...] (policy/methods.h): the K per unit that `ponder oracle` chose on the same streams-mode segments,
// read back from its oracle.json, as a schedule for another model or the same one. With several files (e.g. the
// oracles of every other model), each unit gets the step option nearest their mean K, ties to the smaller: what the
// models' oracles agree on, applied to one model, measures how much of its headroom lies in the text itself.
// replay-shuffled-S:FILE[+FILE...] permutes those K within each segment with seed S: the same steps on the same
// text at the same FLOPs in random places, so replay − replay-shuffled is what the placement alone is worth.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "policy/methods.h"

namespace ponder::cli {

struct Replay {
  std::unique_ptr<policy::Policy> policy;
  std::string detail;  // what it replays, for the report
};

// `unit`: the comparison's decision unit in tokens (each file's must match); `options`: the step options a mean is
// rounded to. A file that is missing, is not a streams-mode oracle.json, or whose segments differ from the first
// file's is an std::invalid_argument naming it.
Replay load_replay(const policy::MethodSpec& m, int64_t unit, const std::vector<int>& options);

// The step option nearest `mean`, ties to the smaller (options sorted or not).
int nearest_option(double mean, const std::vector<int>& options);

}  // namespace ponder::cli
