#include "rl/ttt_env.h"

#include <limits>
#include <stdexcept>

#include "policy/episodes.h"

namespace ponder::rl {

TTTEnv::TTTEnv(const ttt::Model& model, std::vector<policy::Window> windows, policy::RolloutOptions opt)
    : own_(std::make_shared<const policy::LayerRollouts>(model)), rollouts_(own_.get()), windows_(std::move(windows)),
      opt_(std::move(opt)) {
  if (windows_.empty()) throw std::invalid_argument("TTTEnv: no training windows");
}

TTTEnv::TTTEnv(const policy::Rollouts& rollouts, std::vector<policy::Window> windows, policy::RolloutOptions opt)
    : rollouts_(&rollouts), windows_(std::move(windows)), opt_(std::move(opt)) {
  if (windows_.empty()) throw std::invalid_argument("TTTEnv: no training windows");
}

Trajectory TTTEnv::convert(const policy::Episode& ep) const {
  Trajectory t;
  for (const policy::UnitRecord& r : ep.units) {
    t.x.push_back(r.features.vector());
    t.k.push_back(r.k);
    t.reward.push_back(-r.loss);
    t.cost.push_back(double(r.inner_flops) / double(std::max<uint64_t>(r.base_flops, 1)));
    if (!r.trial_loss.empty()) t.trial_loss.push_back(r.trial_loss);
  }
  return t;
}

Trajectory TTTEnv::run(policy::Policy& policy, int64_t c, uint64_t seed) {
  const policy::Window& w = windows_[size_t(c % contexts())];
  return convert(rollouts_->policy(w.first, w.second, policy, opt_, seed));
}

Trajectory TTTEnv::run_trials(policy::Policy& policy, int64_t c, uint64_t seed, const std::vector<int>& trial_ks) {
  policy::RolloutOptions opt = opt_;
  opt.trial_ks = trial_ks;
  const policy::Window& w = windows_[size_t(c % contexts())];
  return convert(rollouts_->policy(w.first, w.second, policy, opt, seed));
}

int TTTEnv::jobs() const {
  return policy::episode_jobs(rollouts_->model(), opt_, std::numeric_limits<size_t>::max());
}

}  // namespace ponder::rl
