// Each `ponder` command lives in experiments/cli/<name>.cpp and registers itself with PONDER_COMMAND (below).
// A subcommand reports a bad argument or a broken invariant by throwing (main prints one line and exits
// with 1); one that has already printed its own verdict signals failure with `throw CLI::RuntimeError(1)`.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "experiments/cli/config_cli.h"
#include "experiments/study/control.h"
#include "experiments/process/ranks.h"
#include "experiments/study/shard.h"
#include "tensor/precision.h"

namespace ponder::cli {

// A validator of numbers: "" when `ok(value)`, else "<must> <text>". CLI11 2.1's PositiveNumber and NonNegativeNumber
// print DBL_MAX in their messages; these name the value.
inline CLI::Validator number_check(bool (*ok)(double), const char* must, const char* name) {
  return CLI::Validator(
      [ok, must](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "expected a number, got '" + text + "'";
        return ok(v) ? "" : std::string(must) + text;
      },
      name);
}
// For counts and rates.
inline const CLI::Validator kPositive = number_check([](double v) { return v > 0; }, "must be positive, got ", "POSITIVE");
// For counts where 0 means "automatic" or "none".
inline const CLI::Validator kNonNegative = number_check([](double v) { return v >= 0; }, "must be >= 0, got ", "NONNEGATIVE");

// Every command adds itself to ponder's table at start-up, with a line at the end of its file:
//   PONDER_COMMAND(compare, add_compare);               ponder compare
//   PONDER_SUBCOMMAND(bench, ops, add_bench_ops);       ponder bench ops
// `add` creates the subcommand of that name on the app (or on its parent command) and its options; main() adds the
// commands by name, then each one's subcommands by name. A new command is its file and its line in
// experiments/meson.build.
using AddCommand = void (*)(CLI::App& parent);
bool add_to_command_table(const char* parent, const char* name, AddCommand add);
// Adds every registered command to `app` (with `only`, the top-level commands it names); throws std::logic_error
// when an `add` did not create the command it was registered under (a name spelt two ways).
void add_registered_commands(CLI::App& app, const std::vector<std::string>& only = {});
#define PONDER_COMMAND(name, add) \
  [[maybe_unused]] static const bool ponder_command_##name = ::ponder::cli::add_to_command_table("", #name, add)
#define PONDER_SUBCOMMAND(parent, name, add)                \
  [[maybe_unused]] static const bool ponder_command_##parent##_##name = \
      ::ponder::cli::add_to_command_table(#parent, #name, add)

// For paths and names: an empty value is refused, not taken as "use the default".
inline const CLI::Validator kNonEmpty(
    [](std::string& text) -> std::string { return text.empty() ? "must not be empty" : ""; }, "NONEMPTY");

// `bench matmul --device cuda` (experiments/cli/bench_cuda.cpp).
void run_bench_matmul_cuda(int reps, MatmulPrecision precision, bool json);

// The positive control (experiments/cli/control.cpp), also run by `ponder quick`.
struct ControlArgs {
  std::string config = "planted";
  std::string out = "results/control";
  bool retrain = false;
  std::string device;  // empty: the config's model.device
  ConfigOverrides over;  // --set, --seed on the control's config
};
ControlVerdict run_positive_control(const ControlArgs& a);
// Adds --shard i/n to compare or ablate (experiments/study/shard.h).
void add_shard_option(CLI::App* sub, std::string& shard);
// Checks that `dirs` are the n finished shards of one compare or ablate run, merges their journals into `out` and runs
// the command whole there (jobs > 0: with --jobs), which writes what the unsharded run writes.
void merge_shards(const std::vector<std::string>& dirs, const std::string& out, int jobs);
// `label`'s (compare, ablate) share of the cells: `work` computes them into the folder it is given, marked by a
// manifest that ends finished. With --shard that folder is `out`, and the merge is the user's; under mpirun it is
// OUT/shard-<r>-of-<n>, and rank 0 merges every rank's into `out` once all have finished, then removes them.
// Under mpirun the ranks first compare what `fields` gives each (experiments/process/ranks.h) and refuse, all of
// them, when one differs or cannot be read.
void run_shard(const std::string& label, const Shard& shard, const std::string& out,
               const std::function<RankFields()>& fields,
               const std::function<void(const std::string& dir)>& work);

}  // namespace ponder::cli
