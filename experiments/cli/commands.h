// Each `ponder` subcommand lives in experiments/cmd_<name>.cpp and registers itself here.
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

// For paths and names: an empty value is refused, not taken as "use the default".
inline const CLI::Validator kNonEmpty(
    [](std::string& text) -> std::string { return text.empty() ? "must not be empty" : ""; }, "NONEMPTY");

void register_bench(CLI::App& app);
void register_demo(CLI::App& app);
void register_gradcheck(CLI::App& app);
// Adds `ops` to the `bench` subcommand that register_bench created (experiments/cli/bench_ops.cpp).
void register_bench_ops(CLI::App& bench);
// Adds `dual` (the fused TTT-Linear dual-form kernel, experiments/cli/bench_dual.cpp).
void register_bench_dual(CLI::App& bench);
// `bench matmul --device cuda` (experiments/cli/bench_cuda.cpp).
void run_bench_matmul_cuda(int reps, MatmulPrecision precision, bool json);
void register_train(CLI::App& app);
void register_eval(CLI::App& app);
void register_quick(CLI::App& app);
void register_compare(CLI::App& app);
void register_oracle(CLI::App& app);
void register_overhead(CLI::App& app);
void register_convergence(CLI::App& app);
void register_ablate(CLI::App& app);
void register_control(CLI::App& app);
void register_export(CLI::App& app);
void register_codebench(CLI::App& app);
void register_adapt(CLI::App& app);
// `flops` and `graph` (experiments/cli/inspect.cpp).
void register_inspect(CLI::App& app);

// The positive control (experiments/cli/control.cpp), also run by `ponder quick`.
struct ControlArgs {
  std::string config = "planted";
  std::string out = "results/control";
  bool retrain = false;
  std::string device;  // empty: the config's model.device
  ConfigOverrides over;  // --set, --seed on the control's config
};
ControlVerdict run_positive_control(const ControlArgs& a);
// `ponder merge DIR... --out OUT` (experiments/cli/merge.cpp): the shards of a comparison put together.
void register_merge(CLI::App& app);
// Adds --shard i/n to compare or ablate (experiments/study/shard.h).
void add_shard_option(CLI::App* sub, std::string& shard);
// Checks that `dirs` are the n finished shards of one compare or ablate run, merges their journals into `out` and runs
// the command whole there (jobs > 0: with --jobs), which writes what the unsharded run writes.
void merge_shards(const std::vector<std::string>& dirs, const std::string& out, int jobs);
// `label`'s (compare, ablate) share of the cells: `work` computes them into the folder it is given, marked by a
// manifest that ends finished. With --shard that folder is `out`, and the merge is the user's; under mpirun it is
// OUT/shard-<r>-of-<n>, and rank 0 merges every rank's into `out` once all have finished, then removes them.
// Under mpirun the ranks first compare what `fields` gives each (experiments/process/ranks.h) and refuse, all of them, when one
// differs or cannot be read.
void run_shard(const std::string& label, const Shard& shard, const std::string& out,
               const std::function<RankFields()>& fields,
               const std::function<void(const std::string& dir)>& work);
// Adds `train` to the `bench` subcommand that register_bench created.
void register_bench_train(CLI::App& bench);

}  // namespace ponder::cli
