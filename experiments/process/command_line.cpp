#include "experiments/process/command_line.h"

#include <initializer_list>

namespace ponder::cli {
namespace {

struct Stored {
  std::vector<std::string> args;
  std::string line, results;
};

Stored& stored() {
  static Stored s;
  return s;
}

std::string quoted(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t'\"\\") == std::string::npos) return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// How many arguments from `arg` on are one of `names`: 2 for "--name value", 1 for "--name=value", 0 for anything else.
size_t option_among(const std::string& arg, std::initializer_list<const char*> names) {
  for (const std::string name : names) {
    if (arg == name) return 2;
    if (arg.rfind(name + "=", 0) == 0) return 1;
  }
  return 0;
}

}  // namespace

void set_command_line(const std::vector<std::string>& args) {
  Stored& s = stored();
  s.args = args;
  s.line = joined_command(args);
  s.results = joined_command(results_command_args());
}

void set_command_line(int argc, char** argv) { set_command_line(std::vector<std::string>(argv + 1, argv + argc)); }

const std::string& command_line() { return stored().line; }
const std::string& results_command_line() { return stored().results; }
const std::vector<std::string>& command_args() { return stored().args; }

std::vector<std::string> results_command_args() {
  const std::vector<std::string>& args = stored().args;
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size();) {
    const size_t skip = option_among(args[i], {"--jobs", "--out", "--shard"});
    if (skip == 0) out.push_back(args[i]);
    i += skip > 0 ? skip : 1;
  }
  return out;
}

std::string fingerprint_command_line() {
  const std::vector<std::string> args = results_command_args();
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size();) {
    const size_t skip = option_among(args[i], {"--threads", "--checkpoint", "--config", "--set", "--seed"});
    if (skip == 0) out.push_back(args[i]);
    i += skip > 0 ? skip : 1;
  }
  return joined_command(out);
}

std::string joined_command(const std::vector<std::string>& args) {
  std::string line = "ponder";  // not argv[0]: the same command through another path is the same
  for (const std::string& a : args) line.append(" ").append(quoted(a));
  return line;
}

}  // namespace ponder::cli
