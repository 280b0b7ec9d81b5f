// Each `ponder` subcommand lives in experiments/cmd_<name>.cpp and registers itself here.
#pragma once
#include <CLI/CLI.hpp>

namespace ponder::cli {

void register_gradcheck(CLI::App& app);

}  // namespace ponder::cli
