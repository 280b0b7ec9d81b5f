#include "experiments/cli/compare_job.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unistd.h>

#include "util/sha256.h"
#include "experiments/cli/commands.h"
#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/process/command_line.h"
#include "experiments/study/control.h"
#include "experiments/model/device.h"
#include "experiments/process/parts.h"
#include "experiments/study/plots.h"
#include "experiments/model/regime.h"
#include "experiments/study/replicates.h"
#include "experiments/study/report.h"
#include "experiments/study/shard.h"
#include "experiments/model/checkpoint_cache.h"
#include "experiments/model/config.h"
#include "tensor/cpu/runtime.h"
#include "util/files.h"

namespace ponder::cli {

CompareProgress stderr_progress(const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = isatty(STDERR_FILENO);
  auto last_print = std::make_shared<double>(-1);
  return [=](const std::string& what, double done, double total) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!tty && t - *last_print < 5) return;  // a line every few seconds in logs
    *last_print = t;
    // Nothing done yet means no rate to extrapolate from: the ETA is unknown, not zero.
    char eta[32] = "   ?  ";
    if (done > 0) std::snprintf(eta, sizeof eta, "%4.0f s", t / done * (total - done));
    std::fprintf(stderr, "%s%s: %-34s %3.0f%%  %5.0f s elapsed, ETA %s%s", tty ? "\r" : "", label.c_str(),
                 what.c_str(), total > 0 ? 100 * done / total : 0.0, t, eta, tty ? "   " : "\n");
  };
}


Journal open_journal(const std::string& dir, const std::string& label, const std::string& checkpoint,
                     const std::string& config_text) {
  Journal j(dir + "/journal.jsonl", run_fingerprint(checkpoint, config_text));
  if (j.reused() > 0)
    std::fprintf(stderr, "%s: resuming from %s: %zu finished cells are reused\n", label.c_str(), j.path().c_str(),
                 j.reused());
  return j;
}

CompareResult reuse_or_run(const std::string& dir, const nlohmann::json& fp, const std::function<CompareResult()>& run) {
  const std::optional<std::string> old = util::read_file(dir + "/fingerprint.json");
  const std::optional<std::string> results = util::read_file(dir + "/results.json");
  if (old && results && nlohmann::json::parse(*old, nullptr, false) == fp) {
    const nlohmann::json j = nlohmann::json::parse(*results, nullptr, false);
    if (j.is_object() && j.contains("methods")) {
      std::fprintf(stderr, "compare: %s is finished; reused\n", dir.c_str());
      return compare_result_from_json(j);
    }
  }
  CompareResult r = run();
  write_atomically(dir + "/fingerprint.json", fp.dump() + "\n");
  return r;
}

void merge_outputs(const std::string& dir, const nlohmann::ordered_json& fields, const std::string& before,
                   const std::string& after) {
  const std::string results = dir + "/results.json", report = dir + "/report.md";
  const std::optional<std::string> rj = util::read_file(results), rm = util::read_file(report);
  if (!rj || !rm) throw std::runtime_error("cannot read the comparison's outputs in '" + dir + "'");
  nlohmann::ordered_json all = nlohmann::ordered_json::parse(*rj);
  nlohmann::ordered_json merged = fields;  // the new fields first, so readers see them at the top
  for (auto it = all.begin(); it != all.end(); ++it)
    if (!merged.contains(it.key())) merged[it.key()] = it.value();
  write_atomically(results, merged.dump(1) + "\n");
  write_atomically(report, before + *rm + after);
}

std::optional<TrainedModel> attention_baseline(const CheckpointJob& job, const std::string& path) {
  if (path.empty()) return std::nullopt;
  TrainedModel a = load_trained(checkpoint_for_model(path), path, job.device);
  if (a.model.num_ttt_layers() > 0)
    throw std::invalid_argument("--attention " + path + ": the model has " + std::to_string(a.model.num_ttt_layers()) +
                                " TTT layer(s); the baseline must be attention-only (model.mixers all attention)");
  if (a.config.data.corpus != job.m.config.data.corpus || a.config.model.vocab != job.m.config.model.vocab)
    throw std::invalid_argument("--attention " + path + ": trained on corpus '" + a.config.data.corpus + "' (vocab " +
                                std::to_string(a.config.model.vocab) + "), the compared model on '" +
                                job.m.config.data.corpus + "' (vocab " + std::to_string(job.m.config.model.vocab) + ")");
  return a;
}

