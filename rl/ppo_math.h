// PPO-clip arithmetic following cleanrl ppo.py (docs/rl_stats.md §3, pitfalls P2, P3, P4): the surrogate loss with
// its gradient, value clipping, advantage normalisation and the diagnostics. The learner evaluates log-probabilities
// with autograd and chains its gradient through grad_logratio.
#pragma once
#include <vector>

namespace ponder::rl {

struct ClippedSurrogate {
  double loss = 0;                   // L_clip = mean(max(-Â·r, -Â·clip(r, 1-ε, 1+ε))), r = exp(logratio)
  std::vector<double> grad_logratio;  // ∂L_clip/∂logratio_i: -Â_i·r_i/n where the unclipped term is the max, else 0
};

// logratio = log π_new(a|s) - log π_old(a|s) per sample; `advantages` are used as given (normalise them first with
// normalize_advantages when norm_adv is on, per minibatch as cleanrl does). When both terms are equal the gradient
// goes through the unclipped term (the tie has measure zero).
ClippedSurrogate clipped_surrogate(const std::vector<double>& logratio, const std::vector<double>& advantages,
                                   double clip_eps);

// Diagnostics (docs/rl_stats.md §3): Schulman's k3 estimator mean((r-1) - logratio) >= 0, the naive k1
// mean(-logratio) (which can be negative), and the fraction of samples with |r-1| > ε — counted whether or not the
// clip changed that sample's objective, as cleanrl does.
double approx_kl(const std::vector<double>& logratio);
double old_approx_kl(const std::vector<double>& logratio);
double clip_fraction(const std::vector<double>& logratio, double clip_eps);

// V_old + clip(V_new - V_old, -ε, +ε).
double clip_value(double v_new, double v_old, double clip_eps);
// 0.5·mean(max((V_new-R)², (V_clip-R)²)) (cleanrl's clip_vloss, docs/rl_stats.md §3). P3: ε acts on absolute value
// differences, so it depends on the reward scale; pass a value-specific ε or use value_loss (rl/returns.h) for the
// unclipped form.
double clipped_value_loss(const std::vector<double>& v_new, const std::vector<double>& v_old,
                          const std::vector<double>& returns, double clip_eps);

// (A - mean(A)) / (std_unbiased(A) + eps), cleanrl's per-minibatch normalisation (torch std, ddof = 1, P4); a
// minibatch of one advantage is returned unchanged (P2; see standardize in rl/returns.h).
std::vector<double> normalize_advantages(const std::vector<double>& advantages, double eps = 1e-8);

// 1 - Var(R - V)/Var(R); NaN when Var(R) = 0, as cleanrl reports it.
double explained_variance(const std::vector<double>& values, const std::vector<double>& returns);

// -Σ p log p of one categorical distribution (0·log 0 = 0); probabilities must be >= 0 and sum to 1 within 1e-9.
double categorical_entropy(const std::vector<double>& probs);

}  // namespace ponder::rl
