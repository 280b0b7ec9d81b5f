// `ponder adapt`: test-time training of fast weights on a frozen trained base, chunk by chunk, under each allocation
// method (policy/adapt_rollout.h), through the same comparison, statistics and report as `ponder compare`.
#include <cstdio>
#include <memory>

#include "experiments/adapt_report.h"
#include "experiments/commands.h"
#include "experiments/compare_job.h"
#include "policy/adapt_rollout.h"

namespace ponder::cli {
namespace {

CompareOptions adapt_options(const CheckpointJobArgs& a, const AdaptSection& adapt, const CompareOptions& compare,
                             int64_t mini_batch) {
  CompareOptions opt = adapt_compare_options(adapt, compare, mini_batch);
  if (a.seeds > 0) opt.seeds = a.seeds;
  return opt;
}

void run(const CheckpointJobArgs& a, CompareResult* result = nullptr) {
  const CheckpointJob job = load_checkpoint_job(a, "adapt");
  const policy::AdaptRollouts rollouts(job.m.model, job.adapt.rollouts);
  const CompareOptions opt = adapt_options(a, job.adapt, job.opt, job.m.model.config().mini_batch);
  CompareResult r;
  std::printf("%s", run_compare_job(job.m, job.ds, opt, a.checkpoint, job.config_text, a.out, &r, &rollouts).c_str());
  const AdaptSummary s = summarize_adapt(r);
  merge_outputs(a.out, adapt_json(s, job.adapt), adapt_markdown(s, job.adapt), "");
  merge_regime(job, a.out, "ponder adapt");
  std::printf("\n%sreport: %s/report.md\n", adapt_markdown(s, job.adapt).c_str(), a.out.c_str());
  if (result) *result = std::move(r);
}

// The adapt options of a multi-model run, from the first checkpoint's config (they share one, less train.seed).
CompareOptions replicate_options(const CheckpointJobArgs& a) {
  const RunConfig cfg = checkpoint_job_config(a);
  return adapt_options(a, cfg.adapt, checkpoint_job_options(a), cfg.model.mini_batch);
}

}  // namespace

void register_adapt(CLI::App& app) {
  auto args = std::make_shared<CheckpointJobArgs>();
  args->out = "results/adapt";
  CLI::App* sub = app.add_subcommand(
      "adapt",
      "Test-time training of fast weights on a frozen trained base: every held-out stream is read in chunks "
      "(adapt.chunk tokens); each chunk is scored with the fast weights as they are, then a method picks K in "
      "adapt.step_options (SKIP = 0) from what has been read and takes K optimiser steps on that chunk's next-token "
      "loss, and the updated fast weights carry to the next chunk. Fast weights (adapt.fast): lora (rank adapt.rank "
      "on adapt.targets of the last adapt.last_blocks blocks, starting as the identity) or head (a residual SwiGLU "
      "head of width adapt.head_hidden, starting at 0); inner optimiser adapt.optimizer (sgd | momentum | adam) with "
      "adapt.lr, adapt.clip and adapt.normalize. The base's parameters never change. Methods (adapt.methods): "
      "uniform-K, every-K/N, random, loss and entropy heuristics calibrated to uniform-<adapt.budget_k>'s FLOPs, and "
      "the oracle; with several --checkpoint, statistics over independently trained bases. Writes results.json "
      "(with cost_multiples and adapt_summary), report.md and the figures of ponder compare; a rerun resumes from "
      "the journal");
  add_checkpoint_job_options(sub, *args, "Config whose adapt: and compare: sections set the protocol and methods", true);
  sub->callback([args] {
    if (args->checkpoints.size() > 1)
      run_replicates(*args, "adapt", replicate_options(*args), [](const CheckpointJobArgs& one, CompareResult* r) {
        run(one, r);
      });
    else
      run(*args);
  });
}

}  // namespace ponder::cli
