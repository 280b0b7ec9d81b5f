// "Is the question live here?" — checked before any allocation is compared: the held-out streams are read whole
// (state carried from the first token to the last) under uniform schedules, next to count n-gram models and an
// attention-only model of the same size scored on exactly the same tokens. The report states the carry factor of
// every TTT layer, whether loss falls with position beyond the first mini-batch, whether TTT beats uniform-0
// (no inner learning), and where it stands against the best n-gram.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "experiments/study/compare.h"
#include "experiments/model/training.h"
#include "ttt/stream_eval.h"

namespace ponder::cli {

struct RegimeOptions {
  std::vector<int> ks = {0, 1, 2, 4};  // uniform-K schedules read on the streams
  int64_t chunk = 1024;                // tokens per forward pass
  int64_t max_adapt = 0, max_scored = 0, max_segments = 0;  // data::segment_stream per stream; 0 = whole
  int max_ngram = 5;                   // count n-grams of orders 1 … max_ngram, fitted on the training split
  std::string split = "test";
  int64_t position_docs = 0, position_len = 1024;  // StreamsConfig: loss by position from documents' starts
  // The comparison's inner-step mode: in prefix mode K ≥ 1 also change a unit's own outputs (the dual path reads
  // it in closed form; docs/ttt.md §3.3).
  ttt::StepMode mode = ttt::StepMode::Carry;
  // uniform-K also read with the state reset at every document's start (ttt::StreamEvalOptions::reset_at_documents)
  // on the same scored tokens; skipped when every stream is one document, where a reset changes nothing.
  std::vector<int> reset_ks = {1};
};

// The options the config's streams: section sets (quick, compare, adapt read the streams the same way).
RegimeOptions regime_options(const StreamsConfig& streams);

struct RegimeResult {
  ttt::StepMode mode = ttt::StepMode::Carry;     // how the uniform passes took their inner steps
  std::vector<double> carry_factors;             // per TTT layer
  std::vector<std::pair<int, ttt::StreamEvalResult>> uniform;  // K → result
  std::vector<std::pair<int, ttt::StreamEvalResult>> reset;    // K → result with the state reset at every document
  std::optional<ttt::StreamEvalResult> attention;  // the attention-only baseline, when given
  std::string attention_checkpoint;
  int64_t attention_layers = 0, attention_window = 0, model_layers = 0;  // how the baseline compares in size
  std::map<int, double> ngram_bpb;               // order → bits/byte on the scored tokens
  int64_t eval_tokens = 0;                       // scored tokens (after caps)
  int64_t split_tokens = 0;                      // scored tokens of the whole split (no caps)
  int64_t streams = 0;
  // Where by_position comes from: position_docs = 0, the streams above (every prediction read); otherwise that many
  // held-out documents read alone from their first token, cut to position_len tokens, out of position_candidates
  // documents that long.
  int64_t position_docs = 0, position_len = 0, position_candidates = 0;
  double scored_fraction() const { return split_tokens > 0 ? double(eval_tokens) / double(split_tokens) : 0; }
  const ttt::StreamEvalResult* uniform_k(int k) const;
  const ttt::StreamEvalResult* reset_k(int k) const;
  // The liveness checks, each with the numbers it rests on.
  bool carry_alive() const;       // some layer's carry factor > 0
  bool loss_falls() const;        // uniform-1: mean loss past the first 64 positions below that of positions 16–63
  bool ttt_helps() const;         // uniform-1 below uniform-0
  // uniform-0's loss minus uniform-1's at positions [lo, hi): what inner learning buys there. Unlike the raw loss it
  // compares the same tokens, so it is not confounded by what text sits where (adaptation files, then evaluation).
  double benefit(int64_t lo, int64_t hi) const;
  bool benefit_grows() const;     // the benefit past position 64 exceeds that at positions 16–63
  double best_ngram() const;      // lowest n-gram bits/byte
};

// At most `max_docs` of `docs` that hold at least `len` tokens, evenly spaced in their order, each cut to its first
// `len` tokens and made a stream of its own with every prediction scored; `candidates` counts the documents that
// long. What loss by position is read on when streams.position_docs > 0.
std::vector<data::StreamTokens> document_starts(const std::vector<std::vector<int32_t>>& docs, int64_t max_docs,
                                                int64_t len, int64_t& candidates);

// Tokens of all `streams` (what reading them costs, for progress weights).
double tokens_of(const std::vector<data::StreamTokens>& streams);
// The held-out streams of opt.split cut by opt's caps (data::segment_stream), those with a scored token; adds the
// split's scored tokens before the caps to `split_tokens`. Throws when nothing is scored.
std::vector<data::StreamTokens> held_out_streams(const Dataset& ds, const RegimeOptions& opt, int64_t& split_tokens);
// document_starts over opt.split's documents with opt.position_docs and opt.position_len ({} when position_docs is 0);
// throws when the split has no document that long.
std::vector<data::StreamTokens> position_documents(const Dataset& ds, const RegimeOptions& opt, int64_t& candidates);

// `attention` (optional) is an attention-only model trained like `m`.
// `progress` (optional) hears of every pass, weighted by the tokens it reads (a whole split takes minutes a pass).
// `journal` (optional) keeps every finished pass (a schedule over the streams, over the position documents), so a
// rerun after an interruption reads them back instead of reading the split again; the passes are deterministic, so a
// reused pass equals a recomputed one.
RegimeResult run_regime(const TrainedModel& m, const TrainedModel* attention, const Dataset& ds,
                        const RegimeOptions& opt, const CompareProgress& progress = {}, Journal* journal = nullptr);

// uniform-K carried against the same schedule reset at every document: carried − reset bits/byte, and over the
// streams both scored, how many read better carried. Zeros when either pass is missing.
struct CarriedVsReset {
  double delta = 0;
  int64_t better = 0, compared = 0;
};
CarriedVsReset carried_vs_reset(const RegimeResult& r, int k);

// results.json's top-level fields: carry_token_factor, ngram_bpb, loss_by_position, eval_tokens, and a `regime`
// object with the per-schedule numbers and the checks.
void add_regime_json(const RegimeResult& r, nlohmann::ordered_json& j);
// The report section (markdown), answers first.
std::string regime_markdown(const RegimeResult& r);
// DIR/loss_by_position.{dat,gp,png}: mean loss per position bin, log x axis, one line per schedule and baseline.
void write_position_plot(const RegimeResult& r, const std::string& dir);

}  // namespace ponder::cli
