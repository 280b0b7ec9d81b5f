// `ponder quick`: the README's main job, in a regime where the answer could be yes. Trains the config's TTT model
// (configs/quick.yaml: long windows of held-out-repository Python code) and an attention-only model of the same size,
// or reuses them when their config text and git commit match this build (continuing an interrupted run); checks that
// the question is live on whole held-out streams (carry factor, loss by position, TTT vs uniform-0, count n-grams,
// attention); then compares allocation methods and writes results/quick/report.md, results.json and the figures.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "data/tokens.h"
#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/model/device.h"
#include "experiments/process/parts.h"
#include "experiments/study/plots.h"
#include "experiments/model/regime.h"
#include "experiments/study/replicates.h"
#include "experiments/model/training.h"
#include "tensor/cpu/runtime.h"
#include "util/files.h"

namespace ponder::cli {
namespace cmd_quick {
namespace {

struct QuickArgs {
  std::string config = "quick";
  std::string out = "results/quick";
  bool retrain = false;
  int64_t seeds = 0, windows = 0;  // override the config's compare.seeds / compare.windows_per_seed
  std::string device;              // empty: the config's model.device
  ConfigOverrides over;             // --set, --seed on the main config (not the control's)
  // The positive control's config, run first into <out>/control; "none" skips it. The CI-size control by default:
  // the same data and verdict as planted.yaml in 2.5 instead of 4.6 minutes of one core (`ponder control` runs that).
  std::string control = "ci_planted";
  int jobs = 0;                     // parts run side by side; 0: as many as threads, at most 4
};

// The positive control, first (experiments/study/control.h): its verdict heads the report, so that a null result below can
// be read. Skipped with --control none, and the report then says it was not run.
std::pair<nlohmann::ordered_json, std::string> positive_control(const QuickArgs& o, bool retrain) {
  const std::string dir = (std::filesystem::path(o.out) / "control").string();
  if (o.control == "none")
    return {{{"ran", false}}, "**Positive control: not run** (--control none). Run `ponder control` to check that this "
                              "build finds the effect planted in generated data; without it, a null result here says "
                              "nothing about allocation.\n\n"};
  ControlArgs ca;
  ca.config = o.control;
  ca.out = dir;
  ca.retrain = retrain;
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
                             const std::map<int64_t, double>& curve, int threads) {
  std::ostringstream md;
  char line[64];
  md << "\n## Training\n\nTTT model (" << cfg.source << ", " << m.model.num_parameters() << " parameters, token factor "
     << cfg.model.token_factor << ") trained " << cfg.train.steps << " steps on windows of " << cfg.train.seq_len
     << " tokens of " << ds.corpus.name << " with K drawn per unit and layer from {";
  for (size_t i = 0; i < cfg.train.step_options.size(); ++i) md << (i ? "," : "") << cfg.train.step_options[i];
  md << "} (" << ttt::mode_name(cfg.train.mode) << " mode). Validation bits/byte (" << cfg.eval.inner.schedule.text << ", "
     << cfg.eval.max_windows << " windows of the validation split; `training.png` draws the training loss, validation bits/byte and each TTT "
        "layer's carry token factor for every model trained here):\n\n| step | val bpb |\n|---|---|\n";
  for (const auto& [step, bpb] : curve) {
    std::snprintf(line, sizeof line, "| %lld | %.4f |\n", (long long)step, bpb);
    md << line;
  }
  md << "\nconfig " << cfg.source << ", seed " << cfg.train.seed << ", commit " << git_commit() << " (" << build_type()
     << " build, " << threads << " thread(s) per part), corpus " << ds.corpus.source << "\n\n```yaml\n" << cfg.text
     << "```\n";
  return md.str();
}

// The i-th of the train.seeds independent models (train.seed + i): trained in OUT (i = 0) or OUT/model-<i+1>,
// compared in OUT/model-<i+1>.
struct ModelRun {
  RunConfig cfg;
  std::string train_dir, compare_dir;
};

std::vector<ModelRun> model_runs(const RunConfig& cfg, const std::string& out) {
  std::vector<ModelRun> runs;
  for (int64_t i = 0; i < std::max<int64_t>(1, cfg.train_seeds); ++i) {
    ConfigOverrides seed;
    seed.seed = int64_t(cfg.train.seed) + i;
    const std::string dir = (std::filesystem::path(out) / ("model-" + std::to_string(i + 1))).string();
    runs.push_back({i == 0 ? cfg : apply_overrides(cfg, seed), i == 0 ? out : dir, dir});
  }
  return runs;
}

// A model's comparison, or its finished outputs when this binary made them from the same checkpoint and config.
CompareResult compare_model(const ModelRun& r, const TrainedModel& m, const Dataset& ds, const CompareOptions& copt) {
  const std::string ckpt = checkpoint_path(r.train_dir);
  std::filesystem::create_directories(r.compare_dir);
  return reuse_or_run(r.compare_dir, run_fingerprint(ckpt, r.cfg.text), [&] {
    CompareResult res;
    run_compare_job(m, ds, copt, ckpt, r.cfg.text, r.compare_dir, &res);
    return res;
  });
}

CompareOptions compare_options(const RunConfig& cfg, const QuickArgs& o) {
  CompareOptions copt = cfg.compare;
  if (o.seeds > 0) copt.seeds = o.seeds;
  if (o.windows > 0) copt.windows_per_seed = o.windows;
  return copt;
}

// Seconds on one thread, roughly (the quick model trains at ~11k tokens/s on one thread of a 2-core VM); only the
// order and the ETA depend on it.
double train_estimate(const RunConfig& cfg) {
  const double size = std::max(0.5, double(cfg.model.d * cfg.model.d) / (128.0 * 128.0) * double(cfg.model.layers) / 2);
  return double(cfg.train.steps * cfg.train.batch_size * cfg.train.seq_len) / 11000.0 * size;
}

// Everything that does not depend on another model: the control, the attention baseline, each model's training and
// then its comparison. Run side by side first (experiments/process/parts.h); the serial pass in run_quick then reuses them.
std::vector<Part> quick_parts(const RunConfig& cfg, const QuickArgs& o, Device device) {
  std::vector<Part> parts;
  if (o.control != "none") {
    // Its comparison scores the whole test split: 2.8 times its training in all (211 s for ci_planted.yaml).
    const double est = train_estimate(apply_overrides(load_config(resolve_config(o.control)), {})) * 2.8;
    parts.push_back({"control", {}, est, [o] { positive_control(o, o.retrain); }});
  }
  if (cfg.streams.attention_baseline)
    parts.push_back({"attention", {}, train_estimate(cfg), [cfg, o, device] {
                       bool reused = false;
                       train_or_reuse(attention_config(cfg), o.out + "/attention", o.retrain, device, this_build(), reused);
                     }});
  const CompareOptions copt = compare_options(cfg, o);
  for (const ModelRun& r : model_runs(cfg, o.out)) {
    const std::string name = std::filesystem::path(r.compare_dir).filename().string();
    parts.push_back({name + "-train", {}, train_estimate(r.cfg), [r, o, device] {
                       bool reused = false;
                       train_or_reuse(r.cfg, r.train_dir, o.retrain, device, this_build(), reused);
                     }});
    parts.push_back({name + "-compare", {name + "-train"}, 0.7 * train_estimate(r.cfg), [r, copt, device] {
                       bool reused = false;
                       const TrainedModel m = train_or_reuse(r.cfg, r.train_dir, false, device, this_build(), reused);
                       compare_model(r, m, load_dataset(r.cfg.data), copt);
                     }});
  }
  return parts;
}

// Model 1's comparison outputs, copied from OUT/model-1 into OUT, where the regime checks and the statistics over
// models are merged into them.
void copy_first_model(const std::string& out) {
  for (const char* f : {"report.md", "results.json", "tokens.html", "k_hist.png"})
    std::filesystem::copy_file(out + "/model-1/" + f, out + "/" + f, std::filesystem::copy_options::overwrite_existing);
}

void run_quick(const QuickArgs& o) {
  const RunConfig cfg = apply_overrides(load_config(resolve_config(o.config)), o.over);
  const Device device = run_device(o.device, cfg);
  std::fprintf(stderr, "quick: device %s\n", describe_device(device).c_str());
  util::lock_output_dir(o.out);  // its parts, forked below, share the lock
  const int threads = cpu::num_threads();
  // A process forked after CUDA was initialised cannot use it: on a GPU the parts run one after another here.
  const int jobs = device == Device::CUDA ? 1 : o.jobs > 0 ? o.jobs : std::clamp(threads, 1, 4);
  const std::string attn_dir = (std::filesystem::path(o.out) / "attention").string();
  const auto t0 = std::filesystem::file_time_type::clock::now();
  run_parts(quick_parts(cfg, o, device), jobs, threads, o.out + "/logs", "quick");
  // A checkpoint written before the parts ran was reused from an earlier run.
  const auto older = [&](const std::string& dir) { return std::filesystem::last_write_time(checkpoint_path(dir)) < t0; };

  // The serial pass: every part above is finished, so what follows reuses it (no --retrain here).
  const auto [control_json_, control_md] = positive_control(o, false);
  bool unused = false;
  const TrainedModel m = train_or_reuse(cfg, o.out, false, device, this_build(), unused);
  const bool reused = older(o.out);
  std::optional<TrainedModel> attn;
  if (cfg.streams.attention_baseline) attn = train_or_reuse(attention_config(cfg), attn_dir, false, device, this_build(), unused);
  const bool attn_reused = attn && older(attn_dir);
  const Dataset ds = load_dataset(cfg.data);

  RegimeResult regime = run_regime(m, attn ? &*attn : nullptr, ds, regime_options(cfg.streams), stderr_progress("regime"));
  if (attn) regime.attention_checkpoint = checkpoint_path(attn_dir);
  const std::map<int64_t, double> curve = training_curve(log_path(o.out));

  // Each model's comparison (its own report.md, results.json and figures in OUT/model-<i>); model 1's outputs are
  // copied into OUT, and the regime checks before them and the training after them are merged into both files.
  const CompareOptions copt = compare_options(cfg, o);
  std::vector<CompareResult> runs;
  std::vector<std::string> labels;
  std::vector<std::pair<std::string, std::string>> logs;
  for (const ModelRun& r : model_runs(cfg, o.out)) {
    bool r_reused = false;
    std::optional<TrainedModel> other;
    if (r.train_dir != o.out) other = train_or_reuse(r.cfg, r.train_dir, false, device, this_build(), r_reused);
    runs.push_back(compare_model(r, other ? *other : m, ds, copt));
    labels.push_back(checkpoint_path(r.train_dir));
    logs.push_back({"model " + std::to_string(runs.size()) + " (seed " + std::to_string(r.cfg.train.seed) + ")",
                    log_path(r.train_dir)});
  }
  copy_first_model(o.out);
  if (attn) logs.push_back({"attention-only", log_path(attn_dir)});
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
  const std::optional<std::string> compared = util::read_file(o.out + "/results.json");
  const nlohmann::json deg = compared ? nlohmann::json::parse(*compared).value("degenerate", nlohmann::json()) : nlohmann::json();
  std::string flag;
  if (deg.is_object() && deg.value("value", false))
    for (const auto& why : deg["reason"]) flag += "**Degenerate by construction**: " + why.get<std::string>() + ".\n\n";
  const std::string intro = "# ponder quick\n\n" + flag + control_md + "Corpus " + ds.corpus.source + ".\n\n" +
                            regime_markdown(regime) + "\n" + replicates_markdown(reps) +
                            "**Below: the first model (train.seed " + std::to_string(cfg.train.seed) + ") in detail.**\n\n";
  merge_outputs(o.out, top, intro, training_section(cfg, m, ds, curve, jobs > 1 ? std::max(1, threads / jobs) : threads));
  // The figures after the results, as write_compare_outputs does: a missing plotting tool loses no numbers.
  write_position_plot(regime, o.out);
  write_training_figure(o.out + "/training.png", logs);
  write_compare_figures(o.out);  // again, now that results.json holds the statistics over models
  std::printf("%s\n%s\nreport: %s/report.md\nresults: %s/results.json\nfigures: %s/loss_by_position.png, "
              "%s/pareto.png, %s/forest.png, %s/training.png, %s/k_hist.png, %s/tokens.html\n",
              regime_markdown(regime).c_str(), replicates_markdown(reps).c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str(),
              o.out.c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str());
}

}  // namespace
}  // namespace cmd_quick

void register_quick(CLI::App& app) {
  using namespace cmd_quick;
  auto opts = std::make_shared<QuickArgs>();
  CLI::App* sub = app.add_subcommand(
      "quick", "Main job: run the positive control, train train.seeds independent models (or reuse them), check the "
               "regime (K = 0,1,2,4, n-grams, attention), compare allocation methods (uniform, random, calibrated "
               "heuristics, three learned policies, oracle) on each and over models, write results/quick/");
  sub->add_option("--config", opts->config, "Config to train (name in configs/ or a file)")->capture_default_str();
  sub->add_option("--out", opts->out, "Output folder")->capture_default_str()->check(kNonEmpty);
  sub->add_flag("--retrain", opts->retrain, "Train afresh: replace a matching checkpoint, or another run's found in --out");
  sub->add_option("--seeds", opts->seeds, "Override compare.seeds")->check(kPositive);
  sub->add_option("--windows", opts->windows, "Override compare.windows_per_seed")->check(kNonNegative);
  sub->add_option("--control", opts->control,
                  "Config of the positive control run first into <out>/control (reused when this build made it): "
                  "ci_planted (the default) or planted (1,500 training steps instead of 800, 3 seeds, with a learned "
                  "policy), a file, or 'none' to skip it")->capture_default_str();
  sub->add_option("--jobs", opts->jobs,
                  "Parts (the control, each model's training and comparison, the attention baseline) run side by "
                  "side, threads shared among them; 0: as many as --threads, at most 4; 1: one after another in this "
                  "process")->check(kNonNegative);
  add_override_options(sub, opts->over, true);
  add_device_override(sub, opts->device);
  sub->callback([opts] { run_quick(*opts); });
}

PONDER_COMMAND(quick, register_quick);

}  // namespace ponder::cli
