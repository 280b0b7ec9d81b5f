// replay:FILE[+FILE...] (methods/registry.h): the K per unit that `ponder oracle` chose on the same streams-mode segments,
// read back from its oracle.json, as a schedule for another model or the same one. With several files (e.g. the
// oracles of every other model), each unit gets the step option nearest their mean K, ties to the smaller: what the
// models' oracles agree on, applied to one model, measures how much of its headroom lies in the text itself.
// replay-shuffled-S:FILE[+FILE...] permutes those K within each segment with seed S: the same steps on the same
// text at the same FLOPs in random places, so replay − replay-shuffled is what the placement alone is worth.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "methods/registry.h"

namespace ponder::cli {

struct Replay {
  std::unique_ptr<policy::Policy> policy;
  std::string detail;  // what it replays, for the report
  std::vector<std::vector<int>> first;  // per segment, per unit: the first input token of the text it was made on
  std::string source;  // the first file, for errors
};

// `unit`: the comparison's decision unit in tokens (each file's must match); `options`: the step options a mean is
// rounded to. A file that is missing, is not a streams-mode oracle.json, or whose segments differ from the first
// file's is an std::invalid_argument naming it.
Replay load_replay(const methods::MethodSpec& m, int64_t unit, const std::vector<int>& options);

// Before anything runs: the replay's segments against the comparison's, given each window's input tokens (1, N)
// cut into units of `unit`. A count or a first token that differs is an std::invalid_argument naming the file and
// the unit, so a replay of other text is refused before calibration and the cells, not at its first cell.
void check_replay_text(const Replay& r, const std::vector<std::vector<int64_t>>& inputs, int64_t unit);

// The step option nearest `mean`, ties to the smaller (options sorted or not).
int nearest_option(double mean, const std::vector<int>& options);

}  // namespace ponder::cli
