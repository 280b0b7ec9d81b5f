// Percentile calibration of difficulty heuristics on a validation split (docs/method.md §4.3).
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "policy/rollout.h"

namespace ponder::policy {

using Window = std::pair<Tensor, Tensor>;  // input, target: (1, N)

struct CostSummary {
  double inner_per_token = 0;     // inner TTT FLOPs per token
  double base_per_token = 0;      // base forward FLOPs per token
  double overhead_per_token = 0;  // policy overhead FLOPs per token
  double mean_k = 0;
  double loss = 0;                // mean next-token loss, nats
};

// Told the share of the windows' tokens read so far after each window (a whole held-out split is one long call).
using WindowProgress = std::function<void(double fraction)>;

// Runs `policy` over the windows (sequence seed = seed + window index) and sums the episodes in window order. Windows
// run side by side (opt.jobs, policy/episodes.h), each further thread with its own policy.clone().
CostSummary run_windows(const Rollouts& rollouts, const std::vector<Window>& windows, Policy& policy,
                        const RolloutOptions& opt, uint64_t seed, std::vector<Episode>* episodes = nullptr,
                        const WindowProgress& progress = {});
// The same with the TTT layers' inner steps (LayerRollouts).
CostSummary run_windows(const ttt::Model& model, const std::vector<Window>& windows, Policy& policy,
                        const RolloutOptions& opt, uint64_t seed, std::vector<Episode>* episodes = nullptr);

struct Calibration {
  double threshold = 0;      // score above it → the high level
  double fraction_high = 0;  // share of scored units sent to the high level on the calibration split
  double target = 0;         // target inner FLOPs per token
  double achieved = 0;       // what the calibrated policy spent on the calibration split
  int iterations = 0;
};

// Fits the threshold of a two-level policy (low below it, high above, `fallback` for the unscored
// first unit) so its mean inner FLOPs per token on `windows` hits `target`. The score distribution
// depends on the decisions (they change the model's state), so the fit is refined by re-running the
// policy until it lands within `tol` (relative) or `max_iter` runs are spent; the best run is kept.
Calibration calibrate_budget(const Rollouts& rollouts, const std::vector<Window>& windows, Score score, int low,
                             int high, int fallback, double target, const RolloutOptions& opt, double tol = 0.005,
                             int max_iter = 10);
Calibration calibrate_budget(const ttt::Model& model, const std::vector<Window>& windows, Score score, int low,
                             int high, int fallback, double target, const RolloutOptions& opt, double tol = 0.005,
                             int max_iter = 10);

// Quantile thresholds of `scores` splitting them into the given fractions (which sum to 1), for a
// target K distribution (default quartiles → K = 1, 2, 4, 8).
std::vector<double> quantile_thresholds(std::vector<double> scores, const std::vector<double>& fractions);

}  // namespace ponder::policy
