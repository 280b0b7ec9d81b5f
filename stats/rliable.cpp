#include "stats/rliable.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "util/check.h"
#include "stats/descriptive.h"
#include "tensor/rng.h"

namespace ponder::stats {
namespace {

void check_matrix(const ScoreMatrix& scores, const char* who, const char* name = "scores") {
  if (scores.empty() || scores.front().empty())
    throw std::invalid_argument(std::string(who) + ": " + name + " needs at least one run (row) and one task (column)");
  for (size_t n = 0; n < scores.size(); ++n) {
    if (scores[n].size() != scores.front().size())
      throw std::invalid_argument(std::string(who) + ": " + name + " row " + std::to_string(n) + " has " +
                                  std::to_string(scores[n].size()) + " tasks but row 0 has " +
                                  std::to_string(scores.front().size()));
    checks::check_finite(scores[n], who, name);
  }
}

std::vector<double> flatten(const ScoreMatrix& scores) {
  std::vector<double> flat;
  for (const auto& row : scores) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

std::vector<double> column(const ScoreMatrix& scores, size_t m) {
  std::vector<double> c(scores.size());
  for (size_t n = 0; n < scores.size(); ++n) c[n] = scores[n][m];
  return c;
}

void check_options(const BootstrapOptions& options, const char* who) {
  if (options.reps < 1)
    throw std::invalid_argument(std::string(who) + ": reps must be >= 1, got " + std::to_string(options.reps));
  if (!(options.confidence > 0.0 && options.confidence < 1.0))
    throw std::invalid_argument(std::string(who) + ": confidence must be in (0, 1), got " +
                                std::to_string(options.confidence));
}

// Resamples `scores` into `out` (same shape): every task column draws its N run indices from its own runs.
void resample_into(const ScoreMatrix& scores, Generator& gen, ScoreMatrix& out) {
  const size_t runs = scores.size(), tasks = scores.front().size();
  for (size_t m = 0; m < tasks; ++m)
    for (size_t n = 0; n < runs; ++n) {
      const size_t k = std::min(size_t(gen.uniform01() * double(runs)), runs - 1);
      out[n][m] = scores[k][m];
    }
}

// The intervals of replicates[b][i] for every statistic i.
std::vector<Interval> intervals(const std::vector<double>& points, const std::vector<std::vector<double>>& replicates,
                                double confidence, const char* who) {
  std::vector<Interval> out;
  std::vector<double> column_i(replicates.size());
  for (size_t i = 0; i < points.size(); ++i) {
    for (size_t b = 0; b < replicates.size(); ++b) {
      if (replicates[b].size() != points.size())
        throw std::invalid_argument(std::string(who) + ": the statistic returned " +
                                    std::to_string(replicates[b].size()) + " values on a resample but " +
                                    std::to_string(points.size()) + " on the original data");
      column_i[b] = replicates[b][i];
    }
    out.push_back(percentile_interval(points[i], column_i, confidence));
  }
  return out;
}

}  // namespace

std::vector<double> task_means(const ScoreMatrix& scores) {
  check_matrix(scores, "task_means");
  std::vector<double> means(scores.front().size());
  for (size_t m = 0; m < means.size(); ++m) means[m] = mean(column(scores, m));
  return means;
}

double aggregate_mean(const ScoreMatrix& scores) { return mean(task_means(scores)); }

double aggregate_median(const ScoreMatrix& scores) { return median(task_means(scores)); }

double aggregate_iqm(const ScoreMatrix& scores) {
  check_matrix(scores, "aggregate_iqm");
  return iqm(flatten(scores));
}

double optimality_gap(const ScoreMatrix& scores, double gamma) {
  check_matrix(scores, "optimality_gap");
  if (!std::isfinite(gamma)) throw std::invalid_argument("optimality_gap: gamma is not finite");
  std::vector<double> capped = flatten(scores);
  for (double& v : capped) v = std::min(v, gamma);
  return gamma - mean(capped);
}

std::vector<double> score_profile(const std::vector<double>& scores, const std::vector<double>& taus) {
  checks::check_nonempty(scores, "score_profile", "scores");
  checks::check_finite(taus, "score_profile", "taus");
  std::vector<double> out;
  out.reserve(taus.size());
  for (double tau : taus)
    out.push_back(double(std::count_if(scores.begin(), scores.end(), [&](double s) { return s > tau; })) /
                  double(scores.size()));
  return out;
}

std::vector<double> run_score_profile(const ScoreMatrix& scores, const std::vector<double>& taus) {
  check_matrix(scores, "run_score_profile");
  return score_profile(flatten(scores), taus);
}

std::vector<double> average_score_profile(const ScoreMatrix& scores, const std::vector<double>& taus) {
  return score_profile(task_means(scores), taus);
}

double probability_greater(const std::vector<double>& x, const std::vector<double>& y) {
  checks::check_nonempty(x, "probability_greater", "x");
  checks::check_nonempty(y, "probability_greater", "y");
  double s = 0;
  for (double a : x)
    for (double b : y) s += a > b ? 1.0 : a == b ? 0.5 : 0.0;
  return s / (double(x.size()) * double(y.size()));
}

double probability_of_improvement(const ScoreMatrix& x, const ScoreMatrix& y) {
  const char* who = "probability_of_improvement";
  check_matrix(x, who, "x");
  check_matrix(y, who, "y");
  const size_t tasks = x.front().size();
  if (y.front().size() != tasks)
    throw std::invalid_argument(std::string(who) + ": x has " + std::to_string(tasks) + " tasks but y has " +
                                std::to_string(y.front().size()));
  double s = 0;
  for (size_t m = 0; m < tasks; ++m) s += probability_greater(column(x, m), column(y, m));
  return s / double(tasks);
}

Interval percentile_interval(double point, const std::vector<double>& replicates, double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0))
    throw std::invalid_argument("percentile_interval: confidence must be in (0, 1), got " + std::to_string(confidence));
  const double alpha = 1.0 - confidence;
  const std::vector<double> q = quantiles(replicates, {alpha / 2.0, 1.0 - alpha / 2.0});
  return {point, q[0], q[1]};
}