void merge_regime(const CheckpointJob& job, const std::string& dir, const std::string& title,
                  const TrainedModel* attention, const std::string& attention_checkpoint, Journal* journal) {
  RegimeOptions ro = regime_options(job.as_run.streams);
  ro.mode = job.opt.rollout.mode;
  RegimeResult regime = run_regime(job.m, attention, job.ds, ro, stderr_progress("regime"), journal);
  regime.attention_checkpoint = attention_checkpoint;
  write_position_plot(regime, dir);
  nlohmann::ordered_json top = {{"corpus", corpus_json(job.ds)}};
  add_regime_json(regime, top);
  merge_outputs(dir, top, "# " + title + "\n\n" + control_status("results/control", git_commit()) + "Corpus " +
                              job.ds.corpus.source + ".\n\n" + regime_markdown(regime) + "\n", "");
}

namespace {

// The report's paired tests need at least two paired documents: say so before any cell is computed, not after.
void check_paired_design(const CompareOptions& opt, const Dataset& ds, const std::string& label) {
  const std::string budget = "uniform-" + std::to_string(opt.budget_k);
  const char* l = label.c_str();
  if (std::none_of(opt.methods.begin(), opt.methods.end(), [&](const methods::MethodSpec& m) { return m.name == budget; }))
    std::fprintf(stderr, "%s: warning: %s.methods has no %s (%s.budget_k = %lld): the methods run, but the report can "
                 "test none of them against the budget; add %s to %s.methods\n", l, l, budget.c_str(), l,
                 (long long)opt.budget_k, budget.c_str(), l);
  int64_t documents = opt.seeds * opt.windows_per_seed;
  if (!opt.streams && opt.windows_per_seed == 0) documents = data::EvalWindows(ds.test, opt.seq_len).size();
  if (opt.streams) {
    documents = 0;
    for (const data::StreamTokens& st : ds.test_streams) documents += st.scored() > 0;
  }
  if (documents >= 2) return;
  throw std::invalid_argument(opt.streams ? "compare: the test split has " + std::to_string(documents) +
                                                " scored stream(s); the paired tests need at least 2"
                                          : "compare: seeds × windows_per_seed = " + std::to_string(documents) +
                                                "; the paired tests need at least 2 windows (raise --seeds or --windows)");
}

}  // namespace

std::string run_compare_job(const TrainedModel& m, const Dataset& ds, const CompareOptions& opt,
                            const std::string& checkpoint, const std::string& config_text, const std::string& dir,
                            CompareResult* result, const policy::Rollouts* rollouts, const CellShare& share,
                            Journal* callers) {
  const std::string label = rollouts ? "adapt" : "compare";
  check_paired_design(opt, ds, label);
  Journal own;
  Journal& journal = callers ? *callers : own;
  if (!journal.enabled()) journal = open_journal(dir, label, checkpoint, config_text);  // after the checks above
  CompareResult r = rollouts ? run_compare(*rollouts, ds.valid, ds.test, opt, stderr_progress(label), &journal,
                                           &ds.test_streams, share, &ds.valid_streams)
                             : run_compare(m.model, ds.valid, ds.test, opt, stderr_progress(label), &journal,
                                           &ds.test_streams, share, &ds.valid_streams);
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  if (!share.whole()) return "";  // the journal is this shard's output; the merge writes the rest
  std::string headline =
      write_compare_outputs(r, opt, provenance(m, ds, checkpoint, "ponder " + label, config_text), dir);
  write_compare_figures(dir);
  if (!callers) journal.remove();
  if (result) *result = std::move(r);
  return headline;
}

// Checkpoints are replicates only if they were trained from one config and differ in train.seed: the same seed
// trains the same model (training is deterministic), and any other difference is a different experiment.
void check_independent(const std::vector<std::string>& checkpoints, const std::string& label) {
  std::vector<std::string> texts;
  std::vector<int64_t> seeds;
  for (const std::string& path : checkpoints) {
    const ttt::Checkpoint& ck = checkpoint_header(path);  // a missing or corrupt file is an error naming it
    const RunConfig c = parse_config(ck.config_text, path + " (its config)");
    seeds.push_back(c.train.seed);
    texts.push_back(with_overrides(ck.config_text, {"train.seed=0"}));
    for (size_t i = 0; i < seeds.size() - 1; ++i) {
      if (texts[i] != texts.back())
        throw std::invalid_argument(label + ": " + checkpoints[i] + " and " + path + " were trained from different "
                                    "configs (not only train.seed): they are not replicates of one experiment");
      if (seeds[i] == seeds.back())
        throw std::invalid_argument(label + ": " + checkpoints[i] + " and " + path + " were both trained with "
                                    "train.seed " + std::to_string(seeds.back()) + ": they are the same model, not "
                                    "independent replicates");
    }
  }
}

