// The comparison suite (docs/method.md §5.4): every method × seeds on held-out windows, with exact costs
// from the engine's counters. A seed fixes which held-out windows are evaluated and the random
// policy's draws; every method sees the same windows for a seed, so results are paired by window.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "data/tokens.h"
#include "experiments/process/journal.h"
#include "methods/learned.h"
#include "policy/calibrate.h"
#include "methods/registry.h"

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

using CompareProgress = std::function<void(const std::string& what, double done, double total)>;

// The cells of a comparison in the order they are dealt to shards (ponder compare|ablate --shard i/n, or the ranks
// under mpirun): each method but the oracle (its calibration or training with every seed), each seed of the oracle
// (only seed 0 in streams mode, where the others repeat it), each μ of the oracle frontier's sweep (μ = 0 belongs to
// the oracle's seed 0 when the oracle is compared: it is that run). Each is a journal record or a few.
std::vector<std::string> compare_cells(const CompareOptions& opt);

// The cells this process computes: cell j of compare_cells belongs to shard (first + j) mod count, `first` counting
// the cells of the models before this one, so several models deal one list. The whole comparison when count is 1.
struct CellShare {
  int index = 0, count = 1;
  int64_t first = 0;
  bool whole() const { return count <= 1; }
  bool owns(int64_t cell) const { return whole() || (first + cell) % count == index; }
};

// With a journal, every finished cell (a method's calibration or training, a method × seed, a frontier point)
// is recorded there, and cells already in it are reused instead of run: a rerun after an interruption picks up
// where the first run stopped and gives the same result.
// `test_streams` is read in streams mode (CompareOptions::streams) and may be null otherwise.
// With a `share` of the cells, only those are computed and journaled, and the result is partial: a later run with
// every shard's records in its journal (ponder merge) computes what needs them all (the frontier's bisection toward
// the budget) and the rest of the comparison from the records.
// `calib_streams` (the validation streams) are read with compare.calibrate_from: streams, and may be null otherwise.
CompareResult run_compare(const ttt::Model& model, const data::TokenStream& calib, const data::TokenStream& test,
                          const CompareOptions& opt, const CompareProgress& progress = {}, Journal* journal = nullptr,
                          const std::vector<data::StreamTokens>* test_streams = nullptr, const CellShare& share = {},
                          const std::vector<data::StreamTokens>* calib_streams = nullptr);
// The same comparison with K spent by `rollouts`: run_compare(model, …) is this with the TTT layers' inner steps
// (policy::LayerRollouts); the fast-weight path (ponder adapt) passes its chunk updates (policy/adapt_rollout.h).
CompareResult run_compare(const policy::Rollouts& rollouts, const data::TokenStream& calib,
                          const data::TokenStream& test, const CompareOptions& opt,
                          const CompareProgress& progress = {}, Journal* journal = nullptr,
                          const std::vector<data::StreamTokens>* test_streams = nullptr, const CellShare& share = {},
                          const std::vector<data::StreamTokens>* calib_streams = nullptr);

// What streams mode reads of stream `st`, in reading order: its segments (data::segment_stream with the stream_max_*
// caps), or with stream_reset every document of them alone (data::split_at_documents). Those with a scored token are
// what a comparison scores.
std::vector<data::StreamTokens> stream_reads(const data::StreamTokens& st, const CompareOptions& opt);

// `count` windows to calibrate or train on, drawn with `seed`: compare.calibrate_from windows — seq_len-token windows of
// `calib`; streams — segments of `calib_streams` cut as the held-out streams are (every segment of each stream, then
// `count` of them, or all when there are fewer), each one (1, N) window whose N predictions are every token read
// (context and scored part alike). N is one length for all (the learners batch episodes unit by unit): the longest
// multiple of `unit` that half the segments reach; shorter segments are left out, longer ones keep their last N + 1
// tokens. Throws when the streams are missing, yield no whole unit, or share a name with `test_streams` (calibrating
// on what is scored).
std::vector<policy::Window> calibration_windows(const data::TokenStream& calib,
                                                const std::vector<data::StreamTokens>* calib_streams,
                                                const std::vector<data::StreamTokens>* test_streams,
                                                const CompareOptions& opt, int64_t count, uint64_t seed, int64_t unit);

}  // namespace ponder::cli
