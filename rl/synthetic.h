// A synthetic allocation problem whose right answer is known, for testing the learners. Each unit is
// hard or easy (probability `hard_frac`, fixed per context), visible in the features through a noisy
// indicator. Extra steps help only hard units:
//   loss(easy, K) = 1 + skip_penalty·[K = 0]        loss(hard, K) = 2 − gain·log2(1 + K)
// Rewards are −loss plus Gaussian noise; cost = K. With `delay` = d, the gain of the steps spent on
// unit t shows up in unit t+d's reward instead (steps now help later units, as carried TTT weights
// do), so only a learner with temporal credit (γ > 0) can find it.
#pragma once
#include "rl/env.h"

namespace ponder::rl {

struct SyntheticConfig {
  int64_t contexts = 64;
  int64_t units = 8;
  double hard_frac = 0.5;
  double gain = 0.5;
  double skip_penalty = 0.05;
  double feature_noise = 0.1;  // std of the noise on the hard/easy indicator
  double reward_noise = 0.1;
  int64_t delay = 0;
  uint64_t seed = 0;
};

class SyntheticEnv final : public Env {
 public:
  explicit SyntheticEnv(SyntheticConfig cfg);
  static constexpr int64_t kFeatures = 4;  // noisy hard indicator, position, previous K / 4, bias
  int64_t contexts() const override { return cfg_.contexts; }
  Trajectory run(policy::Policy& policy, int64_t c, uint64_t seed) override;
  Trajectory run_trials(policy::Policy& policy, int64_t c, uint64_t seed, const std::vector<int>& trial_ks) override;
  bool hard(int64_t c, int64_t t) const;
  double loss(bool hard, int k) const;  // noise-free loss of a unit given its steps

 private:
  SyntheticConfig cfg_;
};

}  // namespace ponder::rl
