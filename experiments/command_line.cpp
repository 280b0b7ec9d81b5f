#include "experiments/command_line.h"

namespace ponder::cli {
namespace {

std::string& stored() {
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
  std::string line = "ponder";  // not argv[0]: the same command run through another path is the same command
  for (int i = 1; i < argc; ++i) line += " " + quoted(argv[i]);
  stored() = line;
}

const std::string& command_line() { return stored(); }

}  // namespace ponder::cli
