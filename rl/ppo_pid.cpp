#include "rl/ppo_pid.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/optim.h"
#include "rl/gae.h"
#include "rl/ppo_math.h"
#include "rl/returns.h"

namespace ponder::rl {
namespace {

struct Scale {
  double shift = 0, scale = 1;
  double operator()(double v) const { return (v - shift) / scale; }
};

Scale fit_scale(const std::vector<Trajectory>& ts, bool reward) {
  double n = 0, s = 0, ss = 0;
  for (const Trajectory& t : ts)
    for (double v : reward ? t.reward : t.cost) n += 1, s += v, ss += v * v;
  const double m = s / n, var = std::max(ss / n - m * m, 0.0);
  return {m, var > 1e-12 ? std::sqrt(var) : 1.0};
}

std::vector<double> flatten(const std::vector<std::vector<double>>& v) {
  std::vector<double> out;
  for (const auto& row : v) out.insert(out.end(), row.begin(), row.end());
  return out;
}

std::vector<double> gather_rows(const std::vector<std::vector<double>>& v, const std::vector<int64_t>& pick) {
  std::vector<double> out;
  for (int64_t i : pick) out.insert(out.end(), v[size_t(i)].begin(), v[size_t(i)].end());
  return out;
}

// (B, T) values of a critic (its single output squeezed).
Tensor critic_values(const policy::PolicyNet& critic, const Tensor& x) {
  Tensor v = critic.forward(x);  // (B, T, 1)
  return reshape(v, {v.shape()[0], v.shape()[1]});
}

// (B, T) log π(a|s) of the taken actions and the mean entropy.
std::pair<Tensor, Tensor> action_log_probs(policy::LearnedPolicy& policy, const Tensor& x, const Tensor& actions) {
  const int64_t A = int64_t(policy.options().size());
  Tensor logp = log_softmax(policy.net().forward(x), -1);  // (B, T, A)
  Tensor chosen = sum(mul(logp, one_hot(actions, A, logp.dtype())), {-1});
  Tensor entropy = neg(mean(sum(mul(exp(logp), logp), {-1})));
  return {chosen, entropy};
}

// 0.5·mean((V − R)²), or with clip > 0 the pessimistic clipped form of cleanrl's clip_vloss (docs/rl_stats.md §3).
Tensor critic_loss(const Tensor& v, const Tensor& v_old, const Tensor& ret, double clip) {
  Tensor d = sub(v, ret);
  Tensor sq = mul(d, d);
  if (clip > 0) {
    Tensor dc = sub(add(v_old, clamp(sub(v, v_old), -clip, clip)), ret);
    sq = maximum(sq, mul(dc, dc));
  }
  return mul(mean(sq), scalar_like(sq, 0.5));
}

// What an iteration's update needs of its B episodes of T units: their features (B, T, F); the taken actions and
// their log-probabilities under the collecting policy, flat in (B·T) order; and per episode (T each) the
// combined advantages, the critics' values before the update and the GAE returns.
struct Batch {
  int64_t T = 0, B = 0;
  Tensor x_all;  // (B, T, F)
  std::vector<int64_t> actions;
  std::vector<double> logp_old;
  std::vector<std::vector<double>> adv, old_r, old_c, ret_r, ret_c;
};

// The batch of episodes ts (T units each) under the policy and critics before the update, with λ combining the
// reward and cost advantages.
Batch make_batch(policy::LearnedPolicy& policy, const policy::PolicyNet& vr, const policy::PolicyNet& vc,
                 const std::vector<Trajectory>& ts, int64_t T, const Scale& rscale, const Scale& cscale, double lambda,
                 const PpoPidConfig& cfg) {
  const int64_t B = int64_t(ts.size());
  // Targets: GAE for reward and cost per episode (terminal at its end).
  std::vector<std::vector<double>> adv_r(static_cast<size_t>(B)), adv_c(static_cast<size_t>(B)),
      ret_r(static_cast<size_t>(B)), ret_c(static_cast<size_t>(B));
  std::vector<int64_t> actions;
  Tensor x_all = feature_batch(ts, policy.norm());
  std::vector<double> v_r, v_c, logp_old;
  {
    NoGradGuard ng;
    v_r = critic_values(vr, x_all).to_vector();
    v_c = critic_values(vc, x_all).to_vector();
    for (const Trajectory& t : ts)
      for (int k : t.k) actions.push_back(policy.action_index(k));
    logp_old = action_log_probs(policy, x_all, Tensor::from_ints(actions, {B, T})).first.to_vector();
  }
  Boundaries end;
  end.terminated.assign(size_t(T), false);
  end.terminated.back() = true;
  std::vector<std::vector<double>> old_r(static_cast<size_t>(B)), old_c(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> r, c, vr_b(v_r.begin() + b * T, v_r.begin() + (b + 1) * T),
        vc_b(v_c.begin() + b * T, v_c.begin() + (b + 1) * T);
    for (int64_t u = 0; u < T; ++u) {
      r.push_back(rscale(ts[size_t(b)].reward[size_t(u)]));
      c.push_back(cscale(ts[size_t(b)].cost[size_t(u)]));
    }
    GaeResult gr = gae(r, vr_b, end, cfg.gamma, cfg.gae_lambda), gc = gae(c, vc_b, end, cfg.gamma, cfg.gae_lambda);
    adv_r[size_t(b)] = gr.advantages, ret_r[size_t(b)] = gr.returns, old_r[size_t(b)] = vr_b, old_c[size_t(b)] = vc_b;
    adv_c[size_t(b)] = gc.advantages, ret_c[size_t(b)] = gc.returns;
  }
  // Reward and cost advantages standardised separately so λ weighs comparable scales, then combined.
  const std::vector<double> a_r = standardize(flatten(adv_r)), a_c = standardize(flatten(adv_c));
  const std::vector<double> combined = combine_advantages(a_r, a_c, lambda);
  std::vector<std::vector<double>> adv(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) adv[size_t(b)].assign(combined.begin() + b * T, combined.begin() + (b + 1) * T);
  return {T, B, x_all, std::move(actions), std::move(logp_old), std::move(adv), std::move(old_r), std::move(old_c),
          std::move(ret_r), std::move(ret_c)};
}

// Epochs of minibatches of whole episodes (a recurrent policy needs its sequences intact); records the update's
// diagnostics in s.
void ppo_update(policy::LearnedPolicy& policy, const policy::PolicyNet& vr, const policy::PolicyNet& vc, AdamW& opt,
                const std::vector<Tensor>& params, Generator& shuffle, const std::vector<Trajectory>& ts,
                const Batch& batch, const PpoPidConfig& cfg, IterationStats& s) {
  const int64_t T = batch.T, B = batch.B;
  const int64_t per = B / cfg.minibatches;
  double kl = 0, clipfrac = 0, vloss = 0, entropy = 0, objective = 0;
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
    const std::vector<int64_t> perm = shuffle.permutation(B);
    for (int64_t m = 0; m < cfg.minibatches; ++m) {
      const std::vector<int64_t> pick(perm.begin() + m * per,
                                      m + 1 == cfg.minibatches ? perm.end() : perm.begin() + (m + 1) * per);
      std::vector<int64_t> act_mb;
      std::vector<double> old_mb;
      for (int64_t i : pick)
        for (int64_t u = 0; u < T; ++u) {
          act_mb.push_back(batch.actions[size_t(i * T + u)]);
          old_mb.push_back(batch.logp_old[size_t(i * T + u)]);
        }
      const int64_t b = int64_t(pick.size());
      Tensor x = feature_batch(ts, policy.norm(), pick);
      auto [logp, ent] = action_log_probs(policy, x, Tensor::from_ints(act_mb, {b, T}));
      std::vector<double> logratio = logp.to_vector();
      for (size_t i = 0; i < logratio.size(); ++i) logratio[i] -= old_mb[i];
      const ClippedSurrogate surr =
          clipped_surrogate(logratio, normalize_advantages(gather_rows(batch.adv, pick)), cfg.clip);
      // Σ logπ·∂L/∂logratio has the surrogate's gradient (logπ_old is a constant).
      Tensor pg = sum(mul(logp, Tensor::from_vector(surr.grad_logratio, {b, T}, logp.dtype())));
      Tensor lv = add(critic_loss(critic_values(vr, x), value_batch(batch.old_r, pick), value_batch(batch.ret_r, pick),
                                  cfg.clip_value),
                      critic_loss(critic_values(vc, x), value_batch(batch.old_c, pick), value_batch(batch.ret_c, pick),
                                  cfg.clip_value));
      Tensor total = add(sub(pg, mul(ent, scalar_like(ent, cfg.ent_coef))), mul(lv, scalar_like(lv, cfg.vf_coef)));
      opt.zero_grad();
      backward(total);
      clip_grad_norm(params, cfg.max_grad_norm);
      opt.step();
      kl = approx_kl(logratio);
      clipfrac += clip_fraction(logratio, cfg.clip);
      vloss += lv.item();
      entropy += ent.item();
      objective += surr.loss;
      ++steps;
    }
    if (cfg.target_kl > 0 && kl > cfg.target_kl) break;
  }
  s.approx_kl = kl;
  s.clip_fraction = clipfrac / double(steps);
  s.value_loss = vloss / double(steps);
  s.entropy = entropy / double(steps);
  s.objective = objective / double(steps);
}

// E[k] under the policy's action probabilities, averaged over every unit of x_all (B, T, F).
double expected_k(policy::LearnedPolicy& policy, const Tensor& x_all) {
  NoGradGuard ng;
  Tensor p = softmax(policy.net().forward(x_all), -1);
  std::vector<double> kv(policy.options().begin(), policy.options().end());
  return mean(sum(mul(p, Tensor::from_vector(kv, {int64_t(kv.size())}, p.dtype())), {-1})).item();
}

}  // namespace

