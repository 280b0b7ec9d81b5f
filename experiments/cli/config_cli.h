// Config overrides on the command line, the same for every command that reads a run config (train, control,
// quick, compare, oracle, overhead, ablate): `--set section.key=value` (repeatable) and `--seed N` (train.seed).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/model/config.h"

namespace CLI {
class App;  // CLI11: only the files that add options include it (cli/commands.h)
}

namespace ponder::cli {

struct ConfigOverrides {
  std::vector<std::string> sets;  // section.key=value, applied in order
  int64_t seed = -1;              // -1: the config's train.seed
  bool empty() const { return sets.empty() && seed < 0; }
};

// Adds --set and, when `with_seed`, --seed to `sub`, stored in `o`.
void add_override_options(CLI::App* sub, ConfigOverrides& o, bool with_seed);
// `c` with the overrides applied (checked by parse_config like any file); its source says which were applied, and
// its text is what checkpoints, journals and results record.
RunConfig apply_overrides(const RunConfig& c, const ConfigOverrides& o);

}  // namespace ponder::cli
