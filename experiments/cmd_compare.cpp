// `ponder compare`: every method × seeds on held-out windows of a trained checkpoint, with
// calibration, the oracle and the statistics; writes results.json, report.md and the figures.
#include <cstdio>
#include <memory>

#include "experiments/commands.h"
#include "experiments/compare_job.h"

namespace ponder::cli {
namespace {

void run(const CheckpointJobArgs& a) {
  const CheckpointJob job = load_checkpoint_job(a, "compare");
  std::printf("%s", run_compare_job(job.m, job.ds, job.opt, a.checkpoint, job.config_text, a.out).c_str());
}

}  // namespace

void register_compare(CLI::App& app) {
  auto args = std::make_shared<CheckpointJobArgs>();
  args->out = "results/compare";
  CLI::App* sub = app.add_subcommand(
      "compare", "Compare allocation methods (uniform, random, heuristics, learned policies, oracle) over seeds on "
                 "held-out windows of a trained checkpoint; writes results.json, report.md, pareto.png, k_hist.png, "
                 "tokens.html");
  add_checkpoint_job_options(sub, *args, "Config whose compare: section sets methods and seeds");
  sub->callback([args] { run(*args); });
}

}  // namespace ponder::cli
