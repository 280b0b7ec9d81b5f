// PonderNet-style halting baseline (docs/rl_stats.md §5; docs/method.md §4.7): per unit, the halting policy
// gives λ_n for inner steps n = 1..N, p_n = λ_n·Π_{j<n}(1−λ_j) with λ_N = 1, and is trained on
//   L = Σ_n p_n·L_n + β·KL(p ‖ p_G),   p_G the truncated geometric prior with parameter λ_p (renormalised),
// where L_n is the loss the unit (and the lookahead units after it) would have had with n steps: every n is
// tried from the unit's starting state during training (counterfactual trials). At inference the number of
// steps is sampled with the conditional λ_n (docs/rl_stats.md P14), or its mode.
#pragma once
#include "rl/learn_util.h"

namespace ponder::rl {

struct PonderNetConfig {
  double beta = 0.01;     // KL weight
  double lambda_p = 0.5;  // prior halting probability: prior mean ≈ 1/λ_p steps
  int64_t contexts_per_iter = 8;
  int64_t iterations = 60;
  double lr = 3e-3;
  double max_grad_norm = 1.0;
  uint64_t seed = 0;
};

std::vector<IterationStats> train_pondernet(policy::HaltingPolicy& policy, Env& env, const PonderNetConfig& cfg,
                                            const LearnProgress& progress = {});

// The objective of one batch of units: logits (U, N), step losses (U, N) constants. Fills expected steps and
// the entropy of p into `s`.
Tensor pondernet_objective(const Tensor& logits, const Tensor& step_losses, const PonderNetConfig& cfg,
                           IterationStats& s);

}  // namespace ponder::rl
