#include "stats/hierarchical.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "util/check.h"
#include "stats/descriptive.h"
#include "stats/special.h"
#include "tensor/rng.h"

namespace ponder::stats {

namespace {

void check_groups(const std::vector<std::vector<double>>& groups, const char* who) {
  if (groups.empty()) throw std::invalid_argument(std::string(who) + ": no groups");
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string name = "group " + std::to_string(g);
    checks::check_nonempty(groups[g], who, name.c_str());  // also checks that every value is finite
  }
}

// A uniform index in [0, n) from the generator's next draw.
size_t draw(Generator& gen, size_t n) { return std::min(n - 1, size_t(gen.uniform01() * double(n))); }

}  // namespace

double mean_of_group_means(const std::vector<std::vector<double>>& groups) {
  check_groups(groups, "mean_of_group_means");
  double s = 0;
  for (const auto& g : groups) s += mean(g);
  return s / double(groups.size());
}

Interval hierarchical_bootstrap_ci(const std::vector<std::vector<double>>& groups, const BootstrapOptions& options) {
  check_groups(groups, "hierarchical_bootstrap_ci");
  if (options.reps < 1) throw std::invalid_argument("hierarchical_bootstrap_ci: reps must be >= 1");
  Generator gen(options.seed);
  std::vector<double> reps(size_t(options.reps));
  for (double& r : reps) {
    double total = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::vector<double>& g = groups[draw(gen, groups.size())];
      double s = 0;
      for (size_t j = 0; j < g.size(); ++j) s += g[draw(gen, g.size())];
      total += s / double(g.size());
    }
    r = total / double(groups.size());
  }
  return percentile_interval(mean_of_group_means(groups), reps, options.confidence);
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0))
    throw std::invalid_argument("student_t_quantile: needs p in (0, 1) and df > 0, got p " + std::to_string(p) +
                                ", df " + std::to_string(df));
  if (p == 0.5) return 0;
  // CDF(t) for t > 0 is 1 − p_two_sided(t)/2; solve for |t| at the upper tail, then restore the sign.
  const double upper = p > 0.5 ? p : 1 - p;
  double lo = 0, hi = 1;
  while (1 - student_t_two_sided_p(hi, df) / 2 < upper) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-13 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (1 - student_t_two_sided_p(mid, df) / 2 < upper ? lo : hi) = mid;
  }
  const double t = (lo + hi) / 2;
  return p > 0.5 ? t : -t;
}

double minimum_detectable_effect(double sd, int64_t n, double alpha, double power) {
  if (n < 2 || !std::isfinite(sd)) return NAN;
  const double df = double(n - 1);
  return (student_t_quantile(1 - alpha / 2, df) + student_t_quantile(power, df)) * sd / std::sqrt(double(n));
}

}  // namespace ponder::stats
