// `ponder quick`: the README's main job, in a regime where the answer could be yes. Trains the config's TTT model
// (configs/quick.yaml: long windows of held-out-repository Python code) and an attention-only model of the same size,
// or reuses them when their config text and git commit match this build (continuing an interrupted run); checks that
// the question is live on whole held-out streams (carry factor, loss by position, TTT vs uniform-0, count n-grams,
// attention); then compares allocation methods and writes results/quick/report.md, results.json and the figures.
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <optional>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "data/files.h"
#include "data/tokens.h"
#include "experiments/build_info.h"
#include "experiments/commands.h"
#include "experiments/compare_job.h"
#include "experiments/device.h"
#include "experiments/plots.h"
#include "experiments/regime.h"
#include "experiments/replicates.h"
#include "experiments/training.h"
#include "tensor/cpu/cpu_kernels.h"

namespace ponder::cli {
namespace {

struct Options {
  std::string config = "quick";
  std::string out = "results/quick";
  bool retrain = false;
  int64_t seeds = 0, windows = 0;  // override the config's compare.seeds / compare.windows_per_seed
  std::string device;              // empty: the config's model.device
  ConfigOverrides over;             // --set, --seed on the main config (not the control's)
  std::string control = "planted";  // the positive control's config, run first into <out>/control; "none" skips it
};

// The positive control, first (experiments/control.h): its verdict heads the report, so that a null result below can
// be read. Skipped with --control none, and the report then says it was not run.
std::pair<nlohmann::ordered_json, std::string> positive_control(const Options& o) {
  const std::string dir = (std::filesystem::path(o.out) / "control").string();
  if (o.control == "none")
    return {{{"ran", false}}, "**Positive control: not run** (--control none). Run `ponder control` to check that this "
                              "build finds the effect planted in generated data; without it, a null result here says "
                              "nothing about allocation.\n\n"};
  ControlArgs ca;
  ca.config = o.control;
  ca.out = dir;
  ca.retrain = o.retrain;
  ca.device = o.device;
  const ControlVerdict v = run_positive_control(ca);
  nlohmann::ordered_json j = control_json(v);
  j["ran"] = true;
  j["results"] = dir + "/results.json";
  return {j, control_markdown(v, dir + "/report.md")};
}

// Validation bits per byte by step, from the run's log (a resumed run's later lines win).
std::map<int64_t, double> training_curve(const std::string& log) {
  std::map<int64_t, double> curve;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("val_bpb")) curve[j["step"].get<int64_t>()] = j["val_bpb"].get<double>();
  }
  return curve;
}

Provenance this_build() { return {version(), git_commit(), build_type()}; }

// The same model with every mixer an attention layer over a sliding window of the training length.
RunConfig attention_config(const RunConfig& cfg) {
  YAML::Node root = YAML::Load(cfg.text);
  std::vector<std::string> mixers(size_t(cfg.model.layers), "attention");
  root["model"]["mixers"] = mixers;
  root["model"]["attn_window"] = cfg.train.seq_len;
  YAML::Emitter out;
  out << root;
  return parse_config(std::string(out.c_str()) + "\n", cfg.source + " (attention-only baseline)");
}

std::string training_section(const RunConfig& cfg, const TrainedModel& m, const Dataset& ds,
                             const std::map<int64_t, double>& curve) {
  std::ostringstream md;
  char line[64];
  md << "\n## Training\n\nTTT model (" << cfg.source << ", " << m.model.num_parameters() << " parameters, token factor "
     << cfg.model.token_factor << ") trained " << cfg.train.steps << " steps on windows of " << cfg.train.seq_len
     << " tokens of " << ds.corpus.name << " with K drawn per unit and layer from {";
  for (size_t i = 0; i < cfg.train.step_options.size(); ++i) md << (i ? "," : "") << cfg.train.step_options[i];
  md << "} (" << ttt::mode_name(cfg.train.mode) << " mode). Validation bits/byte (" << cfg.eval.inner.schedule << ", "
     << cfg.eval.max_windows << " windows of the validation split; `training.png` draws the training loss, validation bits/byte and each TTT "
        "layer's carry token factor for every model trained here):\n\n| step | val bpb |\n|---|---|\n";
  for (const auto& [step, bpb] : curve) {
    std::snprintf(line, sizeof line, "| %lld | %.4f |\n", (long long)step, bpb);
    md << line;
  }
  md << "\nconfig " << cfg.source << ", seed " << cfg.train.seed << ", commit " << git_commit() << " (" << build_type()
     << " build, " << cpu::num_threads() << " threads), corpus " << ds.corpus.source << "\n\n```yaml\n" << cfg.text
     << "```\n";
  return md.str();
}

