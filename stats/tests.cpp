#include "stats/tests.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>

#include "util/check.h"
#include "stats/descriptive.h"
#include "stats/special.h"

namespace ponder::stats {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> differences_of(const std::vector<double>& a, const std::vector<double>& b, const char* who) {
  checks::check_nonempty(a, who, "a");
  checks::check_nonempty(b, who, "b");
  checks::check_same_size(a, b, who, "a", "b");
  std::vector<double> d(a.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// P(W+ <= w) and P(W+ >= w) under H0 (each rank's sign a fair coin), for ranks given doubled so average ranks of tied
// groups (multiples of ½) become integers. dist[s] = P(2·W+ = s), built one rank at a time.
std::pair<double, double> exact_tails(const std::vector<int64_t>& doubled_ranks, int64_t doubled_w) {
  const int64_t total = std::accumulate(doubled_ranks.begin(), doubled_ranks.end(), int64_t(0));
  std::vector<double> dist(size_t(total + 1), 0.0);
  dist[0] = 1.0;
  int64_t reach = 0;
  for (int64_t r : doubled_ranks) {
    reach += r;
    for (int64_t s = reach; s >= 0; --s)
      dist[size_t(s)] = 0.5 * dist[size_t(s)] + (s >= r ? 0.5 * dist[size_t(s - r)] : 0.0);
  }
  double below = 0, above = 0;
  for (int64_t s = 0; s <= total; ++s) {
    if (s <= doubled_w) below += dist[size_t(s)];
    if (s >= doubled_w) above += dist[size_t(s)];
  }
  return {below, above};
}

void check_p_values(const std::vector<double>& p, const char* who) {
  if (p.empty()) throw std::invalid_argument(std::string(who) + ": p_values is empty");
  for (size_t i = 0; i < p.size(); ++i)
    if (!(p[i] >= 0.0 && p[i] <= 1.0))
      throw std::invalid_argument(std::string(who) + ": p_values[" + std::to_string(i) + "] = " + std::to_string(p[i]) +
                                  " is not a probability in [0, 1]");
}

double pooled_sd(const std::vector<double>& x, const std::vector<double>& y, const char* who) {
  checks::check_nonempty(x, who, "x");
  checks::check_nonempty(y, who, "y");
  checks::check_min_size(x, 2, who, "x");
  checks::check_min_size(y, 2, who, "y");
  const double nx = double(x.size()), ny = double(y.size());
  return std::sqrt(((nx - 1) * variance(x, 1) + (ny - 1) * variance(y, 1)) / (nx + ny - 2));
}

}  // namespace

TTest paired_t_test(const std::vector<double>& differences) {
  const char* who = "paired_t_test";
  checks::check_nonempty(differences, who, "differences");
  checks::check_min_size(differences, 2, who, "differences");
  TTest r;
  const double n = double(differences.size());
  r.mean = mean(differences);
  r.sd = stddev(differences, 1);
  r.df = n - 1;
  if (r.sd == 0.0) {
    // No spread: the t statistic is ±∞ (or 0/0 = NaN when all differences are zero), as in scipy.
    r.t = r.mean == 0.0 ? kNaN : std::copysign(std::numeric_limits<double>::infinity(), r.mean);
    r.p_value = r.mean == 0.0 ? kNaN : 0.0;
    return r;
  }
  r.t = r.mean / (r.sd / std::sqrt(n));
  r.p_value = student_t_two_sided_p(r.t, r.df);
  return r;
}

TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  return paired_t_test(differences_of(a, b, "paired_t_test"));
}

Wilcoxon wilcoxon_signed_rank(const std::vector<double>& differences, WilcoxonMethod method, bool correction) {
  const char* who = "wilcoxon_signed_rank";
  checks::check_nonempty(differences, who, "differences");
  std::vector<double> d;
  for (double v : differences)
    if (v != 0.0) d.push_back(v);
  Wilcoxon r;
  r.n = int64_t(d.size());
  if (d.empty()) {
    r.z = r.p_value = kNaN;
    return r;
  }
  std::vector<double> magnitude(d.size());
  for (size_t i = 0; i < d.size(); ++i) magnitude[i] = std::abs(d[i]);
  const std::vector<double> ranks = average_ranks(magnitude);
  for (size_t i = 0; i < d.size(); ++i) (d[i] > 0 ? r.w_plus : r.w_minus) += ranks[i];
  r.statistic = std::min(r.w_plus, r.w_minus);

  const double n = double(r.n), mu = n * (n + 1) / 4.0;
  std::map<double, int64_t> ties;
  for (double m : magnitude) ++ties[m];
  double tie_term = 0;
  for (const auto& [value, t] : ties) tie_term += double(t * t * t - t);
  const double sigma = std::sqrt(n * (n + 1) * (2 * n + 1) / 24.0 - tie_term / 48.0);
  double deviation = r.w_plus - mu;
  if (correction) deviation -= std::copysign(0.5, deviation) * (deviation != 0.0);
  r.z = deviation / sigma;

  r.exact = method == WilcoxonMethod::Exact || (method == WilcoxonMethod::Auto && r.n <= 50);
  if (!r.exact) {
    r.p_value = normal_two_sided_p(r.z);
    return r;
  }
  std::vector<int64_t> doubled(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) doubled[i] = std::llround(2.0 * ranks[i]);
  const auto [below, above] = exact_tails(doubled, std::llround(2.0 * r.w_plus));
  r.p_value = std::min(1.0, 2.0 * std::min(below, above));
  return r;
}

Wilcoxon wilcoxon_signed_rank(const std::vector<double>& a, const std::vector<double>& b, WilcoxonMethod method,
                              bool correction) {
  return wilcoxon_signed_rank(differences_of(a, b, "wilcoxon_signed_rank"), method, correction);
}

std::vector<double> bonferroni(const std::vector<double>& p_values) {
  check_p_values(p_values, "bonferroni");
  std::vector<double> out(p_values.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::min(1.0, double(p_values.size()) * p_values[i]);
  return out;
}

std::vector<double> holm(const std::vector<double>& p_values) {
  check_p_values(p_values, "holm");
  const size_t m = p_values.size();
  std::vector<size_t> order(m);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p_values[a] < p_values[b]; });
  std::vector<double> out(m);
  double running = 0;  // the max over j <= k keeps adjusted p-values monotone in the sorted order
  for (size_t k = 0; k < m; ++k) {
    running = std::max(running, std::min(1.0, double(m - k) * p_values[order[k]]));
    out[order[k]] = running;
  }
  return out;
}

