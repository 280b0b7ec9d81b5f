// `ponder train`: trains the language model a config describes (experiments/model/config.h), writing
// checkpoints and a JSON-lines log to the output folder; `--resume` continues the run found there. Under
// `mpirun -np N` the N ranks train one model data-parallel (ttt/train.h); rank 0 writes the folder.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/config_cli.h"
#include "experiments/model/device.h"
#include "experiments/model/training.h"
#include "tensor/dist.h"

namespace ponder::cli {
namespace cmd_train {
namespace {

struct TrainArgs {
  std::string config, out;
  std::string device;      // empty: the config's model.device
  bool resume = false;
  int64_t steps = 0;       // 0: the config's
  int64_t stop_after = 0;  // 0: run to the end
  ConfigOverrides over;    // --set, --seed
};

// The config's own text with --set and --seed applied; the result is what the checkpoint records, so a run
// trained with overrides resumes and reports exactly as if they had been written in the file.
void apply_overrides(const TrainArgs& o, TrainJob& job) {
  ConfigOverrides over = o.over;
  for (const std::string& set : over.sets)
    if (o.steps > 0 && set.rfind("train.steps=", 0) == 0)
      throw std::invalid_argument("train: --steps " + std::to_string(o.steps) + " and --set " + set +
                                  " both set the step count; give one of them");
  if (o.steps > 0 && o.steps != job.config.train.steps) over.sets.push_back("train.steps=" + std::to_string(o.steps));
  job.config = cli::apply_overrides(job.config, over);
}

// The job `o` asks for, with the checkpoint it continues (when it does) loaded into `ck`.
void prepare_job(const TrainArgs& o, TrainJob& job, ttt::Checkpoint& ck) {
  if (o.config.empty() && !o.resume) throw std::invalid_argument("train: --config is required (or --resume)");
  if (o.config.empty() && o.out.empty()) throw std::invalid_argument("train --resume: --out names the run to continue");
  const std::string out =
      !o.out.empty() ? o.out : "runs/" + std::filesystem::path(resolve_config(o.config)).stem().string();
  job.out_dir = out;
  job.stop_after = o.stop_after;
  job.provenance = {version(), git_commit(), build_type()};
  const bool nothing_saved = !std::filesystem::exists(checkpoint_path(out));
  if (o.resume && nothing_saved && !o.config.empty()) {
    // Stopped before its first checkpoint: there is nothing to continue, and starting over loses nothing.
    if (dist::rank() == 0)
      std::fprintf(stderr, "train --resume: no checkpoint in %s yet (stopped before the first one); starting at step "
                   "0\n", out.c_str());
    job.config = load_config(resolve_config(o.config));
  } else if (o.resume) {
    if (nothing_saved)
      throw std::invalid_argument("train --resume: no checkpoint in '" + out + "' to continue; pass --config too to "
                                  "start that run over");
    ck = ttt::load_checkpoint(checkpoint_path(out));
    job.resume = &ck;
    job.config = parse_config(ck.config_text, checkpoint_path(out) + " (its config)");
    // A config given with --resume must be the run's own: anything else would silently change the run.
    if (!o.config.empty() && load_config(resolve_config(o.config)).text != ck.config_text)
      throw std::invalid_argument("train --resume: " + resolve_config(o.config) + " differs from the config stored "
                                  "in '" + checkpoint_path(out) + "'; drop --config to continue that run");
  } else {
    job.config = load_config(resolve_config(o.config));
  }
  if (o.resume && !nothing_saved && !o.over.empty())
    throw std::invalid_argument("train --resume: --set and --seed would change the run; they apply to a new run only");
  apply_overrides(o, job);
  if (job.resume && ck.step >= job.config.train.steps)
    throw std::invalid_argument("train --resume: '" + checkpoint_path(out) + "' is at step " +
                                std::to_string(ck.step) + " of " + std::to_string(job.config.train.steps) +
                                "; nothing left to train (raise --steps to continue)");
  job.device = run_device(o.device, job.config);
}

void run_train(const TrainArgs& o) {
  dist::init();  // under mpirun -np N: N ranks train one model together (ttt/train.h)
  TrainJob job;
  ttt::Checkpoint ck;
  dist::together([&] { prepare_job(o, job, ck); });
  const TrainOutcome r = run_train_job(job);
  if (dist::rank() != 0) return;
  std::printf("trained to step %lld; checkpoint %s; log %s\n", (long long)r.result.final_step, r.checkpoint.c_str(),
              log_path(job.out_dir).c_str());
  for (const auto& [step, bpb] : r.result.val_bpb)
    std::printf("  step %6lld  val %.4f bits/byte\n", (long long)step, bpb);
}

}  // namespace
}  // namespace cmd_train

void register_train(CLI::App& app) {
  using namespace cmd_train;
  auto opts = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train a TTT language model from a YAML config");
  sub->add_option("--config", opts->config, "Config file, or the name of one in configs/ (tiny, small, ci)");
  sub->add_option("--out", opts->out, "Output folder for checkpoint.ckpt and train.jsonl (default runs/<config>)")->check(kNonEmpty);
  sub->add_flag("--resume", opts->resume, "Continue the run whose checkpoint is in --out");
  add_device_override(sub, opts->device);
  sub->add_option("--steps", opts->steps, "Total optimiser steps (overrides train.steps)")->check(kPositive);
  sub->add_option("--stop-after", opts->stop_after, "Stop after this step with a checkpoint (resume later)")
      ->check(kPositive);
  add_override_options(sub, opts->over, true);
  sub->callback([opts] { run_train(*opts); });
}

PONDER_COMMAND(train, register_train);

}  // namespace ponder::cli