// Models 2 … train.seeds: the same config with train.seed + i, each trained (or reused) and compared on its own in
// OUT/model-<i+1>; a finished comparison is reused when this binary made it from the same checkpoint and config.
std::vector<CompareResult> other_models(const RunConfig& cfg, const Options& o, Device device, const Dataset& ds,
                                        const CompareOptions& copt) {
  std::vector<CompareResult> runs;
  for (int64_t i = 1; i < cfg.train_seeds; ++i) {
    ConfigOverrides seed;
    seed.seed = int64_t(cfg.train.seed) + i;
    const RunConfig ci = apply_overrides(cfg, seed);
    const std::string dir = (std::filesystem::path(o.out) / ("model-" + std::to_string(i + 1))).string();
    std::fprintf(stderr, "quick: model %lld of %lld (train.seed %lld) in %s\n", (long long)(i + 1),
                 (long long)cfg.train_seeds, (long long)seed.seed, dir.c_str());
    bool reused = false;
    const TrainedModel m = train_or_reuse(ci, dir, o.retrain, device, this_build(), reused);
    const std::string ckpt = checkpoint_path(dir);
    runs.push_back(reuse_or_run(dir, run_fingerprint(ckpt, ci.text), [&] {
      CompareResult r;
      run_compare_job(m, ds, copt, ckpt, ci.text, dir, &r);
      return r;
    }));
  }
  return runs;
}

