// `ponder quick`: the README's main job. Trains the tiny model on Moby Dick with randomised schedules
// over K ∈ {0,1,2,4} (or reuses results/quick/checkpoint.ckpt when its config text and git commit match
// this build, continuing it if it was interrupted), then evaluates it on the held-out test split under
// uniform schedules K = 0, 1, 2, 4 (carry mode, dual path) and writes results/quick/report.md and
// results/quick/results.json.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "data/tokens.h"
#include "experiments/build_info.h"
#include "experiments/commands.h"
#include "experiments/compare_job.h"
#include "experiments/device.h"
#include "experiments/training.h"
#include "tensor/cpu/cpu_kernels.h"

namespace ponder::cli {
namespace {

const std::vector<int> kSteps = {0, 1, 2, 4};

struct Options {
  std::string config = "tiny";
  std::string out = "results/quick";
  int64_t max_windows = 0;  // of the test split; 0 = all
  bool retrain = false;
  int64_t seeds = 0, windows = 0;  // override the config's compare.seeds / compare.windows_per_seed
  std::string device;              // empty: the config's model.device
};

// What to do with the checkpoint at `path`: use it when it is a finished run of `cfg` by this build,
// continue it when that run was interrupted, else train afresh (saying why on stderr).
enum class Cached { Reuse, Resume, Retrain };
Cached inspect(const std::string& path, const RunConfig& cfg, ttt::Checkpoint& ck) {
  if (!std::filesystem::exists(path)) return Cached::Retrain;
  std::string why;
  try {
    ck = ttt::load_checkpoint(path);
    if (ck.config_text != cfg.text) why = "its config differs from " + cfg.source;
    else if (ck.meta_value("commit") != git_commit()) why = "it was trained by commit " + ck.meta_value("commit");
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty()) return ck.step < cfg.train.steps ? Cached::Resume : Cached::Reuse;
  std::fprintf(stderr, "quick: not reusing %s: %s\n", path.c_str(), why.c_str());
  return Cached::Retrain;
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

struct Row {
  int k;
  ttt::EvalResult r;
};

std::string table(const std::vector<Row>& rows) {
  std::ostringstream s;
  char line[256];
  s << "| schedule | bits/byte | loss (nats) | FLOPs/token | inner TTT FLOPs/token | inner share | vs uniform-0 |\n"
    << "|---|---|---|---|---|---|---|\n";
  for (const Row& row : rows) {
    std::snprintf(line, sizeof line, "| uniform-%d | %.4f | %.4f | %.4g | %.4g | %.1f%% | %.3fx |\n", row.k, row.r.bpb,
                  row.r.loss, row.r.flops_per_token, row.r.inner_flops_per_token,
                  100.0 * row.r.inner_flops_per_token / row.r.flops_per_token,
                  row.r.flops_per_token / rows.front().r.flops_per_token);
    s << line;
  }
  return s.str();
}

void run_quick(const Options& o) {
  const RunConfig cfg = load_config(resolve_config(o.config));
  const Device device = run_device(o.device, cfg.device, cfg.source);
  std::fprintf(stderr, "quick: device %s\n", describe_device(device).c_str());
  const std::string ckpt = checkpoint_path(o.out);
  ttt::Checkpoint cached;
  const Cached state = o.retrain ? Cached::Retrain : inspect(ckpt, cfg, cached);
  const bool reuse = state == Cached::Reuse;
  if (reuse) {
    std::fprintf(stderr, "quick: reusing %s (same config and commit)\n", ckpt.c_str());
  } else {
    if (state == Cached::Retrain) {
      std::filesystem::remove(ckpt);
      std::filesystem::remove(log_path(o.out));
    }
    TrainJob job;
    job.config = cfg;
    job.out_dir = o.out;
    job.resume = state == Cached::Resume ? &cached : nullptr;
    job.provenance = {version(), git_commit(), build_type()};
    job.device = device;
    run_train_job(job);
  }

  const ttt::Checkpoint ck = ttt::load_checkpoint(ckpt);
  const TrainedModel m = load_trained(ck, ckpt, device);
  const Dataset ds = load_dataset(cfg.data);
  const data::EvalWindows windows(ds.test, cfg.train.seq_len, o.max_windows);
  const double entropy = data::unigram_entropy_bits(ds.train.docs);
  std::vector<Row> rows;
  for (int k : kSteps) {
    const ttt::InnerRun inner{"uniform-" + std::to_string(k), ttt::StepMode::Carry, ttt::InnerPath::Dual};
    rows.push_back({k, ttt::evaluate(m.model, windows, eval_options(m, inner))});
    std::fprintf(stderr, "quick: uniform-%d: %.4f bits/byte (%.1f s)\n", k, rows.back().r.bpb, rows.back().r.seconds);
  }
  const std::map<int64_t, double> curve = training_curve(log_path(o.out));

  std::ostringstream md;
  char line[64];
  md << "# ponder quick\n\n"
     << "Tiny TTT-Linear model (" << cfg.source << ", " << m.model.num_parameters() << " parameters) trained "
     << cfg.train.steps << " steps on " << ds.corpus.name << " with K drawn per unit and layer from {";
  for (size_t i = 0; i < cfg.train.step_options.size(); ++i) md << (i ? "," : "") << cfg.train.step_options[i];
  md << "} (" << ttt::mode_name(cfg.train.mode) << " mode), evaluated on the held-out test split (" << windows.size()
     << " windows of " << cfg.train.seq_len << " bytes) under uniform schedules, carry mode, dual path.\n\n"
     << table(rows) << "\nFLOPs are counted by the engine for the whole forward pass; the inner part is what the TTT "
     << "layers spent on inner forward, inner gradient, update and output per unit.\n\n"
     << "Unigram entropy of the training split: " << entropy << " bits/byte (the best context-free model).\n\n"
     << "Validation bits/byte during training (" << cfg.eval.inner.schedule << ", "
     << ttt::mode_name(cfg.eval.inner.mode) << " mode, " << ttt::path_name(cfg.eval.inner.path) << " path, "
     << cfg.eval.max_windows << " windows of the validation split):\n\n| step | val bpb |\n|---|---|\n";
  for (const auto& [step, bpb] : curve) {
    std::snprintf(line, sizeof line, "| %lld | %.4f |\n", (long long)step, bpb);
    md << line;
  }
  md << "\nconfig " << cfg.source << ", seed " << cfg.train.seed << ", commit " << git_commit() << " (" << build_type()
     << " build, " << cpu::num_threads() << " threads), data " << ds.corpus.name << " sha256 " << ds.corpus.sha256
     << "\n\n```yaml\n" << cfg.text << "```\n";

  nlohmann::ordered_json j = {
      {"config_source", cfg.source}, {"config", cfg.text}, {"seed", cfg.train.seed}, {"commit", git_commit()},
      {"version", version()}, {"build_type", build_type()}, {"threads", cpu::num_threads()},
      {"corpus", ds.corpus.name}, {"data_sha256", ds.corpus.sha256}, {"checkpoint", ckpt},
      {"reused_checkpoint", reuse}, {"trained_steps", m.step}, {"unigram_entropy_bits", entropy},
      {"test_windows", windows.size()}, {"results", nlohmann::ordered_json::array()},
      {"training_curve", nlohmann::ordered_json::array()}};
  j["device"] = describe_device(device);
  for (const Row& row : rows) j["results"].push_back(eval_json(row.r, {"uniform-" + std::to_string(row.k)}));
  for (const auto& [step, bpb] : curve) j["training_curve"].push_back({{"step", step}, {"val_bpb", bpb}});

  std::filesystem::create_directories(o.out);
  const std::string report = (std::filesystem::path(o.out) / "report.md").string();
  const std::string results = (std::filesystem::path(o.out) / "results.json").string();
  std::printf("%s\nunigram entropy of the training split: %.4f bits/byte\n", table(rows).c_str(), entropy);

  // The comparison of allocation methods (writes report.md, results.json and the figures), then the
  // training and full-test-split sections above appended to both.
  CompareOptions copt = cfg.compare;
  if (o.seeds > 0) copt.seeds = o.seeds;
  if (o.windows > 0) copt.windows_per_seed = o.windows;
  const std::string headline = run_compare_job(m, ds, copt, ckpt, cfg.text, o.out);
  {
    std::ofstream out(report, std::ios::app);
    out << "\n## Training, and uniform schedules on the whole test split\n\n" << md.str();
  }
  nlohmann::ordered_json all;
  {
    std::ifstream in(results);
    all = nlohmann::ordered_json::parse(in);
  }
  all["training"] = j;
  std::ofstream(results) << all.dump(1) << "\n";
  std::printf("\n%s\nreport: %s\nresults: %s\nfigures: %s/pareto.png, %s/k_hist.png, %s/tokens.html\n",
              headline.c_str(), report.c_str(), results.c_str(), o.out.c_str(), o.out.c_str(), o.out.c_str());
}

}  // namespace

void register_quick(CLI::App& app) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "quick", "Main job: train the tiny model (or reuse it), evaluate K = 0,1,2,4, compare allocation methods "
               "(uniform, random, calibrated heuristics, oracle) over seeds, write results/quick/");
  sub->add_option("--config", opts->config, "Config to train (name in configs/ or a file)")->capture_default_str();
  sub->add_option("--out", opts->out, "Output folder")->capture_default_str();
  sub->add_option("--max-windows", opts->max_windows, "Test windows to evaluate; 0 = all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_flag("--retrain", opts->retrain, "Train even when a matching checkpoint exists");
  sub->add_option("--seeds", opts->seeds, "Override compare.seeds")->check(CLI::NonNegativeNumber);
  sub->add_option("--windows", opts->windows, "Override compare.windows_per_seed")->check(CLI::NonNegativeNumber);
  add_device_override(sub, opts->device);
  sub->callback([opts] { run_quick(*opts); });
}

}  // namespace ponder::cli
