#include "rl/reinforce.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/optim.h"
#include "rl/returns.h"

namespace ponder::rl {
namespace {

void check(const ReinforceConfig& c) {
  if (c.baseline != "loo" && c.baseline != "batch" && c.baseline != "ema")
    throw std::invalid_argument("reinforce: baseline must be loo, batch or ema, got '" + c.baseline + "'");
  if (c.penalty_kind != "abs-mean" && c.penalty_kind != "square")
    throw std::invalid_argument("reinforce: penalty kind must be abs-mean or square, got '" + c.penalty_kind + "'");
  if (c.baseline == "loo" && c.samples < 2)
    throw std::invalid_argument("reinforce: the leave-one-out baseline needs samples >= 2");
  if (c.gamma < 0 || c.gamma > 1) throw std::invalid_argument("reinforce: gamma must be in [0, 1]");
  if (c.samples < 1 || c.contexts_per_iter < 1 || c.iterations < 0)
    throw std::invalid_argument("reinforce: samples and contexts_per_iter must be >= 1");
}

}  // namespace

std::vector<double> reinforce_advantages(const std::vector<Trajectory>& ts, const ReinforceConfig& cfg,
                                         std::vector<EmaBaseline>& ema, double* scale) {
  const int64_t T = common_length(ts, "reinforce"), B = int64_t(ts.size());
  std::vector<std::vector<double>> G;  // (B, T)
  for (const Trajectory& t : ts) {
    std::vector<double> r = t.reward;
    if (cfg.penalty_kind == "square")
      for (int64_t u = 0; u < T; ++u) r[size_t(u)] -= cfg.penalty * (t.k[size_t(u)] - cfg.k_target) * (t.k[size_t(u)] - cfg.k_target);
    Boundaries end;
    end.terminated.assign(size_t(T), false);
    end.terminated.back() = true;
    G.push_back(discounted_returns(r, end, cfg.gamma));
  }
  if (cfg.baseline == "ema" && int64_t(ema.size()) != T) ema.assign(size_t(T), EmaBaseline(cfg.ema_decay));
  std::vector<double> adv(static_cast<size_t>(B * T));
  for (int64_t u = 0; u < T; ++u) {
    std::vector<double> col(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) col[size_t(b)] = G[size_t(b)][size_t(u)];
    std::vector<double> a = cfg.baseline == "loo"     ? leave_one_out_advantages(col, cfg.samples)
                            : cfg.baseline == "batch" ? batch_mean_advantages(col)
                                                      : ema[size_t(u)].advantages(col);
    for (int64_t b = 0; b < B; ++b) adv[size_t(b * T + u)] = a[size_t(b)];
  }
  *scale = 1;
  if (!cfg.normalize_advantages) return adv;
  // Standardising divides the policy-gradient term by the advantages' spread; the caller divides the penalty
  // term by the same number so λ keeps its meaning in nats per step.
  return standardize(adv, 1, kFloat32Eps, scale);
}

Tensor reinforce_objective(policy::LearnedPolicy& policy, const std::vector<Trajectory>& ts,
                           const std::vector<double>& advantages, double penalty, const ReinforceConfig& cfg,
                           IterationStats& s) {
  const int64_t T = common_length(ts, "reinforce"), B = int64_t(ts.size());
  const int64_t A = int64_t(policy.options().size());
  std::vector<int64_t> actions;
  for (const Trajectory& t : ts)
    for (int k : t.k) actions.push_back(policy.action_index(k));
  Tensor logp = log_softmax(policy.net().forward(feature_batch(ts, policy.norm())), -1);  // (B, T, A)
  Tensor chosen = sum(mul(logp, one_hot(Tensor::from_ints(actions, {B, T}), A, logp.dtype())), {-1});  // (B, T)
  Tensor adv = Tensor::from_vector(advantages, {B, T}, logp.dtype());
  Tensor p = exp(logp);
  Tensor entropy = neg(mean(sum(mul(p, logp), {-1})));
  std::vector<double> kv(policy.options().begin(), policy.options().end());
  Tensor expected_k = mean(sum(mul(p, Tensor::from_vector(kv, {A}, logp.dtype())), {-1}));
  Tensor obj = sub(neg(mean(mul(chosen, adv))), mul(entropy, scalar_like(entropy, cfg.entropy_coef)));
  if (cfg.penalty_kind == "abs-mean" && penalty > 0)
    obj = add(obj, mul(abs(affine(expected_k, 1, -cfg.k_target)), scalar_like(obj, penalty)));
  s.entropy = entropy.item();
  s.expected_k = expected_k.item();
  s.objective = obj.item();
  return obj;
}

std::vector<IterationStats> train_reinforce(policy::LearnedPolicy& policy, Env& env, const ReinforceConfig& cfg,
                                            const LearnProgress& progress) {
  check(cfg);
  policy.set_mode(policy::ActMode::Sample);
  if (policy.norm().mean.empty())
    policy.set_norm(fit_norm(collect(env, policy, 0, cfg.contexts_per_iter, cfg.samples, cfg.seed + 777)));
  std::vector<Tensor> params = policy.net().parameters();
  AdamW opt(params, cfg.lr, 0.9, 0.999, 1e-5, 0.0);
  std::vector<EmaBaseline> ema;
  std::vector<IterationStats> log;
  for (int64_t it = 0; it < cfg.iterations; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Trajectory> ts = collect(env, policy, it, cfg.contexts_per_iter, cfg.samples, cfg.seed);
    IterationStats s;
    s.iteration = it;
    s.lambda = cfg.penalty;
    summarise_units(ts, s);
    double scale = 1;
    const std::vector<double> adv = reinforce_advantages(ts, cfg, ema, &scale);
    opt.zero_grad();
    backward(reinforce_objective(policy, ts, adv, cfg.penalty / scale, cfg, s));
    clip_grad_norm(params, cfg.max_grad_norm);
    opt.step();
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log.push_back(s);
    if (progress) progress(s);
  }
  return log;
}

}  // namespace ponder::rl