ScoreMatrix stratified_resample(const ScoreMatrix& scores, const std::vector<std::vector<int64_t>>& run_indices) {
  const char* who = "stratified_resample";
  check_matrix(scores, who);
  const size_t runs = scores.size(), tasks = scores.front().size();
  if (run_indices.size() != tasks)
    throw std::invalid_argument(std::string(who) + ": run_indices has " + std::to_string(run_indices.size()) +
                                " tasks but scores has " + std::to_string(tasks));
  ScoreMatrix out(runs, std::vector<double>(tasks));
  for (size_t m = 0; m < tasks; ++m) {
    if (run_indices[m].size() != runs)
      throw std::invalid_argument(std::string(who) + ": run_indices[" + std::to_string(m) + "] has " +
                                  std::to_string(run_indices[m].size()) + " indices, expected " + std::to_string(runs));
    for (size_t n = 0; n < runs; ++n) {
      const int64_t k = run_indices[m][n];
      if (k < 0 || k >= int64_t(runs))
        throw std::invalid_argument(std::string(who) + ": run index " + std::to_string(k) + " of task " +
                                    std::to_string(m) + " is outside [0, " + std::to_string(runs) + ")");
      out[n][m] = scores[size_t(k)][m];
    }
  }
  return out;
}

std::vector<Interval> stratified_bootstrap_cis(const ScoreMatrix& scores, const MatrixStatistics& statistics,
                                               const BootstrapOptions& options) {
  const char* who = "stratified_bootstrap_cis";
  check_matrix(scores, who);
  check_options(options, who);
  const std::vector<double> points = statistics(scores);
  if (points.empty()) throw std::invalid_argument(std::string(who) + ": the statistic returned no values");
  Generator gen(options.seed);
  ScoreMatrix resampled = scores;
  std::vector<std::vector<double>> replicates(size_t(options.reps));
  for (auto& r : replicates) {
    resample_into(scores, gen, resampled);
    r = statistics(resampled);
  }
  return intervals(points, replicates, options.confidence, who);
}

Interval stratified_bootstrap_ci(const ScoreMatrix& scores, const MatrixStatistic& statistic,
                                 const BootstrapOptions& options) {
  return stratified_bootstrap_cis(scores, [&](const ScoreMatrix& s) { return std::vector<double>{statistic(s)}; },
                                  options)
      .front();
}

Interval stratified_bootstrap_ci(const ScoreMatrix& x, const ScoreMatrix& y, const PairStatistic& statistic,
                                 const BootstrapOptions& options) {
  const char* who = "stratified_bootstrap_ci";
  check_matrix(x, who, "x");
  check_matrix(y, who, "y");
  check_options(options, who);
  Generator gen(options.seed);
  ScoreMatrix xb = x, yb = y;
  std::vector<double> replicates(size_t(options.reps));
  for (double& r : replicates) {
    resample_into(x, gen, xb);
    resample_into(y, gen, yb);
    r = statistic(xb, yb);
  }
  return percentile_interval(statistic(x, y), replicates, options.confidence);
}

}  // namespace ponder::stats
