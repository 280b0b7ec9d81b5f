// rliable's aggregate metrics, performance profiles, probability of improvement and stratified bootstrap confidence
// intervals (Agarwal et al., NeurIPS 2021; google-research/rliable @ 3ccd9f4), as docs/rl_stats.md §7 states them.
// P<n>: the pitfalls of docs/rl_stats.md §10.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace ponder::stats {

// scores[n][m]: run (seed) n of task m, normalised per task. The axis order matters (P9): rows are runs, columns are
// tasks, and the bootstrap resamples rows within each column. Every function throws std::invalid_argument on an
// empty, ragged or non-finite matrix.
using ScoreMatrix = std::vector<std::vector<double>>;

std::vector<double> task_means(const ScoreMatrix& scores);
// rliable's aggregates (docs/rl_stats.md §7.2): mean and median of the per-task means; the IQM of all N·M scores pooled
// (trimmed_mean 25 %, floor cut); optimality gap γ - mean(min(X, γ)) over all scores.
double aggregate_mean(const ScoreMatrix& scores);
double aggregate_median(const ScoreMatrix& scores);
double aggregate_iqm(const ScoreMatrix& scores);
double optimality_gap(const ScoreMatrix& scores, double gamma = 1.0);

// Performance profiles (docs/rl_stats.md §7.3): F̂(τ) = fraction of scores STRICTLY greater than τ, one value per τ.
// The run-score profile pools all N·M scores; the average-score profile uses the M task means.
std::vector<double> score_profile(const std::vector<double>& scores, const std::vector<double>& taus);
std::vector<double> run_score_profile(const ScoreMatrix& scores, const std::vector<double>& taus);
std::vector<double> average_score_profile(const ScoreMatrix& scores, const std::vector<double>& taus);

// P(X > Y) for one task: (1/(n_x n_y)) Σ_i Σ_j S(x_i, y_j), S = 1 if >, ½ if =, 0 if < — the Mann–Whitney U over
// n_x·n_y, computed by pair counting (P11: library U conventions changed across scipy versions). Identical samples
// give exactly 0.5.
double probability_greater(const std::vector<double>& x, const std::vector<double>& y);
// rliable's probability of improvement: the mean over tasks of probability_greater of the task columns. The run
// counts of x and y may differ; their task counts must match.
double probability_of_improvement(const ScoreMatrix& x, const ScoreMatrix& y);

struct Interval {
  double point = 0;  // the statistic on the original data, not the bootstrap mean (docs/rl_stats.md §7.5)
  double lo = 0, hi = 0;
};

// The percentile interval [q_{α/2}, q_{1-α/2}] of bootstrap replicates (type-7 quantiles), α = 1 - confidence.
Interval percentile_interval(double point, const std::vector<double>& replicates, double confidence);

// One stratified resample: out[n][m] = scores[run_indices[m][n]][m], i.e. each task's column is resampled from its
// own runs only, with the run indices given per task. Exposed so tests can inject indices
// (docs/rl_stats.md §9.8a, P10).
ScoreMatrix stratified_resample(const ScoreMatrix& scores, const std::vector<std::vector<int64_t>>& run_indices);

struct BootstrapOptions {
  // rliable uses 50000 in get_interval_estimates and 2000 for performance profiles and probability of improvement.
  int64_t reps = 2000;
  double confidence = 0.95;
  uint64_t seed = 0;
};

using MatrixStatistics = std::function<std::vector<double>(const ScoreMatrix&)>;
using MatrixStatistic = std::function<double(const ScoreMatrix&)>;
using PairStatistic = std::function<double(const ScoreMatrix&, const ScoreMatrix&)>;

// Stratified bootstrap with percentile intervals (docs/rl_stats.md §7.5): for b = 1..reps, resample the N runs of
// every task independently with replacement and evaluate the statistic(s) on the resampled matrix. Returns one
// Interval per value `statistics` produces (it must always produce the same number of values, e.g. rliable's
// [median, IQM, mean, optimality gap] or a profile over fixed τ).
// Draws come from ponder::Generator(seed), a counter-based stream, so the intervals depend only on the data, the
// statistic and the options: the same seed reproduces them exactly on any machine and thread count. They cannot
// match rliable's numbers, which use numpy's global RNG (P10).
std::vector<Interval> stratified_bootstrap_cis(const ScoreMatrix& scores, const MatrixStatistics& statistics,
                                               const BootstrapOptions& options);
Interval stratified_bootstrap_ci(const ScoreMatrix& scores, const MatrixStatistic& statistic,
                                 const BootstrapOptions& options);
// rliable's StratifiedIndependentBootstrap for two-algorithm statistics such as probability_of_improvement: x and y
// are resampled independently (each stratified by task) in every replicate; their run counts may differ.
Interval stratified_bootstrap_ci(const ScoreMatrix& x, const ScoreMatrix& y, const PairStatistic& statistic,
                                 const BootstrapOptions& options);

}  // namespace ponder::stats
