#include "experiments/cli/checkpoint_job.h"

#include <stdexcept>

#include "experiments/cli/commands.h"
#include "experiments/model/checkpoint_cache.h"
#include "experiments/model/config.h"
#include "experiments/model/device.h"
#include "experiments/model/provenance.h"
#include "experiments/process/command_line.h"

namespace ponder::cli {

void add_checkpoint_job_options(CLI::App* sub, CheckpointJobArgs& a, const std::string& config_help, bool many) {
  sub->add_option("--config", a.config, config_help + " (default: the checkpoint's own config)");
  sub->add_option("--checkpoint", a.checkpoints,
                  many ? "Trained model (ponder train's checkpoint.ckpt); repeat it for independently trained models "
                         "of one config (they differ only in train.seed)"
                       : "Trained model (ponder train's checkpoint.ckpt)")
      ->required()
      ->allow_extra_args(false);
  sub->parse_complete_callback([sub, &a, many] {
    if (!many && a.checkpoints.size() > 1)
      throw CLI::ValidationError("--checkpoint", sub->get_name() + " takes one checkpoint, got " +
                                                     std::to_string(a.checkpoints.size()));
    a.checkpoint = a.checkpoints.front();
  });
  sub->add_option("--out", a.out, "Output folder")->capture_default_str()->check(kNonEmpty);
  sub->add_option("--seeds", a.seeds, "Override compare.seeds")->check(kPositive);
  sub->add_option("--windows", a.windows, "Override compare.windows_per_seed")->check(kNonNegative);
  if (many)
    sub->add_option("--jobs", a.jobs,
                    "With several checkpoints: models compared side by side, threads shared among them; 0: as many "
                    "as --threads, at most 4; 1: one after another in this process")
        ->check(kNonNegative);
  sub->add_flag("--other-corpus", a.other_corpus,
                "Read the corpus even when it is not the one the checkpoint was trained on (both hashes are recorded)");
  add_override_options(sub, a.over, false);
  add_device_override(sub, a.device);
}

namespace {

// The config a checkpoint job reads: --config, or the checkpoint's own, with --set applied.
RunConfig job_config(const CheckpointJobArgs& a, const ttt::Checkpoint& ck) {
  const RunConfig own = a.config.empty() ? parse_config(ck.config_text, a.checkpoint + " (its config)")
                                         : load_config(resolve_config(a.config));
  return apply_overrides(own, a.over);
}

CompareOptions job_options(const CheckpointJobArgs& a, const RunConfig& cfg) {
  CompareOptions opt = cfg.compare;
  if (a.seeds > 0) opt.seeds = a.seeds;
  if (a.windows > 0) opt.windows_per_seed = a.windows;
  return opt;
}

}  // namespace

RunConfig checkpoint_job_config(const CheckpointJobArgs& a) {
  return job_config(a, checkpoint_header(a.checkpoint));
}

CompareOptions checkpoint_job_options(const CheckpointJobArgs& a) {
  return job_options(a, job_config(a, checkpoint_header(a.checkpoint)));
}

CheckpointJob load_checkpoint_job(const CheckpointJobArgs& a, const std::string& label) {
  const ttt::Checkpoint& ck = checkpoint_header(a.checkpoint);
  RunConfig cfg = job_config(a, ck);
  std::fprintf(stderr, "%s: config %s\n", label.c_str(), cfg.source.c_str());
  if (!a.config.empty())
    if (const auto differ = sections_differing(cfg.text, ck.config_text, {"model", "data", "train"}); !differ.empty()) {
      std::string which;
      for (const std::string& s : differ) which += (which.empty() ? "" : ", ") + s + ":";
      const bool one = differ.size() == 1;
      std::fprintf(stderr, "%s: %s of %s %s from the checkpoint's and %s not used: the model, its corpus and its "
                   "training come from the checkpoint (as trained), the other sections from --config (results.json "
                   "records both, as config and config_applied)\n", label.c_str(), which.c_str(), cfg.source.c_str(),
                   one ? "differs" : "differ", one ? "is" : "are");
    }
  CompareOptions opt = job_options(a, cfg);
  const Device device = run_device(a.device, cfg);
  std::fprintf(stderr, "%s: device %s\n", label.c_str(), describe_device(device).c_str());
  TrainedModel m = load_trained(checkpoint_for_model(a.checkpoint), a.checkpoint, device);
  Dataset ds = load_dataset(m.config.data);
  check_corpus(m, ds, a.checkpoint, a.other_corpus);
  util::lock_output_dir(a.out);  // one writer per folder (under mpirun each rank has its own shard folder)
  return {std::move(cfg), std::move(opt), device, std::move(m), std::move(ds)};
}


RankFields rank_fields(const CheckpointJobArgs& a) {
  std::string files;  // one field however many: every rank gathers the same number
  for (const std::string& path : a.checkpoints.empty() ? std::vector<std::string>{a.checkpoint} : a.checkpoints)
    files += checkpoint_sha256(path) + " ";
  if (!a.attention.empty()) files += "attention " + checkpoint_sha256(a.attention);
  return {{"command line (without --threads, --checkpoint, --config, --set)", fingerprint_command_line()},
          {"binary (sha256 of the ponder that runs)", binary_sha256()},
          {"checkpoint files (sha256 of each)", files},
          {"config (its text after --config and --set)", checkpoint_job_config(a).text}};
}


}  // namespace ponder::cli
