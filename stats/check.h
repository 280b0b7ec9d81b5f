// Input checks shared by the statistics: every failure is a std::invalid_argument naming the function and input.
#pragma once
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace ponder::stats::detail {

inline void check_finite(const std::vector<double>& x, const char* who, const char* name) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw std::invalid_argument(std::string(who) + ": " + name + "[" + std::to_string(i) + "] is not finite");
}

inline void check_nonempty(const std::vector<double>& x, const char* who, const char* name) {
  if (x.empty()) throw std::invalid_argument(std::string(who) + ": " + name + " is empty");
  check_finite(x, who, name);
}

inline void check_same_size(const std::vector<double>& a, const std::vector<double>& b, const char* who,
                            const char* name_a, const char* name_b) {
  if (a.size() != b.size())
    throw std::invalid_argument(std::string(who) + ": " + name_a + " has " + std::to_string(a.size()) +
                                " entries but " + name_b + " has " + std::to_string(b.size()));
}

inline void check_min_size(const std::vector<double>& x, size_t n, const char* who, const char* name) {
  if (x.size() < n)
    throw std::invalid_argument(std::string(who) + ": " + name + " needs at least " + std::to_string(n) +
                                " values, got " + std::to_string(x.size()));
}

}  // namespace ponder::stats::detail
