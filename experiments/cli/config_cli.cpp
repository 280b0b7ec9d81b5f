#include "experiments/cli/config_cli.h"
#include "experiments/cli/commands.h"

namespace ponder::cli {

void add_override_options(CLI::App* sub, ConfigOverrides& o, bool with_seed) {
  sub->add_option("--set", o.sets, "Override one config key, section.key=value (repeatable), e.g. --set "
                  "train.lr=1e-3 --set compare.step_options=[0,1,2]")->allow_extra_args(false);
  if (with_seed)
    sub->add_option("--seed", o.seed, "Training seed (overrides train.seed): independently trained models differ "
                    "only in this")->check(kNonNegative);
}

RunConfig apply_overrides(const RunConfig& c, const ConfigOverrides& o) {
  std::vector<std::string> sets = o.sets;
  if (o.seed >= 0) sets.push_back("train.seed=" + std::to_string(o.seed));
  if (sets.empty()) return c;
  std::string source = c.source + " with";
  for (const std::string& s : sets) source += " " + s;
  return parse_config(with_overrides(c.text, sets), source);
}

}  // namespace ponder::cli
