// What a comparison produces, per method and seed, for its analyses and reports (experiments/study/analysis.h,
// report.h): costs measured by the engine's counters, bits per byte per window, K per unit, the oracle's units and
// the frontier of the oracle's budget sweep.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "methods/registry.h"
#include "rl/learn_util.h"

namespace ponder::cli {

struct SeedResult {
  int seed = 0;
  double loss = 0, bpb = 0;
  double base_per_token = 0, inner_per_token = 0, overhead_per_token = 0;
  double total_per_token() const { return base_per_token + inner_per_token + overhead_per_token; }
  double mean_k = 0;
  double seconds_per_token = 0;
  std::vector<double> window_bpb;  // per window (or stream), for paired statistics
  double scored_tokens = 0;        // predictions scored (windows: every one; streams: the evaluation parts)
};

struct MethodResult {
  std::string name;
  methods::MethodKind kind = methods::MethodKind::Uniform;  // results.json names it (methods::kind_name)
  std::string detail;  // e.g. the calibrated threshold
  std::vector<SeedResult> seeds;
  std::vector<int64_t> k_hist;  // count of units per value of CompareResult::k_options, all seeds
  std::vector<int> passage_k;   // K per unit of the first window of seed 0 (the per-token view)
  std::vector<double> passage_loss;  // nats per prediction of that window (position t predicts token t + 1)
  std::vector<int> unit_k;      // K of every unit, seeds and windows in order (aligned across methods of one unit size)
  std::vector<double> unit_loss;  // mean loss (nats) of each of those units as it was scored, aligned with unit_k
  int64_t unit_tokens = 0;      // tokens per decision unit
  std::vector<rl::IterationStats> curve;  // learned methods: the training curve
  double train_seconds = 0;
  // Heuristics: the inner FLOPs per token their calibration aimed at and what the fitted threshold spent on the
  // calibration windows (both 0 for methods that are not calibrated).
  double calib_target = 0, calib_achieved = 0;
};

struct FrontierPoint {
  double mu = 0, bpb = 0, inner_per_token = 0, base_per_token = 0, mean_k = 0;
  std::vector<double> window_bpb;  // per window (or stream) of seed 0, paired with every method's seed 0
};

// Oracle K and the difficulty scores seen when it was chosen, per unit (oracle analysis).
struct OracleUnits {
  std::vector<double> k, loss, entropy, ttt_loss, grad_norm;
  std::vector<double> tied;  // 1 where the oracle's K was decided by a tie between options
  std::vector<double> first_token;  // the unit's first input token: lets an analysis tell kinds of unit apart
  // Streams mode reads the same units with every seed, so seed 0's units stand for the others, repeated once per
  // seed to line up with the methods' per-seed units. A statistic over units (a p-value, a count) takes distinct().
  int64_t copies = 1;
  OracleUnits distinct() const;  // the first 1/copies of every vector
};


struct CompareResult {
  std::vector<MethodResult> methods;
  std::vector<FrontierPoint> frontier;
  OracleUnits oracle_units;
  double budget_inner_per_token = 0;    // what uniform-<budget_k> spends (calibration split)
  int64_t calibration_windows = 0, calibration_tokens = 0;  // what it was measured and calibrated on
  std::vector<double> k_cost_multiple;  // measured (base + inner(K)) / base for each step option
  std::vector<int> k_options;           // step options ∪ every K a method used, sorted: the k_hist columns
  std::vector<int32_t> passage_tokens;  // the first window of seed 0: input tokens
  // Per TTT layer, the token factor of η's last row, relu(1/b + token_idx[b−1]): it scales every
  // carry step, so where it is 0 the state handed to later units never moves and K ≥ 1 are alike.
  std::vector<double> carry_token_factor;
  int64_t mini_batch = 16;
  double seconds = 0;
  // Streams mode: the streams scored, their scored tokens, and the scored tokens of the whole split (no caps).
  std::vector<std::string> stream_names;
  int64_t eval_tokens = 0, split_tokens = 0;  // windows mode: over the distinct windows scored and all of the split's
  // Streams mode: segments read (with CompareOptions::stream_reset, the documents read alone), and the unscored tokens
  // read before their scored parts (context, e.g. adaptation files; token 0, which has no prediction, not counted).
  int64_t segments = 0, context_tokens = 0;
  bool stream_reset = false;  // streams mode: whether the state was reset at every document
  int64_t windows_per_seed = 0;                // windows mode: windows scored per seed (all of them for 0)
};

}  // namespace ponder::cli
