#include "stats/descriptive.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "util/check.h"

namespace ponder::stats {
namespace {

std::vector<double> sorted_copy(const std::vector<double>& x, const char* who) {
  checks::check_nonempty(x, who, "x");
  std::vector<double> s = x;
  std::sort(s.begin(), s.end());
  return s;
}

double quantile_sorted(const std::vector<double>& s, double q) {
  const double pos = double(s.size() - 1) * q;
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - double(lo));
}

void check_q(double q, const char* who) {
  if (!(q >= 0.0 && q <= 1.0))
    throw std::invalid_argument(std::string(who) + ": q must be a fraction in [0, 1], got " + std::to_string(q));
}

}  // namespace

double mean(const std::vector<double>& x) {
  checks::check_nonempty(x, "mean", "x");
  return checks::mean_unchecked(x);
}

double variance(const std::vector<double>& x, int ddof) {
  if (ddof < 0) throw std::invalid_argument("variance: ddof must be >= 0, got " + std::to_string(ddof));
  checks::check_min_size(x, size_t(ddof) + 1, "variance", "x");
  const double m = mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return ss / double(x.size() - size_t(ddof));
}

double stddev(const std::vector<double>& x, int ddof) { return std::sqrt(variance(x, ddof)); }

double quantile(const std::vector<double>& x, double q) {
  check_q(q, "quantile");
  return quantile_sorted(sorted_copy(x, "quantile"), q);
}

std::vector<double> quantiles(const std::vector<double>& x, const std::vector<double>& qs) {
  for (double q : qs) check_q(q, "quantiles");
  const std::vector<double> s = sorted_copy(x, "quantiles");
  std::vector<double> out;
  out.reserve(qs.size());
  for (double q : qs) out.push_back(quantile_sorted(s, q));
  return out;
}

double median(const std::vector<double>& x) { return quantile_sorted(sorted_copy(x, "median"), 0.5); }

double trimmed_mean(const std::vector<double>& x, double proportion) {
  const std::vector<double> s = sorted_copy(x, "trimmed_mean");
  if (!(proportion >= 0.0 && proportion < 0.5))
    throw std::invalid_argument("trimmed_mean: proportion must be in [0, 0.5), got " + std::to_string(proportion));
  const size_t cut = size_t(proportion * double(s.size()));
  if (2 * cut >= s.size())
    throw std::invalid_argument("trimmed_mean: trimming " + std::to_string(cut) + " values from each end of " +
                                std::to_string(s.size()) + " leaves none");
  return std::accumulate(s.begin() + ptrdiff_t(cut), s.end() - ptrdiff_t(cut), 0.0) / double(s.size() - 2 * cut);
}

double iqm(const std::vector<double>& x) { return trimmed_mean(x, 0.25); }

std::vector<double> average_ranks(const std::vector<double>& x) {
  checks::check_nonempty(x, "average_ranks", "x");
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    // Positions i..j (0-based) share the value: each gets the mean of the 1-based ranks i+1..j+1.
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = double(i + j + 2) / 2.0;
    i = j + 1;
  }
  return ranks;
}

}  // namespace ponder::stats
