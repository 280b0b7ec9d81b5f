// What `ponder adapt` adds to a comparison's outputs: the measures the fast-weight literature reports beside bits/byte.
//   - the share of the SKIP → oracle gap each method recovers, (bpb(uniform-0) − bpb(method)) / (bpb(uniform-0) −
//     bpb(oracle)), with a 95 % bootstrap interval over streams (paired: one resample of streams for all three);
//   - wall-clock seconds per token beside total FLOPs per token, so a reader sees whether skipping an update saves
//     time as well as FLOPs in this engine;
//   - per stream, every method's bits/byte, and how often updating made a stream worse than never updating;
//   - per band of chunks by the base's loss on them, where each method spends and what it buys (adapt_difficulty.h);
//   - the fast weights and inner optimiser that produced them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "experiments/study/adapt_difficulty.h"
#include "experiments/study/adapt_options.h"
#include "experiments/study/compare.h"
#include "stats/rliable.h"

namespace ponder::cli {

struct AdaptMethodRow {
  std::string name;
  double bpb = 0, total_per_token = 0, seconds_per_token = 0, mean_k = 0;
  double gap = NAN, gap_lo = NAN, gap_hi = NAN;  // share of the SKIP → oracle gap recovered, with its interval
};

// Per stream (a repository, or a document): every method's bits/byte, for the failure-mode view.
struct AdaptStreamRow {
  std::string name;
  std::vector<double> bpb;  // one per AdaptSummary::rows, same order
};

struct AdaptSummary {
  std::vector<AdaptMethodRow> rows;
  std::vector<AdaptStreamRow> streams;
  // uniform-K (K ≥ 1) → streams on which taking K updates per chunk scored worse than never updating
  std::vector<std::pair<std::string, int>> hurt;
  double skip_bpb = NAN, oracle_bpb = NAN;
  std::string gap_note;  // why the gap is not reported, when it is not
  DifficultySummary difficulty;  // where each method spends, by the base's loss on each chunk
};

// The share of the SKIP → oracle gap that `m` recovers, (mean SKIP − mean m) / (mean SKIP − mean oracle), over paired
// observations (one model's streams, or the models of a multi-base run), with a 95 % percentile interval from
// resampling them (one resample for the three means).
stats::Interval gap_share_ci(const std::vector<double>& skip, const std::vector<double>& oracle,
                             const std::vector<double>& m);

// Needs uniform-0 and oracle among the methods for the gap; otherwise rows carry NaN and gap_note says why.
AdaptSummary summarize_adapt(const CompareResult& r);
// `adapt` (the config's fast weights and optimiser) and `adapt_summary` (the rows above), for results.json's top
// level; the comparison itself writes `cost_multiples` (each K's measured multiple of the scoring forward).
nlohmann::ordered_json adapt_json(const AdaptSummary& s, const AdaptSection& a);
// The report section; `per_stream` adds the per-stream table (long: one row per repository or problem).
std::string adapt_markdown(const AdaptSummary& s, const AdaptSection& a, bool per_stream = true);

}  // namespace ponder::cli
