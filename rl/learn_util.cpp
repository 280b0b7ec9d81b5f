#include "rl/learn_util.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "policy/episodes.h"

namespace ponder::rl {

std::vector<Trajectory> collect(Env& env, policy::Policy& policy, int64_t iteration, int64_t contexts_per_iter,
                                int64_t samples, uint64_t seed, const std::vector<int>& trial_ks) {
  const size_t n = size_t(std::max<int64_t>(contexts_per_iter * samples, 0));
  const int jobs = int(std::min<size_t>(size_t(std::max(env.jobs(), 1)), std::max<size_t>(n, 1)));
  policy::PolicyCopies copies(policy, jobs);
  std::vector<Trajectory> out(n);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  side_by_side(order, jobs, [&](size_t e, int w) {
    const int64_t i = int64_t(e) / samples, s = int64_t(e) % samples;
    const int64_t c = (iteration * contexts_per_iter + i) % env.contexts();
    const uint64_t episode_seed = seed * 1000003 + uint64_t(iteration) * 7919 + uint64_t(i * samples + s);
    out[e] = trial_ks.empty() ? env.run(copies[w], c, episode_seed) : env.run_trials(copies[w], c, episode_seed, trial_ks);
  });
  return out;
}

int64_t common_length(const std::vector<Trajectory>& ts, const char* who) {
  if (ts.empty()) throw std::invalid_argument(std::string(who) + ": no episodes");
  const int64_t T = ts.front().size();
  for (const Trajectory& t : ts)
    if (t.size() != T || T < 1)
      throw std::invalid_argument(std::string(who) + ": episodes must all have the same number of units (>= 1)");
  return T;
}

Tensor feature_batch(const std::vector<Trajectory>& ts, const policy::FeatureNorm& norm,
                     const std::vector<int64_t>& pick) {
  const int64_t T = common_length(ts, "feature_batch");
  const int64_t F = int64_t(ts.front().x.front().size());
  std::vector<double> flat;
  int64_t B = 0;
  auto add = [&](const Trajectory& t) {
    for (const auto& x : t.x) {
      const std::vector<double> y = norm.apply(x);
      flat.insert(flat.end(), y.begin(), y.end());
    }
    ++B;
  };
  if (pick.empty()) for (const Trajectory& t : ts) add(t);
  else for (int64_t i : pick) add(ts[size_t(i)]);
  return Tensor::from_vector(flat, {B, T, F}, DType::F32);
}

Tensor value_batch(const std::vector<std::vector<double>>& v, const std::vector<int64_t>& pick) {
  std::vector<double> flat;
  int64_t B = 0, T = 0;
  auto add = [&](const std::vector<double>& row) {
    T = int64_t(row.size());
    flat.insert(flat.end(), row.begin(), row.end());
    ++B;
  };
  if (pick.empty()) for (const auto& row : v) add(row);
  else for (int64_t i : pick) add(v[size_t(i)]);
  return Tensor::from_vector(flat, {B, T}, DType::F32);
}

policy::FeatureNorm fit_norm(const std::vector<Trajectory>& ts) {
  std::vector<std::vector<double>> xs;
  for (const Trajectory& t : ts) xs.insert(xs.end(), t.x.begin(), t.x.end());
  policy::FeatureNorm n;
  n.fit(xs);
  return n;
}

void summarise_units(const std::vector<Trajectory>& ts, IterationStats& s) {
  double units = 0;
  s.loss = s.mean_k = s.cost = 0;
  for (const Trajectory& t : ts)
    for (int64_t u = 0; u < t.size(); ++u) {
      s.loss -= t.reward[size_t(u)];
      s.mean_k += t.k[size_t(u)];
      s.cost += t.cost[size_t(u)];
      ++units;
    }
  s.loss /= units;
  s.mean_k /= units;
  s.cost /= units;
}

}  // namespace ponder::rl
