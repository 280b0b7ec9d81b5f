// `ponder compare`: every method × seeds on held-out windows of a trained checkpoint, with
// calibration, the oracle and the statistics; writes results.json, report.md and the figures.
#include <cstdio>
#include <memory>

#include "experiments/build_info.h"
#include "experiments/commands.h"
#include "experiments/control.h"
#include "experiments/compare_job.h"
#include "experiments/regime.h"

namespace ponder::cli {
namespace {

void run(const CheckpointJobArgs& a) {
  const CheckpointJob job = load_checkpoint_job(a, "compare");
  std::printf("%s", run_compare_job(job.m, job.ds, job.opt, a.checkpoint, job.config_text, a.out).c_str());
  // The regime checks on whole held-out streams, with the checkpoint's own streams settings.
  const StreamsConfig& sc = job.m.config.streams;
  RegimeOptions ro;
  ro.chunk = sc.chunk;
  ro.max_adapt = sc.max_adapt;
  ro.max_scored = sc.max_scored;
  ro.max_ngram = int(sc.max_ngram);
  const RegimeResult regime = run_regime(job.m, nullptr, job.ds, ro);
  write_position_plot(regime, a.out);
  nlohmann::ordered_json top = {{"corpus", corpus_json(job.ds)}};
  add_regime_json(regime, top);
  merge_outputs(a.out, top, "# ponder compare\n\n" + control_status("results/control", git_commit()) + "Corpus " + job.ds.corpus.source + ".\n\n" + regime_markdown(regime) + "\n",
                "");
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
