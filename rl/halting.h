// Halting distributions: PonderNet (Banino et al. 2021; docs/rl_stats.md §5, pitfalls P13, P14) and Adaptive
// Computation Time (Graves 2016; docs/rl_stats.md §6, P15). Plain values and their analytic pieces; the learners
// differentiate through autograd.
#pragma once
#include <cstdint>
#include <vector>

namespace ponder::rl {

// PonderNet's unconditional halting distribution p_n = λ_n·Π_{j<n}(1-λ_j), n = 1..N, from the conditional halting
// probabilities λ_n ∈ [0, 1]. λ_N is forced to 1 whatever is passed (the value is ignored), so Σp = 1 (P14: otherwise
// L_rec is down-weighted and E[steps] is wrong). The running product is accumulated in log space so it does not
// underflow for large N (P14's safe_cumprod).
std::vector<double> pondernet_halting_distribution(const std::vector<double>& lambdas);
// L_rec = Σ_n p_n·L_n for one sample (docs/rl_stats.md §5); the learner averages it over the batch.
double reconstruction_loss(const std::vector<double>& p, const std::vector<double>& step_losses);
// E[steps] = Σ_n n·p_n (steps counted from 1).
double expected_steps(const std::vector<double>& p);

// The truncated geometric prior p_G(k) = λ_p·(1-λ_p)^{k-1}, k = 1..N (docs/rl_stats.md §5). Unnormalised it sums to
// 1-(1-λ_p)^N; `normalize` divides by that sum. P13: implementations differ on this; docs/rl_stats.md §9.5 tests
// both.
std::vector<double> truncated_geometric_prior(double lambda_p, int64_t max_steps, bool normalize);
// KL(p‖q) = Σ p_n·log(p_n/q_n) with 0·log(0/q) = 0 and +∞ where p_n > 0 = q_n. PonderNet's regulariser is
// kl_divergence(p, prior) — the paper's direction; torch's KLDivLoss(p.log(), p_G) computes the reverse (P13).
double kl_divergence(const std::vector<double>& p, const std::vector<double>& q);
// The smallest N whose prior mass Σ_{k≤N} p_G(k) exceeds 1-ε, i.e. (1-λ_p)^N < ε (docs/rl_stats.md §5: 14 for
// λ_p = 0.2, ε = 0.05).
int64_t prior_max_steps(double lambda_p, double eps = 0.05);
// Inference (docs/rl_stats.md §5, P14): halt at the first step n with u_n < λ_n — the CONDITIONAL probability — and
// at N at the latest. `uniforms` holds one U[0,1) draw per step before the last (at least N-1). Returns n, counted
// from 1.
int64_t sample_halting_step(const std::vector<double>& lambdas, const std::vector<double>& uniforms);

struct ActHalting {
  int64_t steps = 0;                  // N(t)
  double remainder = 0;               // R(t) = 1 - Σ_{n<N} h^n
  std::vector<double> p;              // size max_steps: h^n for n < N, R at N, 0 after
  double ponder_cost = 0;             // ρ = N + R
  std::vector<double> grad_halting;   // ∂ρ/∂h^n, one per given h: -1 for n < N, 0 otherwise (N has no gradient)
};

// ACT (docs/rl_stats.md §6): N = min{n' : Σ_{n≤n'} h^n ≥ 1-ε}, capped at max_steps. `halting` holds h^1.. of the
// first max_steps-1 steps, optionally followed by the last step's unit, which is never read because step max_steps
// always halts (mfigurnov/sact's act_test passes either form). An early halt at n = 1 gives ρ = 2, not 1 (P15).
ActHalting act_halting(const std::vector<double>& halting, int64_t max_steps, double eps = 0.01);
// Σ_n p^n·y^n, the mean-field output or state of ACT; one output per step.
double act_output(const std::vector<double>& p, const std::vector<double>& outputs);

}  // namespace ponder::rl
