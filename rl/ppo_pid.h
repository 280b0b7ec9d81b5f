// PPO with a PID-Lagrangian compute budget (docs/rl_stats.md §2–§4; docs/method.md §4.6): actions are
// the step options (default SKIP / UPDATE_1 / UPDATE_2 / UPDATE_4), reward = −loss of the unit's tokens,
// cost = the unit's compute, constraint E[cost per unit] ≤ budget. Separate reward and cost critics, GAE for
// both (a sequence end is a true terminal), λ from the PID controller once per iteration before the policy
// update, advantages combined as (Â_R − λ·Â_C)/(1+λ), clipped surrogate, minibatches and epochs, approx-KL
// and clip-fraction diagnostics.
#pragma once
#include "rl/learn_util.h"
#include "rl/pid.h"

namespace ponder::rl {

struct PpoPidConfig {
  double gamma = 0.9, gae_lambda = 0.95;
  double clip = 0.2;
  double ent_coef = 0.01, vf_coef = 0.5;
  double lr = 3e-3;
  double max_grad_norm = 0.5;
  int64_t epochs = 4, minibatches = 2;
  int64_t contexts_per_iter = 16;
  int64_t iterations = 60;
  int64_t critic_hidden = 64;
  double budget = 0;      // mean cost per unit allowed (Trajectory::cost units); must be > 0
  // The controller sees cost / budget, so its error is the relative overshoot and these gains do not depend on
  // what the cost is measured in (cost_limit is set to 1).
  PidConfig pid = {.kp = 1.0, .ki = 0.2, .kd = 0.0, .d_delay = 1, .alpha_p = 0.0, .alpha_d = 0.0,
                   .lambda_init = 0.0, .cost_limit = 1.0};
  // > 0: clip the critics' updates around their pre-update values, 0.5·mean(max((V−R)², (V_clip−R)²)) with V_clip =
  // V_old + clip(V − V_old, ±clip_value) (cleanrl clip_vloss). Off by default (docs/rl_stats.md P3: the clip acts on
  // absolute value differences; here values are in units of the warm-up batch's reward spread).
  double clip_value = 0;
  double target_kl = 0;   // > 0: stop an iteration's epochs once the last minibatch's approx-KL exceeds it (cleanrl)
  uint64_t seed = 0;
};

// Trains `policy` (sampling mode) in `env`. Rewards and costs are centred and scaled by constants fitted on a
// warm-up batch from the initial policy (a shift that depends on the position at most, so the policy gradient is
// unchanged) so the critics start near their targets; that batch also fits the feature normaliser when the
// policy has none.
std::vector<IterationStats> train_ppo_pid(policy::LearnedPolicy& policy, Env& env, const PpoPidConfig& cfg,
                                          const LearnProgress& progress = {});

}  // namespace ponder::rl