std::vector<double> within_families(const std::vector<double>& p_values, const std::vector<int>& family,
                                    std::vector<double> (*correct)(const std::vector<double>&)) {
  if (family.size() != p_values.size())
    throw std::invalid_argument("within_families: " + std::to_string(p_values.size()) + " p-values but " +
                                std::to_string(family.size()) + " family labels");
  std::vector<double> out(p_values.size());
  std::vector<bool> done(p_values.size(), false);
  for (size_t i = 0; i < p_values.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> idx;
    std::vector<double> ps;
    for (size_t j = i; j < p_values.size(); ++j)
      if (family[j] == family[i]) {
        idx.push_back(j);
        ps.push_back(p_values[j]);
        done[j] = true;
      }
    const std::vector<double> adj = correct(ps);
    for (size_t k = 0; k < idx.size(); ++k) out[idx[k]] = adj[k];
  }
  return out;
}

double cohens_d(const std::vector<double>& x, const std::vector<double>& y) {
  const double sp = pooled_sd(x, y, "cohens_d");
  return (mean(x) - mean(y)) / sp;
}

double hedges_g(const std::vector<double>& x, const std::vector<double>& y) {
  const double d = cohens_d(x, y);
  return d * (1.0 - 3.0 / (4.0 * double(x.size() + y.size()) - 9.0));
}

double cohens_dz(const std::vector<double>& differences) {
  checks::check_nonempty(differences, "cohens_dz", "differences");
  checks::check_min_size(differences, 2, "cohens_dz", "differences");
  return mean(differences) / stddev(differences, 1);
}

Correlation spearman(const std::vector<double>& x, const std::vector<double>& y) {
  const char* who = "spearman";
  checks::check_nonempty(x, who, "x");
  checks::check_nonempty(y, who, "y");
  checks::check_same_size(x, y, who, "x", "y");
  checks::check_min_size(x, 3, who, "x");
  const std::vector<double> rx = average_ranks(x), ry = average_ranks(y);
  const double mx = mean(rx), my = mean(ry);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx == 0.0 || syy == 0.0) return {kNaN, kNaN};
  Correlation c;
  c.rho = std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
  const double df = double(x.size()) - 2;
  c.p_value = std::abs(c.rho) == 1.0 ? 0.0 : student_t_two_sided_p(c.rho * std::sqrt(df / (1 - c.rho * c.rho)), df);
  return c;
}

}  // namespace ponder::stats
