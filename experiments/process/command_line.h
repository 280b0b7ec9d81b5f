// The command line `ponder` was started with, for result files (what produced them) and journals (what
// a rerun must repeat to reuse their cells).
#pragma once
#include <string>
#include <vector>

namespace ponder::cli {

void set_command_line(int argc, char** argv);
// The same for a command ponder runs itself (ponder merge runs the sharded command whole): `args` without "ponder".
void set_command_line(const std::vector<std::string>& args);
// "ponder" and the arguments, joined by spaces, each quoted when it holds a space or a quote; empty until set.
const std::string& command_line();
// The same without the options that say where and in how many pieces the work runs, not what it computes: --jobs
// (parts side by side, experiments/process/parts.h), --out and --shard (experiments/study/shard.h). What a finished comparison's
// fingerprint and journal hold, so that a rerun with another --jobs, and the merge of a sharded run, reuse them.
const std::string& results_command_line();
// The arguments (without "ponder"), and the same without those three options and their values: what a shard
// records so that ponder merge can run the command whole.
const std::vector<std::string>& command_args();
std::vector<std::string> results_command_args();
// results_command_line() also without what the journal fingerprints otherwise, by content rather than spelling:
// --checkpoint (its file's sha256), --config, --set and --seed (the config text they make), --threads (which does
// not change results). So `--config ci` and `--config configs/ci.yaml`, or a checkpoint named by another path, resume
// the same journal.
std::string fingerprint_command_line();
// "ponder" and `args` as command_line() writes them (each quoted when it holds a space or a quote).
std::string joined_command(const std::vector<std::string>& args);

}  // namespace ponder::cli
