#include "rl/synthetic.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "policy/policy_net.h"

namespace ponder::rl {
namespace {

// One N(0, 1) draw (Box–Muller), for the host-side noise of the synthetic problem.
double gaussian(Generator& g) {
  const double u1 = std::max(g.uniform01(), 1e-300), u2 = g.uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

SyntheticEnv::SyntheticEnv(SyntheticConfig cfg) : cfg_(cfg) {
  if (cfg_.contexts < 1 || cfg_.units < 1 || cfg_.delay < 0)
    throw std::invalid_argument("SyntheticEnv: contexts and units must be >= 1 and delay >= 0");
}

bool SyntheticEnv::hard(int64_t c, int64_t t) const {
  Generator g(cfg_.seed * 1000003 + uint64_t(c % cfg_.contexts) * 131 + uint64_t(t));
  return g.uniform01() < cfg_.hard_frac;
}

double SyntheticEnv::loss(bool is_hard, int k) const {
  if (!is_hard) return 1.0 + (k == 0 ? cfg_.skip_penalty : 0.0);
  return 2.0 - cfg_.gain * std::log2(1.0 + double(k));
}

Trajectory SyntheticEnv::run(policy::Policy& policy, int64_t c, uint64_t seed) { return run_trials(policy, c, seed, {}); }

Trajectory SyntheticEnv::run_trials(policy::Policy& policy, int64_t c, uint64_t seed, const std::vector<int>& trial_ks) {
  auto* actor = dynamic_cast<policy::VectorActor*>(&policy);
  Generator noise(seed ^ 0x9e3779b97f4a7c15ULL);
  policy.begin_sequence(seed);
  const int64_t T = cfg_.units;
  Trajectory tr;
  std::vector<double> gain(size_t(T), 0.0);  // loss reduction arriving at each unit
  int prev_k = 0;
  for (int64_t t = 0; t < T; ++t) {
    const bool h = hard(c, t);
    std::vector<double> x = {(h ? 1.0 : 0.0) + cfg_.feature_noise * gaussian(noise), double(t) / double(T),
                             prev_k / 4.0, 1.0};
    int k = 0;
    if (actor) {
      k = actor->act(x);
    } else {  // uniform, fixed and random policies need only the unit index
      policy::UnitFeatures f;
      f.unit = t;
      f.n_units = T;
      k = policy.decide(f);
    }
    // Steps on a hard unit reduce the loss of unit t + delay (the delayed benefit is lost past the end).
    const double base = h ? 2.0 : loss(false, k);
    const double benefit = h ? 2.0 - loss(true, k) : 0.0;
    if (t + cfg_.delay < T) gain[size_t(t + cfg_.delay)] += benefit;
    std::vector<double> trials;
    for (int tk : trial_ks) trials.push_back(h ? loss(true, tk) : loss(false, tk));
    if (!trial_ks.empty()) tr.trial_loss.push_back(trials);
    tr.x.push_back(x);
    tr.k.push_back(k);
    tr.reward.push_back(-base);  // the arriving gain is added below, once every unit has decided
    tr.cost.push_back(double(k));
    prev_k = k;
  }
  for (int64_t t = 0; t < T; ++t) tr.reward[size_t(t)] += gain[size_t(t)] + cfg_.reward_noise * gaussian(noise);
  return tr;
}

}  // namespace ponder::rl
