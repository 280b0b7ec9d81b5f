// A command that analyses trained checkpoints (compare, oracle, overhead, ablate, adapt): its common options, the
// configs it runs under and the job it loads once (the model as trained, its data, the options as run).
#pragma once
#include <string>
#include <vector>

#include "experiments/cli/config_cli.h"
#include "experiments/model/training.h"
#include "experiments/process/ranks.h"
#include "experiments/study/compare_options.h"

namespace CLI {
class App;
}

namespace ponder::cli {

// What every analysis of a trained checkpoint takes (compare, oracle, overhead, ablate).
struct CheckpointJobArgs {
  std::string config;  // empty: the checkpoint's own config
  std::string checkpoint;               // the first --checkpoint
  std::vector<std::string> checkpoints;  // every --checkpoint (compare: independently trained models)
  std::string out;
  int64_t seeds = 0, windows = 0;  // 0: the config's compare.seeds / compare.windows_per_seed
  std::string device;              // empty: the config's model.device
  ConfigOverrides over;            // --set on the config (--seed has no meaning for a trained model)
  int jobs = 0;                    // several checkpoints: models compared side by side (experiments/process/parts.h); 0: auto
  std::string shard;               // compare, ablate: --shard i/n (experiments/study/shard.h); empty: all the cells
  std::string attention;           // compare: an attention-only checkpoint read beside it in the regime checks
  bool other_corpus = false;       // --other-corpus: read a corpus other than the one the checkpoint was trained on
};
// Adds --config (described by `config_help`; default: the checkpoint's own), --checkpoint (required), --out, --seeds,
// --windows, --set and --device.
// With `many`, --checkpoint may repeat (and --jobs compares the models side by side); otherwise a second one is an
// error.
void add_checkpoint_job_options(CLI::App* sub, CheckpointJobArgs& a, const std::string& config_help,
                                bool many = false);

// The compare options a checkpoint job runs under (its config, --set, --seeds, --windows), without loading the model
// or the data.
CompareOptions checkpoint_job_options(const CheckpointJobArgs& a);
// The whole config such a command runs under (--config or the checkpoint's own, with --set applied).
RunConfig checkpoint_job_config(const CheckpointJobArgs& a);
// A checkpoint job holds two configs: `as_run`, the one it runs under (--config, or the checkpoint's own, with --set:
// its compare:, streams:, adapt: and learn: sections are what the command reads), and the one the model was trained
// with, `as_trained()` (its model:, data: and train: sections are the model's; --config cannot change them).
struct CheckpointJob {
  RunConfig as_run;
  CompareOptions opt;  // as_run.compare with --seeds and --windows applied
  Device device;
  TrainedModel m;      // m.config: as trained
  Dataset ds;
  const RunConfig& as_trained() const { return m.config; }
};
// What such a command works on: the config's compare options with --seeds / --windows applied, the trained
// model on its device and its dataset. Prints "<label>: device …" and creates the output folder.
CheckpointJob load_checkpoint_job(const CheckpointJobArgs& a, const std::string& label);

// What every rank of a sharded run under mpirun must share (experiments/process/ranks.h): the command line, the binary, the
// config text each rank reads and the checkpoints' contents (a file of the same name can differ between nodes).
RankFields rank_fields(const CheckpointJobArgs& a);

}  // namespace ponder::cli
