// `ponder ablate`: the learned-reinforce ablations of ponder.md §4 (γ, λ, step options, MLP vs causal LSTM,
// decision unit) as one comparison run on a trained checkpoint; writes ablation.md, ablation.json and a plot per
// group, plus the comparison's own report.md / results.json for the same cells.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "experiments/ablate.h"
#include "experiments/commands.h"
#include "experiments/compare_job.h"
#include "experiments/device.h"
#include "experiments/report.h"
#include "experiments/training.h"

namespace ponder::cli {
namespace {

struct AblateArgs {
  std::string config = "tiny";
  std::string checkpoint;
  std::string out = "results/ablate";
  std::string groups;  // empty: all
  int64_t seeds = 0, windows = 0, iterations = 0;
  std::string device;
};

void run(const AblateArgs& a) {
  RunConfig cfg = load_config(resolve_config(a.config));
  CompareOptions opt = cfg.compare;
  if (a.seeds > 0) opt.seeds = a.seeds;
  if (a.windows > 0) opt.windows_per_seed = a.windows;
  if (a.iterations > 0) opt.learn.reinforce.iterations = a.iterations;
  const Device device = run_device(a.device, cfg.device, cfg.source);
  const ttt::Checkpoint ck = ttt::load_checkpoint(a.checkpoint);
  const TrainedModel m = load_trained(ck, a.checkpoint, device);
  const Dataset ds = load_dataset(m.config.data);
  const std::vector<AblationGroup> groups =
      select_groups(ablation_groups(opt.learn, m.model.config().mini_batch, opt.seq_len), a.groups);
  opt.methods = ablation_methods(groups, opt.budget_k);
  opt.frontier_mus.clear();  // no oracle here: its frontier would only cost time
  std::fprintf(stderr, "ablate: device %s; %zu cells (%s) × %lld seeds × %lld windows\n", describe_device(device).c_str(),
               opt.methods.size() - 1, a.groups.empty() ? "all groups" : a.groups.c_str(), (long long)opt.seeds,
               (long long)opt.windows_per_seed);
  std::filesystem::create_directories(a.out);
  CompareResult r = run_compare(m.model, ds.valid, ds.test, opt, stderr_progress("ablate"));
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  const auto prov = provenance(m, ds, a.checkpoint, "ponder ablate");
  write_compare_outputs(r, opt, prov, a.out);
  std::printf("%s\nablation: %s/ablation.md\n", write_ablation_outputs(r, groups, opt, prov, a.out).c_str(),
              a.out.c_str());
}

}  // namespace

void register_ablate(CLI::App& app) {
  auto args = std::make_shared<AblateArgs>();
  CLI::App* sub = app.add_subcommand(
      "ablate", "Ablations of learned-reinforce (gamma, lambda, step options, MLP vs LSTM, unit size) on a trained "
                "checkpoint: tables with CIs and paired tests vs uniform at the budget, one plot per group");
  sub->add_option("--config", args->config, "Config whose compare: and learn: sections set seeds and learners")
      ->capture_default_str();
  sub->add_option("--checkpoint", args->checkpoint, "Trained model (ponder train's checkpoint.ckpt)")->required();
  sub->add_option("--out", args->out, "Output folder")->capture_default_str();
  sub->add_option("--groups", args->groups, "Comma-separated subset of gamma,lambda,options,net,unit (default all)");
  sub->add_option("--seeds", args->seeds, "Override compare.seeds")->check(CLI::NonNegativeNumber);
  sub->add_option("--windows", args->windows, "Override compare.windows_per_seed")->check(CLI::NonNegativeNumber);
  sub->add_option("--iterations", args->iterations, "Override learn.reinforce_iterations")
      ->check(CLI::NonNegativeNumber);
  add_device_override(sub, args->device);
  sub->callback([args] { run(*args); });
}

}  // namespace ponder::cli
