// `ponder compare`: every method × seeds on held-out windows of a trained checkpoint, with
// calibration, the oracle and the statistics; writes results.json, report.md and the figures.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "data/files.h"

#include "experiments/build_info.h"
#include "experiments/command_line.h"
#include "experiments/commands.h"
#include "experiments/control.h"
#include "experiments/compare_job.h"
#include "experiments/plots.h"
#include "experiments/regime.h"
#include "experiments/replicates.h"

namespace ponder::cli {
namespace {

// One checkpoint's comparison and regime checks into a.out; `result`, when given, receives the comparison.
void run(const CheckpointJobArgs& a, CompareResult* result = nullptr) {
  const CheckpointJob job = load_checkpoint_job(a, "compare");
  std::printf("%s", run_compare_job(job.m, job.ds, job.opt, a.checkpoint, job.config_text, a.out, result).c_str());
  // The regime checks on the held-out streams, read as the comparison read them (the same config's streams:).
  const StreamsConfig& sc = job.streams;
  RegimeOptions ro;
  ro.chunk = sc.chunk;
  ro.max_adapt = sc.max_adapt;
  ro.max_scored = sc.max_scored;
  ro.max_segments = sc.max_segments;
  ro.max_ngram = int(sc.max_ngram);
  const RegimeResult regime = run_regime(job.m, nullptr, job.ds, ro);
  write_position_plot(regime, a.out);
  nlohmann::ordered_json top = {{"corpus", corpus_json(job.ds)}};
  add_regime_json(regime, top);
  merge_outputs(a.out, top, "# ponder compare\n\n" + control_status("results/control", git_commit()) + "Corpus " + job.ds.corpus.source + ".\n\n" + regime_markdown(regime) + "\n",
                "");
}

// Checkpoints are replicates only if they were trained from one config and differ in train.seed: the same seed
// trains the same model (training is deterministic), and any other difference is a different experiment.
void check_independent(const std::vector<std::string>& checkpoints) {
  std::vector<std::string> texts;
  std::vector<int64_t> seeds;
  for (const std::string& path : checkpoints) {
    const ttt::Checkpoint ck = ttt::load_checkpoint(path);  // a missing or corrupt file is an error naming it
    const RunConfig c = parse_config(ck.config_text, path + " (its config)");
    seeds.push_back(c.train.seed);
    texts.push_back(with_overrides(ck.config_text, {"train.seed=0"}));
    for (size_t i = 0; i < seeds.size() - 1; ++i) {
      if (texts[i] != texts.back())
        throw std::invalid_argument("compare: " + checkpoints[i] + " and " + path + " were trained from different "
                                    "configs (not only train.seed): they are not replicates of one experiment");
      if (seeds[i] == seeds.back())
        throw std::invalid_argument("compare: " + checkpoints[i] + " and " + path + " were both trained with "
                                    "train.seed " + std::to_string(seeds.back()) + ": they are the same model, not "
                                    "independent replicates");
    }
  }
}

// One model's comparison in `dir`, or its finished outputs when they were made by this binary from the same
// checkpoint, config and command line (so an interrupted multi-model run redoes only the unfinished models).
CompareResult compare_one(const CheckpointJobArgs& a, const std::string& dir) {
  CheckpointJobArgs one = a;
  one.out = dir;
  // The command line names --config and --set; the config file's text is what could change under the same name.
  const std::string config_text = a.config.empty() ? "" : load_config(resolve_config(a.config)).text;
  return reuse_or_run(dir, run_fingerprint(a.checkpoint, config_text), [&] {
    CompareResult r;
    run(one, &r);
    return r;
  });
}

// Several independently trained models: each compared on its own into OUT/model-<i>, then the statistics over
// models × documents (experiments/replicates.h) into OUT/report.md and OUT/results.json.
void run_replicates(const CheckpointJobArgs& a) {
  check_independent(a.checkpoints);
  std::vector<CompareResult> runs;
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    CheckpointJobArgs one = a;
    one.checkpoint = a.checkpoints[i];
    const std::string dir = (std::filesystem::path(a.out) / ("model-" + std::to_string(i + 1))).string();
    std::fprintf(stderr, "compare: model %zu of %zu: %s -> %s\n", i + 1, a.checkpoints.size(),
                 one.checkpoint.c_str(), dir.c_str());
    runs.push_back(compare_one(one, dir));
  }
  const ReplicateSummary s = summarize_replicates(runs, a.checkpoints, checkpoint_job_options(a));
  nlohmann::ordered_json top = {{"produced_by", "ponder compare"}, {"command", command_line()},
                                {"version", version()}, {"commit", git_commit()}, {"build_type", build_type()},
                                {"models", s.models.size()},
                                {"oracle_headroom", {{"mean", s.headroom.delta}, {"ci", {s.headroom.ci.lo, s.headroom.ci.hi}}}}};
  const nlohmann::json first = nlohmann::json::parse(*data::read_file(a.out + "/model-1/results.json"));
  if (first.contains("scored_fraction")) top["scored_fraction"] = first["scored_fraction"];
  top["replicates"] = replicates_json(s);
  write_atomically(a.out + "/results.json", top.dump(1) + "\n");
  write_atomically(a.out + "/report.md", "# ponder compare over " + std::to_string(s.models.size()) +
                                              " models\n\n" + control_status("results/control", git_commit()) +
                                              replicates_markdown(s) + "![Distance to the uniform frontier](forest.png)\n\n"
                                              "![Pareto, model 1](pareto.png)\n");
  write_compare_figures(a.out);
  std::printf("%sreport: %s/report.md\n", replicates_markdown(s).c_str(), a.out.c_str());
}

}  // namespace

void register_compare(CLI::App& app) {
  auto args = std::make_shared<CheckpointJobArgs>();
  args->out = "results/compare";
  CLI::App* sub = app.add_subcommand(
      "compare", "Compare allocation methods (uniform, random, heuristics, learned policies, oracle) over seeds on "
                 "held-out windows (or streams) of a trained checkpoint, or of several independently trained ones with "
                 "statistics over models; writes results.json, report.md, pareto.png, forest.png, k_hist.png, "
                 "tokens.html");
  add_checkpoint_job_options(sub, *args, "Config whose compare: section sets methods and seeds", true);
  sub->callback([args] {
    if (args->checkpoints.size() > 1)
      run_replicates(*args);
    else
      run(*args);
  });
}

}  // namespace ponder::cli
