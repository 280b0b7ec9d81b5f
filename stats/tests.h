// Classical paired tests, multiple-comparison corrections, effect sizes and rank correlation (docs/rl_stats.md §8),
// following scipy's documented definitions. P<n>: the pitfalls of docs/rl_stats.md §10.
#pragma once
#include <cstdint>
#include <vector>

namespace ponder::stats {

struct TTest {
  double mean = 0;     // mean of the differences
  double sd = 0;       // their standard deviation, ddof = 1
  double t = 0;        // mean / (sd/√n)
  double df = 0;       // n - 1
  double p_value = 0;  // two-sided, from Student's t (special.h)
};

// scipy.stats.ttest_rel: d_i = a_i - b_i, t = mean(d)/(sd(d)/√n), df = n - 1, two-sided p. Needs n >= 2. Differences
// with no spread give, as scipy does, t = ±∞ and p = 0 when their mean is nonzero and t = p = NaN when every
// difference is zero (identical inputs): callers must not pass NaN p-values on to holm/bonferroni, which reject them.
TTest paired_t_test(const std::vector<double>& differences);
TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

// How wilcoxon_signed_rank computes its p-value.
//   Exact: the exact null distribution of W+ over all 2^n sign patterns of the (tied, average) ranks — scipy's
//          'exact' without ties, and the exhaustive sign-flip permutation test scipy >= 1.15 runs for small samples
//          with ties (docs/rl_stats.md §8.2 step 4). Counted by dynamic programming over rank sums, so n is not
//          limited to ~20.
//   Normal: the normal approximation with the tie-corrected variance (docs/rl_stats.md §8.2 step 5).
//   Auto:   Exact when n <= 50 (after dropping zeros), otherwise Normal.
enum class WilcoxonMethod { Auto, Exact, Normal };

struct Wilcoxon {
  int64_t n = 0;         // differences left after dropping zeros (zero_method = 'wilcox', P12)
  double w_plus = 0;     // Σ ranks of positive differences
  double w_minus = 0;    // Σ ranks of negative differences
  double statistic = 0;  // min(W+, W-), scipy's two-sided statistic
  double z = 0;          // (W+ - n(n+1)/4 [∓ 0.5 with correction]) / σ, reported whichever method gives p
  double p_value = 0;    // two-sided
  bool exact = false;    // whether p_value came from the exact distribution
};

// scipy.stats.wilcoxon(d, zero_method='wilcox', alternative='two-sided') (docs/rl_stats.md §8.2): drop zero
// differences, rank |d| with average ranks, W± = rank sums by sign. Exact p = min(1, 2·min(P(W+ ≥ w+), P(W+ ≤ w+)));
// normal p uses σ² = n(n+1)(2n+1)/24 - Σ(t³-t)/48 over tie groups t, with the continuity correction moving W+ 0.5
// towards the mean when `correction` is set (it does not affect the exact p). When every difference is zero (n = 0)
// the statistics are 0 and z = p = NaN, as in scipy.
Wilcoxon wilcoxon_signed_rank(const std::vector<double>& differences, WilcoxonMethod method = WilcoxonMethod::Auto,
                              bool correction = false);
Wilcoxon wilcoxon_signed_rank(const std::vector<double>& a, const std::vector<double>& b,
                              WilcoxonMethod method = WilcoxonMethod::Auto, bool correction = false);

// Multiple-comparison corrections of a family of p-values, returned in the input order (docs/rl_stats.md §8.3).
// Bonferroni: min(1, m·p). Holm: with p sorted ascending, p_adj(k) = max_{j≤k} min(1, (m-j+1)·p_(j)).
// p-values must be in [0, 1]; NaN is rejected.
std::vector<double> bonferroni(const std::vector<double>& p_values);
std::vector<double> holm(const std::vector<double>& p_values);
// Either correction applied within each family separately: family[i] names the family of p_values[i].
std::vector<double> within_families(const std::vector<double>& p_values, const std::vector<int>& family,
                                    std::vector<double> (*correct)(const std::vector<double>&));

// Effect sizes (docs/rl_stats.md §8.4). Cohen's d of independent samples: (x̄ - ȳ)/s_p with the pooled sd
// s_p = sqrt(((n_x-1)s_x² + (n_y-1)s_y²)/(n_x+n_y-2)); each sample needs >= 2 values.
// Hedges' g = d·(1 - 3/(4(n_x+n_y)-9)).
double cohens_d(const std::vector<double>& x, const std::vector<double>& y);
double hedges_g(const std::vector<double>& x, const std::vector<double>& y);
// The paired effect size d_z = mean(d)/sd(d) (ddof = 1) — not the same quantity as cohens_d on the raw groups.
double cohens_dz(const std::vector<double>& differences);

struct Correlation {
  double rho = 0;
  double p_value = 0;  // two-sided
};

// scipy.stats.spearmanr: the Pearson correlation of the average ranks; p from t = ρ·sqrt((n-2)/(1-ρ²)) with n-2
// degrees of freedom (|ρ| = 1 gives p = 0). Needs n >= 3. A constant input has no ranks to correlate: ρ = p = NaN,
// as in scipy.
Correlation spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace ponder::stats
