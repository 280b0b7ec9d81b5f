// Fault injection for the crash-consistency tests (tests/cli_crash.py): with PONDER_FAULT=NAME:N:SIGNAL in the
// environment, the N-th pass (1-based) through the point NAME raises SIGNAL (KILL: the process dies on the spot, as
// under the OOM killer or a power cut; TERM: a scheduler's polite stop; HUP: the terminal closed; PIPE: the reader of
// its output went away). Unset, a point costs one string compare.
// The points: train.step (after an optimiser step), train.log (after a log line), checkpoint.tmp (the new
// checkpoint written beside the old, not yet renamed), checkpoint.rename (renamed, folder not yet synced),
// journal.line (a comparison's record written and synced), journal.half (half a record written: a torn line;
// meant with KILL, since after a TERM the whole record follows the half on the same line).
#pragma once
#include <csignal>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

namespace ponder::fault {

struct Plan {
  std::string name;  // empty: no fault planned
  long at = 0;
  int signal = 0;
  long seen = 0;
};

// Every point a fault may be planned at (a name not listed is an error, not a fault that never fires).
inline constexpr const char* kPoints[] = {"train.step", "train.log", "checkpoint.tmp", "checkpoint.rename",
                                          "journal.line", "journal.half"};

inline Plan parse_plan(const char* env) {
  Plan p;
  if (env == nullptr || *env == '\0') return p;
  const std::string s(env);
  const size_t a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  const std::string sig = b == std::string::npos ? "" : s.substr(b + 1);
  char* end = nullptr;
  const long at = a == std::string::npos ? 0 : std::strtol(s.c_str() + a + 1, &end, 10);
  const int number = sig == "KILL" ? SIGKILL : sig == "TERM" ? SIGTERM : sig == "HUP" ? SIGHUP : sig == "PIPE" ? SIGPIPE : 0;
  if (a == 0 || b == std::string::npos || at < 1 || end != s.c_str() + b || number == 0)
    throw std::invalid_argument("PONDER_FAULT: expected NAME:N:SIGNAL with N >= 1 and SIGNAL one of KILL, TERM, HUP, "
                                "PIPE, got '" + s + "'");
  p.name = s.substr(0, a);
  bool known = false;
  for (const char* point : kPoints) known = known || p.name == point;
  if (!known) {
    std::string names;
    for (const char* point : kPoints) names += std::string(names.empty() ? "" : ", ") + point;
    throw std::invalid_argument("PONDER_FAULT: unknown point '" + p.name + "' (the points: " + names + ")");
  }
  p.at = at;
  p.signal = number;
  return p;
}

inline Plan& plan() {
  static Plan p = parse_plan(std::getenv("PONDER_FAULT"));
  return p;
}

// Marks a pass through `name`; on the planned pass runs `before` (what the fault should leave behind, such as half
// a line) and raises the signal. A TERM returns here once the handler has run.
inline void point(const char* name, const std::function<void()>& before = {}) {
  Plan& p = plan();
  if (p.name.empty() || p.name != name || ++p.seen != p.at) return;
  if (before) before();
  std::raise(p.signal);
}

}  // namespace ponder::fault
