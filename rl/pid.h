// The PID-Lagrangian budget controller of Stooke, Achiam & Abbeel (ICML 2020) in the positional form of the official
// code (rlpyt cppo_pid.py, OmniSafe pid_lagrange.py), and how its λ enters the policy objective (docs/rl_stats.md §4,
// pitfalls P5, P6, P7, P8).
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

namespace ponder::rl {

// How λ weighs the cost objective (docs/rl_stats.md §4): Sum (the default in both codes): (L_R + λ·L_C)/(1+λ); Diff:
// λ ∈ [0, 1] and (1-λ)·L_R + λ·L_C; None: L_R + λ·L_C with λ ≤ penalty_max.
enum class PenaltyNorm { Sum, Diff, None };

// Defaults are the rlpyt CppoPID constructor's (docs/rl_stats.md §4). OmniSafe's CPPOPID.yaml is kp 0.1, ki 0.01,
// kd 0.01, lambda_init 0.001, the rest equal; rlpyt's paper config uses delay 1 and lambda_init 0.
struct PidConfig {
  double kp = 0, ki = 1, kd = 0;
  int64_t d_delay = 10;                   // the D term compares the cost EMA with its value d_delay updates ago
  double alpha_p = 0.95, alpha_d = 0.95;  // EMA factors of the P-term error and the D-term cost (0: no smoothing)
  double lambda_init = 1.0;               // initial integral I
  double cost_limit = 25;                 // d; for PonderTTT a compute budget
  PenaltyNorm norm = PenaltyNorm::Sum;
  double penalty_max = 100;               // the cap on λ under PenaltyNorm::None
};

// One update per policy iteration, before the policy update, on the batch's average cost J (docs/rl_stats.md §4):
//   Δ = J - d;  I = max(0, I + Ki·Δ) [clip to [0,1] under Diff];  Δp = α_p·Δp + (1-α_p)·Δ;  Jd = α_d·Jd + (1-α_d)·J
//   D = max(0, Jd - hist[0]);  λ = max(0, Kp·Δp + I + Kd·D) [min(λ,1) under Diff, min(λ,penalty_max) under None]
//   hist.append(Jd), hist keeping the last d_delay values and starting as [0].
// Ki is folded into I (P5: no learning-rate η in front). The projected integral is the anti-windup: a long run of
// under-budget costs cannot bank negative I that would delay the response to a later violation. hist and Jd start at
// 0, so the first d_delay updates see a spurious positive D (the "D-kick" of P6), which the paper's code has too.
// With α_p = α_d = 0, d_delay = 1 and λ_init = 0 this is exactly the paper's Algorithm 2 (λ = (Kp·Δ + Ki·I' + Kd·∂)+
// with I' = (I' + Δ)+ and ∂ = (J - J_prev)+), for Ki > 0.
class PidLagrangian {
 public:
  explicit PidLagrangian(const PidConfig& config = {});
  // Feeds one average cost and returns the new λ. A NaN or infinite cost throws (P8: average over the whole batch
  // rather than over completed episodes, so a cost always exists).
  double update(double cost);
  double lambda() const { return lambda_; }
  const PidConfig& config() const { return config_; }

 private:
  PidConfig config_;
  double integral_, error_ema_ = 0, cost_ema_ = 0, lambda_;
  std::deque<double> history_{0.0};
};

// The naive Lagrangian for contrast (docs/rl_stats.md §4, P7): one projected SGD step λ ← max(0, λ + lr·(J - d)).
double projected_sgd_lagrange_step(double lambda, double cost, double cost_limit, double lr);

// OmniSafe CPPOPID's advantage combination under PenaltyNorm::Sum: (A_R - λ·A_C)/(1+λ), element-wise; the bounded
// 1/(1+λ) scale keeps gradients finite as λ grows.
std::vector<double> combine_advantages(const std::vector<double>& reward_advantages,
                                       const std::vector<double>& cost_advantages, double lambda);
// rlpyt's combination of the reward surrogate loss L_R and the (pessimistic) cost surrogate loss L_C under `norm`.
double combine_losses(double reward_loss, double cost_loss, double lambda, PenaltyNorm norm);

}  // namespace ponder::rl
