// `ponder compare`: every method × seeds on held-out windows of a trained checkpoint, with
// calibration, the oracle and the statistics; writes results.json, report.md and the figures. With --shard i/n (or
// under mpirun) this process computes its share of the cells only (experiments/study/shard.h; ponder merge finishes).
#include <cstdio>
#include <memory>
#include <optional>

#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"

namespace ponder::cli {
namespace cmd_compare {
namespace {

// One checkpoint's comparison and regime checks into a.out; `result`, when given, receives the comparison.
void run(const CheckpointJobArgs& a, CompareResult* result = nullptr) {
  const CheckpointJob job = load_checkpoint_job(a, "compare");
  const std::optional<TrainedModel> attention = attention_baseline(job, a.attention);  // refused before any work
  // One journal for the cells and the regime's passes, removed when both are written: an interruption during the
  // regime (over an hour a model on a large split) loses at most the pass in progress.
  Journal journal;  // opened by run_compare_job once the design is checked
  std::printf("%s", run_compare_job(job.m, job.ds, job.opt, a.checkpoint, job.as_run.text, a.out, result, nullptr, {},
                                    &journal).c_str());
  merge_regime(job, a.out, "ponder compare", attention ? &*attention : nullptr, a.attention, &journal);
  journal.remove();
}

// This shard's cells of one checkpoint's comparison into a.out's journal (the regime checks are the merge's).
void run_share(const CheckpointJobArgs& a, const CellShare& share) {
  const CheckpointJob job = load_checkpoint_job(a, "compare");
  run_compare_job(job.m, job.ds, job.opt, a.checkpoint, job.as_run.text, a.out, nullptr, nullptr, share);
}

void run_command(const CheckpointJobArgs& args) {
  const Shard shard = this_shard(args.shard, "compare");
  const bool many = args.checkpoints.size() > 1;
  if (shard.whole()) {
    if (many)
      run_replicates(args, "compare", checkpoint_job_options(args), [](const CheckpointJobArgs& one, CompareResult* r) { run(one, r); });
    else
      run(args);
    return;
  }
  run_shard("compare", shard, args.out, [&] { return rank_fields(args); }, [&](const std::string& dir) {
    CheckpointJobArgs a = args;
    a.out = dir;
    if (many)
      run_replicates_shard(a, "compare", checkpoint_job_options(a), shard, dir, run_share);
    else
      run_share(a, cell_share(shard, 0, 0));
  });
}

}  // namespace
}  // namespace cmd_compare

void register_compare(CLI::App& app) {
  using namespace cmd_compare;
  auto args = std::make_shared<CheckpointJobArgs>();
  args->out = "results/compare";
  CLI::App* sub = app.add_subcommand(
      "compare", "Compare allocation methods (uniform, random, heuristics, learned policies, oracle) over seeds on "
                 "held-out windows (or streams) of a trained checkpoint, or of several independently trained ones with "
                 "statistics over models; writes results.json, report.md, pareto.png, forest.png, k_hist.png, "
                 "tokens.html");
  add_checkpoint_job_options(sub, *args, "Config whose compare: section sets methods and seeds", true);
  add_shard_option(sub, args->shard);
  sub->add_option("--attention", args->attention,
                  "Checkpoint of an attention-only model trained like --checkpoint (same corpus; e.g. model.mixers all "
                  "attention): read on the same held-out streams in the regime checks, beside TTT and the n-grams")
      ->check(CLI::ExistingFile);
  sub->callback([args] { run_command(*args); });
}

PONDER_COMMAND(compare, register_compare);

}  // namespace ponder::cli
