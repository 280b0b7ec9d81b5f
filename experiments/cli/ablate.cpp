// `ponder ablate`: the learned-reinforce ablations of docs/method.md §5.5 (γ, λ, step options, MLP vs causal LSTM,
// decision unit) as one comparison run on a trained checkpoint; writes ablation.md, ablation.json and a plot per
// group, plus the comparison's own report.md / results.json for the same cells. Its cells (one per method) split into
// shards like compare's (--shard i/n, or under mpirun; experiments/study/shard.h).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <unistd.h>

#include "experiments/study/ablate.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/study/report.h"
#include "experiments/study/result_util.h"

namespace ponder::cli {
namespace cmd_ablate {
namespace {

// The common checkpoint-job arguments plus the ablation's own.
struct AblateArgs {
  CheckpointJobArgs job;
  std::string groups;  // empty: all
  int64_t iterations = 0;
};

// The ablation into a.job.out; with a share of the cells (a shard: --shard i/n, or a rank under mpirun), only those
// into its journal.
void run(const AblateArgs& a, const CellShare& share = {}) {
  CheckpointJob job = load_checkpoint_job(a.job, "ablate");
  CompareOptions& opt = job.opt;
  if (a.iterations > 0) opt.learn.reinforce.iterations = a.iterations;
  const std::vector<AblationGroup> groups =
      select_groups(ablation_groups(opt.learn, job.m.model.config().mini_batch, opt.seq_len), a.groups);
  opt.methods = methods::parse_methods(ablation_methods(groups, opt.budget_k));
  opt.frontier_mus.clear();  // no oracle here: its frontier would only cost time
  std::fprintf(stderr, "ablate: %zu cells (%s) × %lld seeds × %s windows\n", opt.methods.size() - 1,
               a.groups.empty() ? "all groups" : a.groups.c_str(), (long long)opt.seeds,
               windows_label(opt.windows_per_seed).c_str());
  Journal journal = open_journal(a.job.out, "ablate", a.job.checkpoint, job.as_run.text);
  CompareResult r = run_compare(job.m.model, job.ds.valid, job.ds.test, opt, stderr_progress("ablate"), &journal,
                                &job.ds.test_streams, share, &job.ds.valid_streams);
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  if (!share.whole()) return;  // the journal is this shard's output
  const auto prov = provenance(job.m, job.ds, a.job.checkpoint, "ponder ablate");
  write_compare_outputs(r, opt, prov, a.job.out);
  std::printf("%s\nablation: %s/ablation.md\n", write_ablation_outputs(r, groups, opt, prov, a.job.out).c_str(),
              a.job.out.c_str());
  journal.remove();
}

}  // namespace
}  // namespace cmd_ablate

void register_ablate(CLI::App& app) {
  using namespace cmd_ablate;
  auto args = std::make_shared<AblateArgs>();
  args->job.out = "results/ablate";
  CLI::App* sub = app.add_subcommand(
      "ablate", "Ablations of learned-reinforce (gamma, lambda, step options, MLP vs LSTM, unit size) on a trained "
                "checkpoint: tables with CIs and paired tests vs uniform at the budget, one plot per group");
  add_checkpoint_job_options(sub, args->job, "Config whose compare: and learn: sections set seeds and learners");
  sub->add_option("--groups", args->groups, "Comma-separated subset of gamma,lambda,options,net,unit (default all)");
  sub->add_option("--iterations", args->iterations, "Override learn.reinforce_iterations")
      ->check(kPositive);
  add_shard_option(sub, args->job.shard);
  sub->callback([args] {
    const Shard shard = this_shard(args->job.shard, "ablate");
    if (shard.whole()) return run(*args);
    run_shard("ablate", shard, args->job.out, [&] { return rank_fields(args->job); }, [&](const std::string& dir) {
      AblateArgs a = *args;
      a.job.out = dir;
      run(a, cell_share(shard, 0, 0));
    });
  });
}

PONDER_COMMAND(ablate, register_ablate);

}  // namespace ponder::cli
