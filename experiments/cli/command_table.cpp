// The table PONDER_COMMAND fills (experiments/cli/commands.h) and main() reads.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "experiments/cli/commands.h"

namespace ponder::cli {
namespace {

struct Entry {
  std::string parent, name;
  AddCommand add;
};

// A function's static: the commands' own statics fill it during static initialisation, in no set order.
std::vector<Entry>& table() {
  static std::vector<Entry> t;
  return t;
}

}  // namespace

bool add_to_command_table(const char* parent, const char* name, AddCommand add) {
  table().push_back({parent, name, add});
  return true;
}

void add_registered_commands(CLI::App& app, const std::vector<std::string>& only) {
  std::vector<Entry> t;
  for (const Entry& e : table())
    if (only.empty() || std::find(only.begin(), only.end(), e.name) != only.end()) t.push_back(e);
  // The top-level commands first (a parent exists before its subcommands), each group by name.
  std::sort(t.begin(), t.end(), [](const Entry& a, const Entry& b) {
    return std::make_tuple(!a.parent.empty(), a.parent, a.name) < std::make_tuple(!b.parent.empty(), b.parent, b.name);
  });
  for (const Entry& e : t) {
    CLI::App* parent = e.parent.empty() ? &app : app.get_subcommand(e.parent);
    e.add(*parent);
    try {
      parent->get_subcommand(e.name);
    } catch (const CLI::OptionNotFound&) {
      throw std::logic_error("command '" + e.name + "' is registered, but its function added no command of that name");
    }
  }
}

}  // namespace ponder::cli
