// The language-model environment: one episode = one text window run unit by unit under the policy
// (policy/rollout.h), reward = −(mean next-token loss of the unit's tokens), cost = the unit's inner
// TTT FLOPs in multiples of its base forward FLOPs (so a budget reads "inner compute = 0.13× a forward").
#pragma once
#include "policy/calibrate.h"
#include "rl/env.h"

namespace ponder::rl {

class TTTEnv final : public Env {
 public:
  TTTEnv(const ttt::Model& model, std::vector<policy::Window> windows, policy::RolloutOptions opt);
  int64_t contexts() const override { return int64_t(windows_.size()); }
  Trajectory run(policy::Policy& policy, int64_t c, uint64_t seed) override;
  Trajectory run_trials(policy::Policy& policy, int64_t c, uint64_t seed, const std::vector<int>& trial_ks) override;

 private:
  Trajectory convert(const policy::Episode& ep) const;
  const ttt::Model& model_;
  std::vector<policy::Window> windows_;
  policy::RolloutOptions opt_;
};

}  // namespace ponder::rl
