// The comparison suite (docs/method.md §5.4): every method × seeds on held-out windows, with exact costs
// from the engine's counters (options: compare_options.h; results: compare_result.h). A seed fixes which held-out windows are evaluated and the random
// policy's draws; every method sees the same windows for a seed, so results are paired by window.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "data/tokens.h"
#include "experiments/process/journal.h"
#include "experiments/study/compare_options.h"
#include "experiments/study/compare_result.h"
#include "policy/calibrate.h"

namespace ponder::cli {

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
