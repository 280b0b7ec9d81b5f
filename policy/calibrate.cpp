#include "policy/calibrate.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "policy/episodes.h"

namespace ponder::policy {
namespace {

double quantile(std::vector<double> v, double q) {  // linear interpolation (numpy's default)
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

}  // namespace

CostSummary run_windows(const ttt::Model& model, const std::vector<Window>& windows, Policy& policy,
                        const RolloutOptions& opt, uint64_t seed, std::vector<Episode>* episodes) {
  return run_windows(LayerRollouts(model), windows, policy, opt, seed, episodes);
}

CostSummary run_windows(const Rollouts& rollouts, const std::vector<Window>& windows, Policy& policy,
                        const RolloutOptions& opt, uint64_t seed, std::vector<Episode>* episodes,
                        const WindowProgress& progress) {
  const int jobs = episode_jobs(rollouts.model(), opt, windows.size());
  PolicyCopies copies(policy, jobs);
  std::vector<Episode> eps = run_episodes(windows, opt, progress, jobs, [&](size_t i, const RolloutOptions& o, int w) {
    return rollouts.policy(windows[i].first, windows[i].second, copies[w], o, seed + i);
  });
  CostSummary s;
  double tokens = 0, units = 0, ksum = 0;
  for (Episode& ep : eps) {  // in window order, so the sums do not depend on which thread ran what
    tokens += double(ep.tokens());
    s.inner_per_token += double(ep.inner);
    s.base_per_token += double(ep.base);
    s.overhead_per_token += double(ep.overhead);
    s.loss += ep.mean_loss() * double(ep.tokens());
    for (const UnitRecord& r : ep.units) ksum += r.k;
    units += double(ep.units.size());
    if (episodes) episodes->push_back(std::move(ep));
  }
  if (tokens == 0) throw std::invalid_argument("run_windows: no windows");
  s.inner_per_token /= tokens;
  s.base_per_token /= tokens;
  s.overhead_per_token /= tokens;
  s.loss /= tokens;
  s.mean_k = ksum / units;
  return s;
}

std::vector<double> quantile_thresholds(std::vector<double> scores, const std::vector<double>& fractions) {
  scores.erase(std::remove_if(scores.begin(), scores.end(), [](double x) { return std::isnan(x); }), scores.end());
  if (scores.empty()) throw std::invalid_argument("quantile_thresholds: no scores");
  std::vector<double> t;
  double acc = 0;
  for (size_t i = 0; i + 1 < fractions.size(); ++i) {
    acc += fractions[i];
    t.push_back(quantile(scores, acc));
  }
  return t;
}

Calibration calibrate_budget(const ttt::Model& model, const std::vector<Window>& windows, Score score, int low,
                             int high, int fallback, double target, const RolloutOptions& opt, double tol,
                             int max_iter) {
  return calibrate_budget(LayerRollouts(model), windows, score, low, high, fallback, target, opt, tol, max_iter);
}

namespace {
// The thresholds closest to the target from either side: spending above it (`over`, a threshold too low) and at or
// below it (`under`). Spending falls as the threshold rises.
struct Bracket {
  double over = NAN, under = NAN, over_gap = INFINITY, under_gap = INFINITY;
  void add(double threshold, double achieved, double target) {
    const double gap = std::abs(achieved - target);
    if (achieved > target && gap < over_gap) over = threshold, over_gap = gap;
    if (achieved <= target && gap < under_gap) under = threshold, under_gap = gap;
  }
  bool closed() const { return std::isfinite(over) && std::isfinite(under) && over != under; }
};

// The share of the units with a score that got the high level: the rate an EMA gate then aims for.
double share_high(const std::vector<Episode>& eps, Score score, int high) {
  double scored = 0, at_high = 0;
  for (const Episode& ep : eps)
    for (const UnitRecord& r : ep.units)
      if (!std::isnan(score_of(score, r.features))) {
        scored += 1;
        at_high += r.k == high;
      }
  return scored > 0 ? at_high / scored : 0;
}
}  // namespace

Calibration calibrate_budget(const Rollouts& rollouts, const std::vector<Window>& windows, Score score, int low,
                             int high, int fallback, double target, const RolloutOptions& opt, double tol,
                             int max_iter) {
  if (high <= low) throw std::invalid_argument("calibrate: high level must exceed the low one");
  UniformPolicy lo_p(low), hi_p(high);
  const double c_lo = run_windows(rollouts, windows, lo_p, opt, 0).inner_per_token;
  const double c_hi = run_windows(rollouts, windows, hi_p, opt, 0).inner_per_token;
  if (!(target >= c_lo && target <= c_hi))
    throw std::invalid_argument("calibrate: target " + std::to_string(target) + " FLOPs/token is outside what levels " +
                                std::to_string(low) + " and " + std::to_string(high) + " can spend (" +
                                std::to_string(c_lo) + " to " + std::to_string(c_hi) + ")");
  Calibration best;
  best.target = target;
  double q = (target - c_lo) / (c_hi - c_lo);  // share of high units if costs were exactly per unit
  ThresholdPolicy policy(score, {INFINITY}, {low, high}, fallback);
  Bracket bracket;
  auto run = [&](std::vector<Episode>& eps, int it) {
    eps.clear();
    const double achieved = run_windows(rollouts, windows, policy, opt, 0, &eps).inner_per_token;
    if (it > 0) bracket.add(policy.thresholds()[0], achieved, target);
    if (it > 0 && (best.iterations == 0 || std::abs(achieved - target) < std::abs(best.achieved - target))) {
      best.threshold = policy.thresholds()[0];
      best.fraction_high = share_high(eps, score, high);
      best.achieved = achieved;
      best.iterations = it;
    }
    return achieved;
  };
  const auto met = [&] { return best.iterations > 0 && std::abs(best.achieved - target) <= tol * target; };
  std::vector<double> scores;  // scores seen under the current thresholds
  int it = 0;
  for (; it <= max_iter && !met(); ++it) {
    std::vector<Episode> eps;
    const double achieved = run(eps, it);
    if (met()) break;
    if (it > 0) q = std::clamp(q + (target - achieved) / (c_hi - c_lo), 0.0, 1.0);
    scores.clear();
    for (const Episode& ep : eps)
      for (const UnitRecord& r : ep.units) scores.push_back(score_of(score, r.features));
    policy.set_thresholds(quantile_thresholds(scores, {1 - q, q}));
  }
  // The quantile step can cycle between two thresholds when a decision moves later units' scores (every decision
  // changes the state they are read under): bisect between the closest thresholds on either side of the target.
  for (int b = 0; b < max_iter && !met() && bracket.closed(); ++b) {
    policy.set_thresholds({0.5 * (bracket.over + bracket.under)});
    std::vector<Episode> eps;
    run(eps, ++it);
  }
  best.iterations = std::max(best.iterations, 1);
  return best;
}

}  // namespace ponder::policy
