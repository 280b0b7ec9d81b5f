// Comparisons split into shards of their cells (experiments/study/compare.h, CellShare): `ponder compare|ablate --shard i/n`
// in independent processes (a Slurm job array: scripts/slurm_sweep.sh), or the ranks under mpirun. A shard computes
// its cells into the journals of its own folder, beside a manifest (shard.json) saying which shard of which command it
// is. Merging checks that the folders are the n finished shards of one command, puts their journals together in the
// output folder, and runs the command whole there: it finds its cells done and writes what the unsharded run writes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/study/compare.h"

namespace ponder::cli {

struct Shard {
  int index = 0, count = 1;
  bool whole() const { return count <= 1; }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};
// "i/n" with 0 <= i < n (0-based, as Slurm's array task ids run); throws naming what is wrong with it.
Shard parse_shard(const std::string& text);
// The share of model `model`'s cells (0 for a single checkpoint) when every model has `cells_per_model` cells.
CellShare cell_share(const Shard& shard, int64_t model, int64_t cells_per_model);

// The share of its cells this process computes: --shard when given (`flag`), else its rank of n when mpirun started
// several (MPI is started here), else the whole comparison. `label` names the command in errors.
Shard this_shard(const std::string& flag, const std::string& label);
// While a merge runs the command whole in this process (ScopedWholeRun), this_shard gives the whole.
struct ScopedWholeRun {
  ScopedWholeRun();
  ~ScopedWholeRun();
};
// The folder of rank r of n under mpirun, inside the command's --out: OUT/shard-r-of-n.
std::string rank_shard_dir(const std::string& out, const Shard& shard);

// DIR/shard.json: which shard of which command the folder holds, and whether it has finished.
struct ShardManifest {
  Shard shard;
  std::string command;            // compare | ablate
  std::vector<std::string> args;  // the command line to run whole (command_line.h, results_command_args)
  bool finished = false;
};
void write_manifest(const std::string& dir, const ShardManifest& m);
// Throws naming `dir` when it holds no manifest or a damaged one.
ShardManifest read_manifest(const std::string& dir);

// Checks that `dirs` hold the n finished shards of one command (each once), then writes every journal they hold into
// `out` under the same relative path (journal.jsonl, model-<k>/journal.jsonl), with the fingerprint the shards share
// and the records of all of them; a record two shards hold differently is an error. Returns the shards' manifest.
ShardManifest merge_shard_journals(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace ponder::cli
