// Pieces the learners share: collecting episodes, turning them into batched tensors, and the per-iteration
// statistics every learner logs.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "policy/policy_net.h"
#include "rl/env.h"

namespace ponder::rl {

// What one training iteration did (averages over the iteration's units).
struct IterationStats {
  int64_t iteration = 0;
  double loss = 0;         // mean unit loss (−reward before any shaping)
  double mean_k = 0;       // steps actually spent per unit
  double cost = 0;         // mean cost per unit (Trajectory::cost)
  double expected_k = 0;   // E_π[K] per unit (halting: E[steps])
  double entropy = 0;      // mean policy entropy (nats)
  double objective = 0;    // the loss the optimiser minimised
  double lambda = 0;       // PPO-PID: Lagrange multiplier; REINFORCE: the penalty coefficient
  double approx_kl = 0, clip_fraction = 0, value_loss = 0;  // PPO diagnostics
  double seconds = 0;      // wall-clock of the iteration
};
using LearnProgress = std::function<void(const IterationStats&)>;

// Runs contexts_per_iter contexts × `samples` episodes each (consecutive samples share a context, as
// leave-one-out baselines need). Contexts cycle through the environment in order from iteration·contexts_per_iter.
std::vector<Trajectory> collect(Env& env, policy::Policy& policy, int64_t iteration, int64_t contexts_per_iter,
                                int64_t samples, uint64_t seed, const std::vector<int>& trial_ks = {});

// All trajectories must have the same length T ≥ 1; returns T.
int64_t common_length(const std::vector<Trajectory>& ts, const char* who);
// Normalised features of trajectories `pick` (all when empty): (B, T, F) float32.
Tensor feature_batch(const std::vector<Trajectory>& ts, const policy::FeatureNorm& norm,
                     const std::vector<int64_t>& pick = {});
// (B, T) values of trajectories `pick` from a per-trajectory (T) vector-of-vectors, float32.
Tensor value_batch(const std::vector<std::vector<double>>& v, const std::vector<int64_t>& pick = {});
// Fits a feature normaliser on every unit of the trajectories.
policy::FeatureNorm fit_norm(const std::vector<Trajectory>& ts);
// Mean of the per-unit statistics of a batch (loss, K, cost).
void summarise_units(const std::vector<Trajectory>& ts, IterationStats& s);

}  // namespace ponder::rl
