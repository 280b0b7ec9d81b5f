// Input checks for the numerical routines of rl/ and stats/ (returns, GAE, PPO, halting, PID, the statistics):
// every failure is a std::invalid_argument naming the function and the input, so a bad vector is reported where
// it enters, not as a NaN three calls later. Header-only and below every other layer: it depends on nothing.
#pragma once
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace ponder::checks {

inline void check_finite(const std::vector<double>& x, const char* who, const char* name) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw std::invalid_argument(std::string(who) + ": " + name + "[" + std::to_string(i) + "] is not finite");
}

inline void check_nonempty(const std::vector<double>& x, const char* who, const char* name) {
  if (x.empty()) throw std::invalid_argument(std::string(who) + ": " + name + " is empty");
  check_finite(x, who, name);
}

inline void check_min_size(const std::vector<double>& x, size_t n, const char* who, const char* name) {
  if (x.size() < n)
    throw std::invalid_argument(std::string(who) + ": " + name + " needs at least " + std::to_string(n) +
                                " values, got " + std::to_string(x.size()));
}

inline void check_same_size(const std::vector<double>& a, const std::vector<double>& b, const char* who,
                            const char* name_a, const char* name_b) {
  if (a.size() != b.size())
    throw std::invalid_argument(std::string(who) + ": " + name_a + " has " + std::to_string(a.size()) +
                                " entries but " + name_b + " has " + std::to_string(b.size()));
}

inline void check_unit_interval(double v, const char* who, const char* name) {
  if (!(v >= 0.0 && v <= 1.0))
    throw std::invalid_argument(std::string(who) + ": " + name + " must be in [0, 1], got " + std::to_string(v));
}

// The plain mean of a vector the caller has already checked to be non-empty (stats::mean is the checked one).
inline double mean_unchecked(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v;
  return s / double(x.size());
}

}  // namespace ponder::checks