void run_quick(const Options& o) {
  const RunConfig cfg = apply_overrides(load_config(resolve_config(o.config)), o.over);
  const Device device = run_device(o.device, cfg.device, cfg.source);
  std::fprintf(stderr, "quick: device %s\n", describe_device(device).c_str());
  const auto [control_json_, control_md] = positive_control(o);
  bool reused = false, attn_reused = false;
  const TrainedModel m = train_or_reuse(cfg, o.out, o.retrain, device, this_build(), reused);
  std::optional<TrainedModel> attn;
  const std::string attn_dir = (std::filesystem::path(o.out) / "attention").string();
  if (cfg.streams.attention_baseline) attn = train_or_reuse(attention_config(cfg), attn_dir, o.retrain, device, this_build(), attn_reused);
  const Dataset ds = load_dataset(cfg.data);

  RegimeOptions ro;
  ro.chunk = cfg.streams.chunk;
  ro.max_adapt = cfg.streams.max_adapt;
  ro.max_scored = cfg.streams.max_scored;
  ro.max_segments = cfg.streams.max_segments;
  ro.max_ngram = int(cfg.streams.max_ngram);
  RegimeResult regime = run_regime(m, attn ? &*attn : nullptr, ds, ro);
  if (attn) regime.attention_checkpoint = checkpoint_path(attn_dir);
  const std::map<int64_t, double> curve = training_curve(log_path(o.out));

  // The comparison of allocation methods (writes report.md, results.json and its figures), then the regime checks
  // before it and the training after it, in both files.
  CompareOptions copt = cfg.compare;
  if (o.seeds > 0) copt.seeds = o.seeds;
  if (o.windows > 0) copt.windows_per_seed = o.windows;
  const std::string ckpt = checkpoint_path(o.out);
  std::vector<CompareResult> runs(1);
  const std::string headline = run_compare_job(m, ds, copt, ckpt, cfg.text, o.out, &runs[0]);
  write_position_plot(regime, o.out);
  for (CompareResult& r : other_models(cfg, o, device, ds, copt)) runs.push_back(std::move(r));
  std::vector<std::pair<std::string, std::string>> logs;
  for (size_t i = 0; i < size_t(cfg.train_seeds); ++i)
    logs.push_back({"model " + std::to_string(i + 1) + " (seed " + std::to_string(cfg.train.seed + int64_t(i)) + ")",
                    log_path(i == 0 ? o.out : o.out + "/model-" + std::to_string(i + 1))});
  if (attn) logs.push_back({"attention-only", log_path(attn_dir)});
  write_training_figure(o.out + "/training.png", logs);
  std::vector<std::string> labels = {ckpt};
  for (size_t i = 1; i < runs.size(); ++i) labels.push_back(checkpoint_path(o.out + "/model-" + std::to_string(i + 1)));
  const ReplicateSummary reps = summarize_replicates(runs, labels, copt);
  nlohmann::ordered_json top = {{"positive_control", control_json_},
                                {"models", reps.models.size()},
                                {"oracle_headroom", {{"mean", reps.headroom.delta},
                                                     {"ci", {reps.headroom.ci.lo, reps.headroom.ci.hi}}}},
                                {"replicates", replicates_json(reps)},
                                {"corpus", corpus_json(ds)}};
  add_regime_json(regime, top);
  nlohmann::ordered_json training = {{"config_source", cfg.source}, {"seed", cfg.train.seed},
                                     {"reused_checkpoint", reused}, {"trained_steps", m.step},
                                     {"training_curve", nlohmann::ordered_json::array()}};
  for (const auto& [step, bpb] : curve) training["training_curve"].push_back({{"step", step}, {"val_bpb", bpb}});
  if (attn) training["attention_baseline"] = {{"checkpoint", checkpoint_path(attn_dir)}, {"reused_checkpoint", attn_reused},
                                              {"parameters", attn->model.num_parameters()}};
  top["training"] = training;
  const std::optional<std::string> compared = data::read_file(o.out + "/results.json");
  const nlohmann::json deg = compared ? nlohmann::json::parse(*compared).value("degenerate", nlohmann::json()) : nlohmann::json();
  std::string flag;
  if (deg.is_object() && deg.value("value", false))
    for (const auto& why : deg["reason"]) flag += "**Degenerate by construction**: " + why.get<std::string>() + ".\n\n";
  const std::string intro = "# ponder quick\n\n" + flag + control_md + "Corpus " + ds.corpus.source + ".\n\n" +
                            regime_markdown(regime) + "\n" + replicates_markdown(reps) +
                            "**Below: the first model (train.seed " + std::to_string(cfg.train.seed) + ") in detail.**\n\n";
  merge_outputs(o.out, top, intro, training_section(cfg, m, ds, curve));
  write_compare_figures(o.out);  // again, now that results.json holds the statistics over models
  std::printf("%s\n%s\nreport: %s/report.md\nresults: %s/results.json\nfigures: %s/loss_by_position.png, "
              "%s/pareto.png, %s/forest.png, %s/training.png, %s/k_hist.png, %s/tokens.html\n",
              regime_markdown(regime).c_str(), headline.c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str(),
              o.out.c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str());
}

}  // namespace

void register_quick(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "quick", "Main job: run the positive control, train train.seeds independent models (or reuse them), check the "
               "regime (K = 0,1,2,4, n-grams, attention), compare allocation methods (uniform, random, calibrated "
               "heuristics, three learned policies, oracle) on each and over models, write results/quick/");
  sub->add_option("--config", opts->config, "Config to train (name in configs/ or a file)")->capture_default_str();
  sub->add_option("--out", opts->out, "Output folder")->capture_default_str();
  sub->add_flag("--retrain", opts->retrain, "Train even when a matching checkpoint exists");
  sub->add_option("--seeds", opts->seeds, "Override compare.seeds")->check(CLI::NonNegativeNumber);
  sub->add_option("--windows", opts->windows, "Override compare.windows_per_seed")->check(CLI::NonNegativeNumber);
  sub->add_option("--control", opts->control,
                  "Config of the positive control run first into <out>/control (reused when this build made it); "
                  "'none' skips it")->capture_default_str();
  add_override_options(sub, opts->over, true);
  add_device_override(sub, opts->device);
  sub->callback([opts] { run_quick(*opts); });
}

}  // namespace ponder::cli
