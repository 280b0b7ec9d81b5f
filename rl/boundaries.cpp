#include "rl/boundaries.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ponder::rl {
namespace {

void check_size(size_t got, size_t steps, const char* who, const char* what) {
  if (got != 0 && got != steps)
    throw std::invalid_argument(std::string(who) + ": " + what + " has " + std::to_string(got) +
                                " entries, expected " + std::to_string(steps) + " (one per transition) or none");
}

}  // namespace

void Boundaries::validate(size_t steps, const char* who) const {
  check_size(terminated.size(), steps, who, "terminated");
  check_size(truncated.size(), steps, who, "truncated");
  check_size(final_values.size(), steps, who, "final_values");
  for (size_t t = 0; t < steps; ++t) {
    if (!is_truncated(t) || is_terminated(t)) continue;
    if (final_values.empty())
      throw std::invalid_argument(std::string(who) + ": transition " + std::to_string(t) +
                                  " is truncated but final_values is empty (a truncation must bootstrap: "
                                  "docs/rl_stats.md P1)");
    if (!std::isfinite(final_values[t]))
      throw std::invalid_argument(std::string(who) + ": final_values[" + std::to_string(t) + "] is not finite");
  }
  if (steps > 0 && !done(steps - 1) && !std::isfinite(bootstrap_value))
    throw std::invalid_argument(std::string(who) + ": bootstrap_value is not finite");
}

double Boundaries::next(size_t t, size_t steps, double following) const {
  if (is_terminated(t)) return 0.0;
  if (is_truncated(t)) return final_values[t];
  return t + 1 == steps ? bootstrap_value : following;
}

}  // namespace ponder::rl
