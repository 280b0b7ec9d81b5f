#include "rl/pondernet.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/optim.h"
#include "rl/halting.h"

namespace ponder::rl {

Tensor pondernet_objective(const Tensor& logits, const Tensor& step_losses, const PonderNetConfig& cfg,
                           IterationStats& s) {
  const int64_t N = logits.shape()[1];
  if (step_losses.shape() != logits.shape())
    throw std::invalid_argument("pondernet: step losses " + shape_str(step_losses.shape()) + " do not match logits " +
                                shape_str(logits.shape()));
  std::vector<double> log_prior;
  for (double q : truncated_geometric_prior(cfg.lambda_p, N, true)) log_prior.push_back(std::log(q));
  Tensor logp = policy::halting_log_probs(logits);  // (U, N)
  Tensor p = exp(logp);
  Tensor rec = mean(sum(mul(p, step_losses), {-1}));
  Tensor kl = mean(sum(mul(p, sub(logp, Tensor::from_vector(log_prior, {N}, logp.dtype()))), {-1}));
  std::vector<double> n(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) n[size_t(i)] = double(i + 1);
  s.expected_k = mean(sum(mul(p, Tensor::from_vector(n, {N}, p.dtype())), {-1})).item();
  s.entropy = neg(mean(sum(mul(p, logp), {-1}))).item();
  Tensor obj = add(rec, mul(kl, scalar_like(kl, cfg.beta)));
  s.objective = obj.item();
  return obj;
}

std::vector<IterationStats> train_pondernet(policy::HaltingPolicy& policy, Env& env, const PonderNetConfig& cfg,
                                            const LearnProgress& progress) {
  if (!(cfg.lambda_p > 0 && cfg.lambda_p < 1)) throw std::invalid_argument("pondernet: lambda_p must be in (0, 1)");
  if (cfg.beta < 0) throw std::invalid_argument("pondernet: beta must be >= 0");
  const int64_t N = policy.max_steps();
  std::vector<int> trial_ks;
  for (int n = 1; n <= N; ++n) trial_ks.push_back(n);
  policy.set_mode(policy::ActMode::Sample);
  if (policy.norm().mean.empty())
    policy.set_norm(fit_norm(collect(env, policy, 0, cfg.contexts_per_iter, 1, cfg.seed + 777)));
  std::vector<Tensor> params = policy.net().parameters();
  AdamW opt(params, cfg.lr, 0.9, 0.999, 1e-5, 0.0);
  std::vector<IterationStats> log;
  for (int64_t it = 0; it < cfg.iterations; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Trajectory> ts = collect(env, policy, it, cfg.contexts_per_iter, 1, cfg.seed, trial_ks);
    const int64_t T = common_length(ts, "pondernet"), B = int64_t(ts.size());
    IterationStats s;
    s.iteration = it;
    summarise_units(ts, s);
    std::vector<double> losses;
    for (const Trajectory& t : ts)
      for (const auto& row : t.trial_loss) losses.insert(losses.end(), row.begin(), row.end());
    Tensor logits = reshape(policy.net().forward(feature_batch(ts, policy.norm())), {B * T, N});
    opt.zero_grad();
    backward(pondernet_objective(logits, Tensor::from_vector(losses, {B * T, N}, logits.dtype()), cfg, s));
    clip_grad_norm(params, cfg.max_grad_norm);
    opt.step();
    s.lambda = cfg.beta;
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log.push_back(s);
    if (progress) progress(s);
  }
  return log;
}

}  // namespace ponder::rl
