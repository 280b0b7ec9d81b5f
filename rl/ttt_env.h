// The language-model environment: one episode = one text window run unit by unit under the policy
// (policy/rollout.h), reward = −(mean next-token loss of the unit's tokens), cost = the unit's inner
// FLOPs in multiples of its base forward FLOPs (so a budget reads "inner compute = 0.13× a forward"). K is spent
// by a policy::Rollouts: the TTT layers' inner steps, or fast-weight updates on a frozen base.
#pragma once
#include <memory>

#include "policy/calibrate.h"
#include "rl/env.h"

namespace ponder::rl {

class TTTEnv final : public Env {
 public:
  TTTEnv(const ttt::Model& model, std::vector<policy::Window> windows, policy::RolloutOptions opt);
  // `rollouts` must outlive the environment.
  TTTEnv(const policy::Rollouts& rollouts, std::vector<policy::Window> windows, policy::RolloutOptions opt);
  int64_t contexts() const override { return int64_t(windows_.size()); }
  Trajectory run(policy::Policy& policy, int64_t c, uint64_t seed) override;
  Trajectory run_trials(policy::Policy& policy, int64_t c, uint64_t seed, const std::vector<int>& trial_ks) override;
  int jobs() const override;  // the rollout options' (policy::episode_jobs): episodes only read the model and windows

 private:
  Trajectory convert(const policy::Episode& ep) const;
  std::shared_ptr<const policy::Rollouts> own_;  // the TTT layers' rollouts when built from a model
  const policy::Rollouts* rollouts_;
  std::vector<policy::Window> windows_;
  policy::RolloutOptions opt_;
};

}  // namespace ponder::rl
