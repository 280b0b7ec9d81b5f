// A comparison run from a trained model, shared by `ponder compare` and `ponder quick`: progress on
// stderr with ETA, provenance, and the outputs of experiments/study/report.h.
#pragma once
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "experiments/cli/config_cli.h"
#include "experiments/process/journal.h"
#include "experiments/process/ranks.h"
#include "experiments/study/shard.h"
#include "experiments/model/training.h"
#include "util/files.h"

namespace ponder::cli {

// What every analysis of a trained checkpoint takes (compare, oracle, overhead, ablate).
struct CheckpointJobArgs {
  std::string config;  // empty: the checkpoint's own config
  std::string checkpoint;               // the first --checkpoint
  std::vector<std::string> checkpoints;  // every --checkpoint (compare: independently trained models)
  std::string out;
  int64_t seeds = 0, windows = 0;  // 0: the config's compare.seeds / compare.windows_per_seed
  std::string device;              // empty: the config's model.device
  ConfigOverrides over;            // --set on the config (--seed has no meaning for a trained model)
  int jobs = 0;                    // several checkpoints: models compared side by side (experiments/process/parts.h); 0: auto
  std::string shard;               // compare, ablate: --shard i/n (experiments/study/shard.h); empty: all the cells
  std::string attention;           // compare: an attention-only checkpoint read beside it in the regime checks
  bool other_corpus = false;       // --other-corpus: read a corpus other than the one the checkpoint was trained on
};
// Adds --config (described by `config_help`; default: the checkpoint's own), --checkpoint (required), --out, --seeds,
// --windows, --set and --device.
// With `many`, --checkpoint may repeat (and --jobs compares the models side by side); otherwise a second one is an
// error.
void add_checkpoint_job_options(CLI::App* sub, CheckpointJobArgs& a, const std::string& config_help,
                                bool many = false);

// What such a command works on: the config's compare options with --seeds / --windows applied, the trained
// model on its device and its dataset. Prints "<label>: device …" and creates the output folder.
// The compare options a checkpoint job runs under (its config, --set, --seeds, --windows), without loading the model
// or the data.
CompareOptions checkpoint_job_options(const CheckpointJobArgs& a);
// The whole config such a command runs under (--config or the checkpoint's own, with --set applied).
RunConfig checkpoint_job_config(const CheckpointJobArgs& a);
// A checkpoint job holds two configs: `as_run`, the one it runs under (--config, or the checkpoint's own, with --set:
// its compare:, streams:, adapt: and learn: sections are what the command reads), and the one the model was trained
// with, `as_trained()` (its model:, data: and train: sections are the model's; --config cannot change them).
struct CheckpointJob {
  RunConfig as_run;
  CompareOptions opt;  // as_run.compare with --seeds and --windows applied
  Device device;
  TrainedModel m;      // m.config: as trained
  Dataset ds;
  const RunConfig& as_trained() const { return m.config; }
};
CheckpointJob load_checkpoint_job(const CheckpointJobArgs& a, const std::string& label);

// A progress callback for run_compare that prints "<label>: what  NN%  elapsed, ETA" on stderr
// (overwriting one line on a terminal, a line every few seconds in logs).
CompareProgress stderr_progress(const std::string& label);
// What produced a result file: command, version, commit, machine, checkpoint, config (the checkpoint's, as trained)
// and data hash; `applied_config`, when it differs from the checkpoint's (--config, --set), as config_applied.
nlohmann::ordered_json provenance(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint,
                                  const std::string& produced_by, const std::string& applied_config = "");

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

// Adds `fields` at the top level of DIR/results.json and wraps DIR/report.md in `before` and `after` (markdown);
// each file is replaced atomically (written beside, then renamed), so an interruption leaves the old one whole.
using util::write_atomically;  // util/files.h
// What a finished comparison of `checkpoint` depends on: the command line, this binary, the checkpoint's bytes and
// the config text. A journal or a finished model's outputs are reused only under the same fingerprint.
nlohmann::json run_fingerprint(const std::string& checkpoint, const std::string& config_text);
// The sha256 of the running `ponder` binary: what made a result, also for a build with uncommitted changes.
std::string binary_sha256();
// What every rank of a sharded run under mpirun must share (experiments/process/ranks.h): the command line, the binary, the
// config text each rank reads and the checkpoints' contents (a file of the same name can differ between nodes).
RankFields rank_fields(const CheckpointJobArgs& a);

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

}  // namespace ponder::cli