// One model's comparison in `dir`, or its finished outputs when they were made by this binary from the same
// checkpoint, config and command line (so an interrupted multi-model run redoes only the unfinished models).
CompareResult compare_one(const CheckpointJobArgs& a, const std::string& dir, const RunOne& run) {
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
// models × documents (experiments/study/replicates.h) into OUT/report.md and OUT/results.json.
void run_replicates(const CheckpointJobArgs& a, const std::string& label, const CompareOptions& opt, const RunOne& run,
                    const ReplicateExtra& extra) {
  check_independent(a.checkpoints, label);
  const auto model_dir = [&](size_t i) { return (std::filesystem::path(a.out) / ("model-" + std::to_string(i + 1))).string(); };
  const auto one_of = [&](size_t i) {
    CheckpointJobArgs one = a;
    one.checkpoint = a.checkpoints[i];
    return one;
  };
  // Each model's comparison side by side first; the loop below then finds them finished and reuses them.
  const int threads = cpu::num_threads(), jobs = a.jobs > 0 ? a.jobs : std::clamp(threads, 1, 4);
  if (jobs > 1 && a.checkpoints.size() > 1) {
    std::vector<Part> parts;
    for (size_t i = 0; i < a.checkpoints.size(); ++i)
      parts.push_back({"model-" + std::to_string(i + 1), {}, 1.0, [&, i] { compare_one(one_of(i), model_dir(i), run); }});
    run_parts(parts, jobs, threads, a.out + "/logs", label);
  }
  std::vector<CompareResult> runs;
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    std::fprintf(stderr, "%s: model %zu of %zu: %s -> %s\n", label.c_str(), i + 1, a.checkpoints.size(),
                 a.checkpoints[i].c_str(), model_dir(i).c_str());
    runs.push_back(compare_one(one_of(i), model_dir(i), run));
  }
  const ReplicateSummary s = summarize_replicates(runs, a.checkpoints, opt);
  nlohmann::ordered_json top = {{"produced_by", "ponder " + label}, {"command", command_line()},
                                {"version", version()}, {"commit", git_commit()}, {"build_type", build_type()},
                                {"models", s.models.size()},
                                {"oracle_headroom", {{"mean", s.headroom.delta}, {"ci", {s.headroom.ci.lo, s.headroom.ci.hi}}}}};
  const nlohmann::json first = nlohmann::json::parse(*util::read_file(a.out + "/model-1/results.json"));
  if (first.contains("scored_fraction")) top["scored_fraction"] = first["scored_fraction"];
  top["replicates"] = replicates_json(s);
  std::string section;
  if (extra) {
    std::vector<nlohmann::json> per_model;
    for (size_t i = 0; i < a.checkpoints.size(); ++i)
      per_model.push_back(nlohmann::json::parse(*util::read_file(model_dir(i) + "/results.json")));
    extra(per_model, top, section);
  }
  write_atomically(a.out + "/results.json", top.dump(1) + "\n");
  write_atomically(a.out + "/report.md", "# ponder " + label + " over " + std::to_string(s.models.size()) +
                                              " models\n\n" + control_status("results/control", git_commit()) +
                                              replicates_markdown(s) + "![Distance to the uniform frontier](forest.png)\n\n"
                                              "![Pareto, model 1](pareto.png)\n\n" + section);
  write_compare_figures(a.out);
  std::printf("%sreport: %s/report.md\n", replicates_markdown(s).c_str(), a.out.c_str());
}

void run_replicates_shard(const CheckpointJobArgs& a, const std::string& label, const CompareOptions& opt,
                          const Shard& shard, const std::string& dir, const RunShare& run) {
  check_independent(a.checkpoints, label);
  const int64_t cells = int64_t(compare_cells(opt).size());
  std::vector<Part> parts;
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    const CellShare share = cell_share(shard, int64_t(i), cells);
    bool any = false;
    for (int64_t c = 0; c < cells; ++c) any = any || share.owns(c);
    if (!any) continue;  // none of this model's cells is this shard's
    CheckpointJobArgs one = a;
    one.checkpoint = a.checkpoints[i];
    one.out = (std::filesystem::path(dir) / ("model-" + std::to_string(i + 1))).string();
    parts.push_back({"model-" + std::to_string(i + 1), {}, 1.0, [one, share, &run] { run(one, share); }});
  }
  const int threads = cpu::num_threads(), jobs = a.jobs > 0 ? a.jobs : std::clamp(threads, 1, 4);
  run_parts(parts, jobs, threads, dir + "/logs", label);
}

}  // namespace ponder::cli
