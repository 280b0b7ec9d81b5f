// A comparison run from a trained model, shared by `ponder compare`, `quick`, `adapt` and the other analyses:
// progress on stderr with ETA, its journal, the outputs of experiments/study/report.h, the regime checks merged
// in, and several models compared in turn (checkpoint jobs: checkpoint_job.h; provenance: model/provenance.h).
#pragma once
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "experiments/cli/checkpoint_job.h"
#include "experiments/process/journal.h"
#include "experiments/model/provenance.h"
#include "experiments/model/training.h"
#include "experiments/study/shard.h"
#include "util/files.h"

namespace ponder::cli {

// A progress callback for run_compare that prints "<label>: what  NN%  elapsed, ETA" on stderr
// (overwriting one line on a terminal, a line every few seconds in logs).
CompareProgress stderr_progress(const std::string& label);
// The journal of a comparison that writes into `dir` (DIR/journal.jsonl). Its cells are reused by a rerun
// with the same command line, the same `ponder` binary, checkpoint file and config text; "<label>: resuming
// …" on stderr says when they are.
Journal open_journal(const std::string& dir, const std::string& label, const std::string& checkpoint,
                     const std::string& config_text);

// Runs the comparison on the model's held-out splits (calibration on valid, evaluation on test)
// and writes everything into `dir`; an interrupted run resumes from its journal (deleted once the
// outputs are written). Returns the headline table; `result`, when given, receives the comparison itself.
// With `rollouts`, K is spent by them (ponder adapt's fast weights) instead of by the model's TTT layers, and the
// outputs say "ponder adapt".
// With a `share` of the cells (experiments/study/shard.h) it computes only those into DIR/journal.jsonl, kept as the
// shard's output, and writes nothing else (returns "").
// With `journal` (the caller's, opened here unless it is already), the cells go there and the caller removes it once
// its own later steps are journaled too (compare and adapt keep the regime's passes in it, merge_regime).
std::string run_compare_job(const TrainedModel& m, const Dataset& ds, const CompareOptions& opt,
                            const std::string& checkpoint, const std::string& config_text, const std::string& dir,
                            CompareResult* result = nullptr, const policy::Rollouts* rollouts = nullptr,
                            const CellShare& share = {}, Journal* journal = nullptr);

// The comparison finished in `dir` (its results.json) when `dir`/fingerprint.json equals `fp` (run_fingerprint);
// otherwise `run` makes it, and the fingerprint is written once its outputs are whole. Several models compared in
// turn redo only the unfinished ones on a rerun.
CompareResult reuse_or_run(const std::string& dir, const nlohmann::json& fp, const std::function<CompareResult()>& run);

// The regime checks (experiments/model/regime.h) on the job's held-out streams, read as the comparison read them (the same
// config's streams: settings), merged into DIR's results.json (corpus and regime fields at the top) and report.md
// (under "# <title>", with the positive control's status).
// `attention` (may be null): an attention-only model of the same corpus and vocabulary (attention_baseline), read on
// the same streams as the baseline that shows whether a non-TTT mixer does better.
// `journal` (may be null): the comparison's, which keeps each finished pass for a rerun (run_regime).
void merge_regime(const CheckpointJob& job, const std::string& dir, const std::string& title,
                  const TrainedModel* attention = nullptr, const std::string& attention_checkpoint = "",
                  Journal* journal = nullptr);
// The attention-only model at `path` (compare --attention; nullopt when empty), refused naming the cause when it has
// a TTT layer or was trained on another corpus or vocabulary than the job's model.
std::optional<TrainedModel> attention_baseline(const CheckpointJob& job, const std::string& path);

// Adds `fields` at the top level of DIR/results.json and wraps DIR/report.md in `before` and `after` (markdown);
// each file is replaced atomically (written beside, then renamed), so an interruption leaves the old one whole.
void merge_outputs(const std::string& dir, const nlohmann::ordered_json& fields, const std::string& before,
                   const std::string& after);

// Several independently trained models (CheckpointJobArgs::checkpoints), each run on its own by `run` into
// OUT/model-<i> (reused when finished under the same fingerprint), then the statistics over models × documents
// (experiments/study/replicates.h) with `opt`'s budget into OUT/report.md and OUT/results.json. The checkpoints must come
// from one config and differ in train.seed; `label` (compare, adapt) names the command in messages and outputs.
// The models' comparisons run a.jobs at a time in child processes (experiments/process/parts.h; 0: as many as threads, at
// most 4), and the statistics are then made from their finished folders.
// `extra` (may be empty) adds fields to OUT/results.json and a section to OUT/report.md from every model's finished
// results.json (in model order): `ponder adapt` pools its fast-weight views there (experiments/study/adapt_models.h).
using RunOne = std::function<void(const CheckpointJobArgs& one, CompareResult* result)>;
using ReplicateExtra =
    std::function<void(const std::vector<nlohmann::json>& per_model, nlohmann::ordered_json& top, std::string& section)>;
void run_replicates(const CheckpointJobArgs& a, const std::string& label, const CompareOptions& opt, const RunOne& run,
                    const ReplicateExtra& extra = {});
// A shard of the same (experiments/study/shard.h): the models' cells dealt as one list, model i's share computed by `run`
// into DIR/model-<i> (a.jobs models at a time); models with no cell in this shard are skipped.
using RunShare = std::function<void(const CheckpointJobArgs& one, const CellShare& share)>;
void run_replicates_shard(const CheckpointJobArgs& a, const std::string& label, const CompareOptions& opt,
                          const Shard& shard, const std::string& dir, const RunShare& run);

using util::write_atomically;  // util/files.h

}  // namespace ponder::cli
