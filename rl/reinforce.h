// REINFORCE for the step-allocation policy (docs/rl_stats.md §1, docs/method.md §4.5): reward =
// −loss of the unit's tokens, discounted Monte-Carlo returns within the sequence (temporal credit: steps
// spent now lower the loss of later units through the carried weights), a baseline, a compute penalty
// and an entropy bonus.
#pragma once
#include <string>

#include "rl/learn_util.h"
#include "rl/returns.h"

namespace ponder::rl {

struct ReinforceConfig {
  double gamma = 0.9;
  // Compute penalty λ with target K: "abs-mean" adds λ·|E_π[K] − K_target| to the objective, E_π[K] the policy's
  // expected steps over the batch (differentiable through π); "square" subtracts λ·(K − K_target)² from each
  // unit's reward.
  double penalty = 0.05;
  double k_target = 2;
  std::string penalty_kind = "abs-mean";
  double entropy_coef = 0.01;
  // Baselines, per unit position (returns at position t are compared only with returns at t): "loo" (leave one
  // out over the `samples` episodes of one context), "batch" (batch mean), "ema" (moving average, decay below).
  std::string baseline = "loo";
  double ema_decay = 0.9;
  int64_t samples = 4;            // episodes per context per iteration (loo needs >= 2)
  int64_t contexts_per_iter = 4;
  int64_t iterations = 80;
  double lr = 3e-3;
  double max_grad_norm = 1.0;
  bool normalize_advantages = true;  // standardised over the batch (skipped for one value or no spread, P2)
  uint64_t seed = 0;
};

// Trains `policy` (sampling mode) in `env`. If the policy has no feature normaliser yet, one is fitted on a
// batch of episodes from the initial policy (that batch is not used for a gradient step).
std::vector<IterationStats> train_reinforce(policy::LearnedPolicy& policy, Env& env, const ReinforceConfig& cfg,
                                            const LearnProgress& progress = {});

// Per-position advantages of one batch under cfg.baseline, standardised when cfg.normalize_advantages (then
// *scale is the spread they were divided by, else 1); `ema` holds the EMA baselines per position across iterations.
std::vector<double> reinforce_advantages(const std::vector<Trajectory>& ts, const ReinforceConfig& cfg,
                                         std::vector<EmaBaseline>& ema, double* scale);

// The objective of one batch: −mean(log π(a|s)·A) − c_ent·H + penalty·|E_π[K] − K_target| (the last only for
// the abs-mean penalty); advantages (B·T, unit-major within each episode) are constants. Fills entropy, E_π[K]
// and the objective into `s`.
Tensor reinforce_objective(policy::LearnedPolicy& policy, const std::vector<Trajectory>& ts,
                           const std::vector<double>& advantages, double penalty, const ReinforceConfig& cfg,
                           IterationStats& s);

}  // namespace ponder::rl
