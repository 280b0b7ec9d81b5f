// Discounted Monte-Carlo returns and the REINFORCE pieces that need no autograd (docs/rl_stats.md §1,
// pitfalls P1, P2, P16).
// The learners compute log-probabilities with the engine's autograd; these functions give them the targets,
// advantages and the reference values the tests pin down.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "rl/boundaries.h"

namespace ponder::rl {

// G_t = r_t + γ·next_t, computed backwards, where next_t is 0 at a terminal, V(final obs) at a truncation,
// bootstrap_value after the last transition and G_{t+1} otherwise (docs/rl_stats.md §1.1: a rollout cut mid-document
// bootstraps, as GAE does in §2, instead of resetting; P1). With only `terminated` flags and bootstrap_value 0 this
// is rlpyt's discount_return. No γ^t factor is applied (docs/rl_stats.md §1.1: the usual, slightly biased choice).
std::vector<double> discounted_returns(const std::vector<double>& rewards, const Boundaries& boundaries, double gamma);

// Baselines (docs/rl_stats.md §1.3, P16). A_i = G_i - mean(G). The batch mean contains sample i's own return, so
// strictly it scales the expected gradient by (1 - 1/n); leave_one_out_advantages and EmaBaseline (after its first
// batch) do not.
std::vector<double> batch_mean_advantages(const std::vector<double>& returns);
// RLOO: `returns` holds consecutive groups of `group_size` samples drawn for one context (e.g. K candidate step
// counts for one chunk); A_i = G_i - mean_{j≠i} G_j within its group. group_size must be >= 2 and divide the size.
std::vector<double> leave_one_out_advantages(const std::vector<double>& returns, int64_t group_size);

// An exponential moving average of batch-mean returns: b ← decay·b + (1-decay)·mean(G).
class EmaBaseline {
 public:
  explicit EmaBaseline(double decay);
  // A = G - b with b as it was BEFORE this batch (so the baseline never contains the batch's own actions),
  // then b is updated with this batch. The first batch has no history: b starts at that batch's mean, so the first
  // call behaves like batch_mean_advantages rather than subtracting an arbitrary 0.
  std::vector<double> advantages(const std::vector<double>& returns);
  bool initialised() const { return initialised_; }
  double value() const { return value_; }

 private:
  double decay_;
  double value_ = 0;
  bool initialised_ = false;
};

// float32 machine epsilon: pytorch/examples' return normalisation adds it to the std (docs/rl_stats.md §1.4).
inline constexpr double kFloat32Eps = std::numeric_limits<float>::epsilon();

// (x - mean) / (std_ddof + eps). P2: a single value has no spread (torch's unbiased std is NaN there), so a vector
// of size 1 is returned unchanged — no centring, no division — as stable-baselines3 PR #1028 does. Constant
// vectors of size >= 2 give exact zeros (std = 0, finite eps), never NaN. ddof must be 0 or 1.
// When `divisor` is given it receives what the centred values were divided by (sd + eps), or 1 where nothing was.
std::vector<double> standardize(const std::vector<double>& x, int ddof = 1, double eps = kFloat32Eps,
                                double* divisor = nullptr);

// L_pi = -(1/n) Σ log π(a_t|s_t)·A_t (docs/rl_stats.md §1.2); the advantages are constants here (detached).
double policy_gradient_loss(const std::vector<double>& log_probs, const std::vector<double>& advantages);
// L = ½·mean((V - G)²): the learned-baseline loss of docs/rl_stats.md §1.2 and the unclipped PPO value
// loss of §3.
double value_loss(const std::vector<double>& values, const std::vector<double>& returns);
// ∂(-A·log softmax(z)_a)/∂z = -A·(onehot(a) - softmax(z)) for one sample of a categorical policy
// (docs/rl_stats.md §1.2).
std::vector<double> policy_gradient_logit_grad(const std::vector<double>& logits, int64_t action, double advantage);

}  // namespace ponder::rl
