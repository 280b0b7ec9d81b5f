// `ponder merge DIR... --out OUT`: the shards of a comparison (compare or ablate with --shard i/n, or the ranks under
// mpirun) put together. Their journals are merged into OUT, then their command runs whole in this process with
// --out OUT: it finds its cells done, computes what needs them all (the oracle frontier's bisection toward the budget,
// the regime checks) and writes the results.json and report of the unsharded run.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "experiments/process/command_line.h"
#include "experiments/cli/commands.h"
#include "experiments/process/journal.h"
#include "tensor/cpu/runtime.h"
#include "tensor/dist.h"

namespace ponder::cli {
namespace cmd_merge {
namespace {

// `args` (global options, then compare or ablate and theirs) parsed and run in this process as the command line.
void run_whole(const std::vector<std::string>& args) {
  CLI::App app{"ponder", "ponder"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option_function<int>("--threads", [](const int& n) { cpu::set_num_threads(n); }, "Threads")->check(kPositive);
  add_registered_commands(app, {"compare", "ablate"});
  std::vector<std::string> words = {"ponder"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  set_command_line(args);  // what the results record, and what the shards' journals were fingerprinted with
  const ScopedWholeRun whole;
  app.parse(int(argv.size()), argv.data());
}

}  // namespace
}  // namespace cmd_merge

void add_shard_option(CLI::App* sub, std::string& shard) {
  using namespace cmd_merge;
  sub->add_option("--shard", shard,
                  "Compute shard i of n of the cells (i/n, counted from 0) into --out, for ponder merge to put "
                  "together; under mpirun -np N each rank is a shard without it")
      ->check(kNonEmpty);
}

void merge_shards(const std::vector<std::string>& dirs, const std::string& out, int jobs) {
  using namespace cmd_merge;
  const ShardManifest m = merge_shard_journals(dirs, out);
  std::vector<std::string> args = m.args;
  args.insert(args.end(), {"--out", out});
  if (jobs > 0) args.insert(args.end(), {"--jobs", std::to_string(jobs)});
  std::fprintf(stderr, "merge: the %d shards of 'ponder %s ...' finished; running it whole into %s\n", m.shard.count,
               m.command.c_str(), out.c_str());
  require_matching_journals(true);  // the shards' cells are reused, or the merge fails saying why: never recomputed
  run_whole(args);
}

void run_shard(const std::string& label, const Shard& shard, const std::string& out,
               const std::function<RankFields()>& fields, const std::function<void(const std::string& dir)>& work) {
  using namespace cmd_merge;
  const bool ranks = dist::size() > 1;
  if (ranks) {  // before any cell: a differing rank would compute another run's share, or wait forever
    RankFields mine;
    dist::together([&] { mine = fields(); });  // a checkpoint missing on one node stops them all, saying so
    check_ranks_agree(label, mine);
  }
  const std::string dir = ranks ? rank_shard_dir(out, shard) : out;
  ShardManifest m{shard, label, results_command_args(), false};
  std::string failed;
  try {
    write_manifest(dir, m);
    work(dir);
    m.finished = true;
    write_manifest(dir, m);
  } catch (const std::exception& e) {
    if (!ranks) throw;
    failed = "rank " + std::to_string(dist::rank()) + ": " + e.what();
  }
  if (!ranks) {
    std::fprintf(stderr, "%s: shard %s finished in %s; once all %d have: ponder merge DIR... --out OUT\n",
                 label.c_str(), shard.text().c_str(), dir.c_str(), shard.count);
    return;
  }
  // Waits for every rank's shard; one that failed stops them all with its error (finished cells stay journaled).
  dist::first_error(failed);
  const bool lead = dist::rank() == 0;
  dist::finalize();
  if (!lead) return;
  std::vector<std::string> dirs;
  for (int r = 0; r < shard.count; ++r) dirs.push_back(rank_shard_dir(out, {r, shard.count}));
  merge_shards(dirs, out, 0);
  for (const std::string& d : dirs) std::filesystem::remove_all(d);  // merged and done: nothing left to resume
}

void register_merge(CLI::App& app) {
  using namespace cmd_merge;
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto jobs = std::make_shared<int>(0);
  CLI::App* sub = app.add_subcommand(
      "merge", "Put together the shards of a comparison (ponder compare|ablate --shard i/n, one folder each): "
               "writes into --out the results.json and report the unsharded run writes");
  sub->add_option("dirs", *dirs, "The shards' folders, all n of them")->required();
  sub->add_option("--out", *out, "Output folder")->required()->check(kNonEmpty);
  sub->add_option("--jobs", *jobs, "Several checkpoints: models finished side by side (as compare --jobs); 0: auto")
      ->check(kNonNegative);
  sub->callback([dirs, out, jobs] { merge_shards(*dirs, *out, *jobs); });
}

PONDER_COMMAND(merge, register_merge);

}  // namespace ponder::cli
