// `ponder control`: the positive control (experiments/study/control.h). Trains the planted config's model (or reuses it),
// runs the comparison on the planted corpus's held-out documents, and says whether the pipeline found the effect
// planted there. `ponder quick` runs the same thing first and puts the verdict at the top of its report.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>


#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/study/control.h"
#include "experiments/model/device.h"
#include "experiments/model/training.h"
#include "util/files.h"

namespace ponder::cli {

namespace cmd_control {
namespace {

// The verdict of a finished control in `dir` made by this build (this very binary, or a clean build of the same
// commit) from the same config text, if any: rerunning `ponder quick` need not redo a control whose answer cannot
// have changed.
std::optional<ControlVerdict> finished_control(const std::string& dir, const RunConfig& cfg) {
  const std::optional<std::string> text = util::read_file(dir + "/results.json");
  if (!text) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  const std::string commit = git_commit();
  if (!j.is_object() || !j.contains("positive_control") || j.value("config", "") != cfg.text) return std::nullopt;
  const bool same_binary = j.value("binary_sha256", "") == binary_sha256();
  const bool same_clean_commit = j.value("commit", "") == commit && commit.find("dirty") == std::string::npos &&
                                 commit != "unknown";
  if (!same_binary && !same_clean_commit) return std::nullopt;
  return control_from_json(j["positive_control"]);
}

}  // namespace
}  // namespace cmd_control

ControlVerdict run_positive_control(const ControlArgs& a) {
  using namespace cmd_control;
  const RunConfig cfg = apply_overrides(load_config(resolve_config(a.config)), a.over);
  if (cfg.data.corpus != "planted")
    throw std::invalid_argument("control: " + cfg.source + " trains on '" + cfg.data.corpus +
                                "'; the positive control needs data.corpus: planted");
  const std::string report = (std::filesystem::path(a.out) / "report.md").string();
  util::lock_output_dir(a.out);
  if (!a.retrain)
    if (const std::optional<ControlVerdict> done = finished_control(a.out, cfg)) {
      std::fprintf(stderr, "control: %s (reused: %s was made by this build from the same config)\n",
                   done->passed ? "passed" : "FAILED", report.c_str());
      return *done;
    }
  const Device device = run_device(a.device, cfg);
  bool reused = false;
  const TrainedModel m = train_or_reuse(cfg, a.out, a.retrain, device, {version(), git_commit(), build_type()}, reused);
  const Dataset ds = load_dataset(cfg.data);
  CompareResult r;
  run_compare_job(m, ds, cfg.compare, checkpoint_path(a.out), cfg.text, a.out, &r);
  const ControlVerdict v = judge_control(r, cfg.compare);
  merge_outputs(a.out, {{"positive_control", control_json(v)}, {"binary_sha256", binary_sha256()}},
                "# ponder control\n\n" + control_markdown(v, report),
                "");
  std::fprintf(stderr, "control: %s (report %s)\n", v.passed ? "passed" : "FAILED", report.c_str());
  return v;
}

void register_control(CLI::App& app) {
  using namespace cmd_control;
  auto a = std::make_shared<ControlArgs>();
  CLI::App* sub = app.add_subcommand(
      "control", "Positive control: train on the planted corpus (or reuse), compare, and say whether the pipeline "
                 "finds the effect planted there (exit 1 if not)");
  sub->add_option("--config", a->config, "Config with data.corpus: planted")->capture_default_str();
  sub->add_option("--out", a->out, "Output folder")->capture_default_str()->check(kNonEmpty);
  sub->add_flag("--retrain", a->retrain, "Train afresh: replace a matching checkpoint, or another run's found in --out");
  add_override_options(sub, a->over, true);
  add_device_override(sub, a->device);
  sub->callback([a] {
    if (!run_positive_control(*a).passed) throw CLI::RuntimeError(1);
  });
}

PONDER_COMMAND(control, register_control);

}  // namespace ponder::cli
