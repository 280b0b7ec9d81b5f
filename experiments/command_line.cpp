#include "experiments/command_line.h"

namespace ponder::cli {
namespace {

std::string& stored() {
  static std::string line;
  return line;
}

std::string& stored_for_results() {
  static std::string line;
  return line;
}

std::string quoted(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t'\"\\") == std::string::npos) return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

void set_command_line(int argc, char** argv) {
  std::string line = "ponder", results = "ponder";  // not argv[0]: the same command through another path is the same
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    line.append(" ").append(quoted(arg));
    if (arg == "--jobs" && i + 1 < argc) {
      line.append(" ").append(quoted(argv[++i]));
      continue;
    }
    if (arg.rfind("--jobs=", 0) != 0) results.append(" ").append(quoted(arg));
  }
  stored() = line;
  stored_for_results() = results;
}

const std::string& command_line() { return stored(); }
const std::string& results_command_line() { return stored_for_results(); }

}  // namespace ponder::cli
