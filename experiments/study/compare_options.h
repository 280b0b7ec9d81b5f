// The options of a comparison (compare: in a config; docs/method.md §5.4): its methods, seeds, budget, calibration
// and evaluation settings, and the thresholds of its success criteria. What configs hold; experiments/study/compare.h
// runs a comparison under them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "methods/learned.h"
#include "methods/registry.h"
#include "policy/rollout.h"

namespace ponder::cli {

// Thresholds of the success criteria (docs/method.md §6.4; compare.criteria_*), so the report code holds none.
struct Criteria {
  double quality = 0.01;         // bpb within this fraction of uniform-4 …
  double flops = 0.05;           // … at this fraction fewer total FLOPs …
  double alpha = 0.05;           // … with a Holm-corrected non-inferiority p below this
  double difficulty_corr = 0.3;  // oracle K vs difficulty score: Spearman ρ above this
  double policy_rho = 0.6;       // policy decisions vs oracle K: Spearman ρ above this
  double max_tie_share = 0.5;    // oracle analyses are "not testable" when more of its decisions were ties
  // The positive control (ponder control) passes only when its headroom's CI lies above this many bits/byte: an
  // oracle picking K per unit with the labels gains a little on any model (a 20-step model passed a bare "> 0" with
  // +0.0005), so the floor is the size of effect the comparisons are meant to resolve.
  double control_headroom = 0.01;
};

struct CompareOptions {
  // The methods compared, parsed by the registry (methods/registry.h) when the config is read.
  std::vector<methods::MethodSpec> methods = methods::parse_methods(
      {"oracle", "uniform-0", "uniform-1", "uniform-2", "uniform-4", "uniform-8", "random", "entropy", "loss",
       "ttt-loss", "gradnorm", "learned-reinforce"});
  int64_t seeds = 5;
  // Held-out windows per seed; 0 = every window of the split, the same for every seed (seeds then differ only in the
  // methods' own randomness). A count samples that many per seed for a quicker look; reports state the share scored.
  int64_t windows_per_seed = 0;
  int64_t seq_len = 128;
  std::vector<int> step_options = {0, 1, 2, 4, 8};
  int64_t budget_k = 2;            // heuristics and random are matched to uniform-<budget_k>'s measured cost
  int64_t low = 1, high = 4;       // the two levels of calibrated heuristics and of random
  // Cap random, the heuristics and the learned policies at budget_k steps per unit of each sequence
  // (policy::HardBudgetPolicy); uniform and every-K/N schedules are never capped.
  bool hard_budget = false;
  int64_t calib_windows = 8;    // validation windows used to calibrate (and learn.train_windows, to train)
  // What the heuristics are calibrated on and the learned policies trained on: "windows" — compare.seq_len-token
  // windows of the validation split, each read from a fresh state; "streams" (streams mode only) — segments of the
  // validation streams cut as the held-out ones are (stream_max_adapt context, then stream_max_scored tokens), so a
  // policy meets a state carried as far as the one it is evaluated on (calibration_windows below).
  std::string calibrate_from = "windows";
  int64_t oracle_lookahead = 1;    // units after the decision that the oracle's objective includes
  // The μ of the method `oracle` (its objective: loss + μ·inner cost / base cost). 0: the greedy oracle; larger
  // values make it spend less (the frontier's sweep shows how much), e.g. about a budget, for a replay at it.
  double oracle_mu = 0;
  // What the heuristics are calibrated to match: "inner" — uniform-<budget_k>'s inner FLOPs per token; "total" — its
  // total FLOPs, so a heuristic's own overhead (its features, its probes) comes out of its inner budget.
  std::string calibrate_on = "total";
  double gate_alpha = 0.1;  // gate-<score>: the EMA factor α of the decisions and of the threshold's moves
  // Tokens per decision on the TTT-layer path (a multiple of model.mini_batch; 0: one mini-batch). With more, every
  // method decides one K per chunk of that many tokens, all of its mini-batches run with it: the granularity at
  // which the published gate decides. `ponder adapt` decides per adapt.chunk instead.
  int64_t unit_tokens = 0;
  std::vector<double> frontier_mus = {0.0, 0.02, 0.05, 0.1, 0.2, 0.5};  // oracle-budget sweep
  // Extra oracle runs after the sweep, each a μ bisected (in log space) between the sweep points that straddle
  // uniform-<budget_k>'s total FLOPs, so the oracle's headroom is measured at (nearly) the budget.
  int64_t oracle_bisect = 2;
  // Score the held-out streams (every held-out document or repository, each read whole) instead of sampled windows:
  // every seed then sees every stream, and seeds differ only in the methods' own randomness. Caps as streams: in
  // the config (data::cap_stream); results say which fraction of the split was scored.
  bool streams = false;
  int64_t stream_max_adapt = 0, stream_max_scored = 0, stream_max_segments = 0;  // data::segment_stream
  // Streams mode: the state reset at every document's start (data::split_at_documents: each file of a repository read
  // alone after the byte before it; the same tokens scored), instead of carried across the stream's files.
  bool stream_reset = false;
  policy::RolloutOptions rollout;
  methods::LearnOptions learn;  // learned-reinforce, learned-ppo-pid, pondernet
  Criteria criteria;
};

}  // namespace ponder::cli