std::vector<IterationStats> train_ppo_pid(policy::LearnedPolicy& policy, Env& env, const PpoPidConfig& cfg,
                                          const LearnProgress& progress) {
  if (!(cfg.budget > 0)) throw std::invalid_argument("ppo-pid: budget must be > 0");
  if (cfg.epochs < 1 || cfg.minibatches < 1 || cfg.contexts_per_iter < cfg.minibatches)
    throw std::invalid_argument("ppo-pid: need epochs >= 1 and 1 <= minibatches <= contexts_per_iter");
  policy.set_mode(policy::ActMode::Sample);
  const std::vector<Trajectory> warm = collect(env, policy, 0, cfg.contexts_per_iter, 1, cfg.seed + 777);
  if (policy.norm().mean.empty()) policy.set_norm(fit_norm(warm));
  const Scale rscale = fit_scale(warm, true);
  const Scale cscale{cfg.budget, cfg.budget};  // cost/budget − 1: 0 when a unit spends exactly the budget
  const int64_t F = policy.net().inputs();
  auto vr = policy::make_policy_net("mlp", F, cfg.critic_hidden, 1, cfg.seed + 1);
  auto vc = policy::make_policy_net("mlp", F, cfg.critic_hidden, 1, cfg.seed + 2);
  std::vector<Tensor> params = policy.net().parameters();
  for (const auto* c : {vr.get(), vc.get()})
    for (const Tensor& p : c->parameters()) params.push_back(p);
  AdamW opt(params, cfg.lr, 0.9, 0.999, 1e-5, 0.0);
  PidConfig pid_cfg = cfg.pid;
  pid_cfg.cost_limit = 1.0;
  PidLagrangian pid(pid_cfg);
  Generator shuffle(cfg.seed + 99);
  std::vector<IterationStats> log;

  for (int64_t it = 0; it < cfg.iterations; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<Trajectory> ts = collect(env, policy, it, cfg.contexts_per_iter, 1, cfg.seed);
    const int64_t T = common_length(ts, "ppo-pid");
    IterationStats s;
    s.iteration = it;
    summarise_units(ts, s);
    const double lambda = pid.update(s.cost / cfg.budget);  // before the policy update (docs/rl_stats.md §4)
    s.lambda = lambda;
    const Batch batch = make_batch(policy, *vr, *vc, ts, T, rscale, cscale, lambda, cfg);
    ppo_update(policy, *vr, *vc, opt, params, shuffle, ts, batch, cfg, s);
    s.expected_k = expected_k(policy, batch.x_all);
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log.push_back(s);
    if (progress) progress(s);
  }
  return log;
}

}  // namespace ponder::rl
