// `ponder compare`: every method × seeds on held-out windows of a trained checkpoint, with
// calibration, the oracle and the statistics; writes results.json, report.md and the figures.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "experiments/bench_util.h"
#include "experiments/build_info.h"
#include "experiments/commands.h"
#include "experiments/compare_job.h"
#include "experiments/device.h"
#include "experiments/training.h"

namespace ponder::cli {
namespace {

struct CompareArgs {
  std::string config = "tiny";
  std::string checkpoint;
  std::string out = "results/compare";
  int64_t seeds = 0, windows = 0;
  std::string device;  // empty: the config's model.device
};

void run(const CompareArgs& a) {
  RunConfig cfg = load_config(resolve_config(a.config));
  if (a.seeds > 0) cfg.compare.seeds = a.seeds;
  if (a.windows > 0) cfg.compare.windows_per_seed = a.windows;
  const Device device = run_device(a.device, cfg.device, cfg.source);
  std::fprintf(stderr, "compare: device %s\n", describe_device(device).c_str());
  const ttt::Checkpoint ck = ttt::load_checkpoint(a.checkpoint);
  const TrainedModel m = load_trained(ck, a.checkpoint, device);
  const Dataset ds = load_dataset(m.config.data);
  std::filesystem::create_directories(a.out);
  std::printf("%s", run_compare_job(m, ds, cfg.compare, a.checkpoint, a.out).c_str());
}

}  // namespace

void register_compare(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* sub = app.add_subcommand(
      "compare", "Compare allocation methods (uniform, random, heuristics, oracle) over seeds on held-out windows of "
                 "a trained checkpoint; writes results.json, report.md, pareto.png, k_hist.png, tokens.html");
  sub->add_option("--config", args->config, "Config whose compare: section sets methods and seeds")->capture_default_str();
  sub->add_option("--checkpoint", args->checkpoint, "Trained model (ponder train's checkpoint.ckpt)")->required();
  sub->add_option("--out", args->out, "Output folder")->capture_default_str();
  sub->add_option("--seeds", args->seeds, "Override compare.seeds")->check(CLI::NonNegativeNumber);
  sub->add_option("--windows", args->windows, "Override compare.windows_per_seed")->check(CLI::NonNegativeNumber);
  add_device_override(sub, args->device);
  sub->callback([args] { run(*args); });
}

}  // namespace ponder::cli
