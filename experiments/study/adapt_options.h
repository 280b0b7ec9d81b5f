// The adapt: section of a run config (experiments/model/config.h reads it): the fast-weight path (`ponder adapt`,
// policy/adapt_rollout.h). Here, below the config, so that the fast-weight reports (adapt_report.h) need not include
// the config.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "policy/adapt_rollout.h"
#include "methods/registry.h"

namespace ponder::cli {

// What the fast weights are, how they are stepped, the chunk a decision covers, and the methods compared on it. The
// compare: section still sets seeds, the oracle's sweep and lookahead, calibration windows and the report's criteria.
struct AdaptSection {
  policy::AdaptConfig rollouts;  // fast weights (kind, rank, targets, …), inner optimiser, seed
  int64_t chunk = 256;           // tokens per chunk: scored, then updated on (a multiple of model.mini_batch)
  std::vector<methods::MethodSpec> methods = methods::parse_methods(
      {"oracle", "uniform-0", "uniform-1", "uniform-2", "uniform-4", "every-2/2", "random", "loss", "entropy"});
  std::vector<int> step_options = {0, 1, 2, 4};  // SKIP, UPDATE_1, UPDATE_2, UPDATE_4
  int64_t budget_k = 1;          // the hard budget: uniform-<budget_k>'s measured cost
  int64_t low = 0, high = 2;     // the two levels of random and of the calibrated heuristics
  bool hard_budget = true;       // cap adaptive methods at budget_k updates per chunk of each stream
  int64_t calib_len = 2048;      // tokens of each calibration window (a multiple of chunk)
  int64_t seeds = 1;             // seeds of the methods' own randomness (every seed reads every stream)
  // Which held-out streams are read and scored: "test" (the result) or "valid" (for choosing the inner optimiser,
  // adapt.lr and the like, without looking at the test split).
  std::string split = "test";
};

}  // namespace ponder::cli
