// The command line `ponder` was started with, for result files (what produced them) and journals (what
// a rerun must repeat to reuse their cells).
#pragma once
#include <string>

namespace ponder::cli {

void set_command_line(int argc, char** argv);
// "ponder" and the arguments, joined by spaces, each quoted when it holds a space or a quote; empty until set.
const std::string& command_line();
// The same without --jobs, which only says how many parts run side by side (experiments/parts.h), not what they
// compute: what a finished comparison's fingerprint holds, so a rerun with another --jobs reuses it.
const std::string& results_command_line();

}  // namespace ponder::cli
