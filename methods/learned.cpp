#include "methods/learned.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "rl/ttt_env.h"

namespace ponder::methods {
namespace {

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {  // appended piecewise: "" + string trips GCC 12's -Wrestrict
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return "{" + s + "}";
}

}  // namespace

LearnOptions learned_options(const MethodSpec& m, const LearnOptions& learn) {
  if (m.family != MethodFamily::Learned) throw std::invalid_argument("compare: '" + m.name + "' is not a learned method");
  return apply_learn_overrides(m.name, m.overrides, learn);
}

std::string fast_weight_learned_refusal(const MethodSpec& m, const LearnOptions& learn, int64_t chunk) {
  const std::string& method = m.name;
  const LearnOptions lo = learned_options(m, learn);
  if (lo.probe)
    return "'" + method + "': the inner-loss probe reads TTT layers, which fast weights on a frozen base do not have";
  if (lo.unit_tokens != 0 && lo.unit_tokens != chunk)
    return "'" + method + "': a decision covers one chunk (" + std::to_string(chunk) + " tokens); unit must be 0 or that";
  return "";
}

int64_t learned_unit_batches(const MethodSpec& m, const LearnOptions& learn, int64_t mini_batch,
                             const policy::RolloutOptions& base, bool layer_steps) {
  const std::string& method = m.name;
  const LearnOptions lo = learned_options(m, learn);
  if (lo.unit_tokens == 0 || !layer_steps) return base.unit_batches;
  if (lo.unit_tokens < mini_batch || lo.unit_tokens % mini_batch != 0)
    throw std::invalid_argument("compare: '" + method + "': unit must be a multiple of the mini-batch (" +
                                std::to_string(mini_batch) + " tokens), got " + std::to_string(lo.unit_tokens));
  return lo.unit_tokens / mini_batch;
}

LearnedMethod build_learned(const MethodSpec& m, const policy::Rollouts& rollouts, const std::vector<policy::Window>& windows,
                            const LearnOptions& learn, const LearnBudget& budget, const policy::RolloutOptions& base,
                            const std::function<void(double, double)>& progress) {
  const std::string& method = m.name;
  const LearnOptions lo = learned_options(m, learn);
  LearnedMethod out;
  out.rollout = base;
  const int64_t b = rollouts.model().config().mini_batch;
  if (!rollouts.layer_steps())
    if (const std::string why = fast_weight_learned_refusal(m, learn, b * base.unit_batches); !why.empty())
      throw std::invalid_argument("adapt: " + why);
  out.rollout.unit_batches = learned_unit_batches(m, learn, b, base, rollouts.layer_steps());
  rl::TTTEnv env(rollouts, windows, out.rollout);
  const int64_t F = policy::feature_count();
  // losses, entropies[, the inner-loss probe and, at carry mode's After stage, the unit's own reconstruction loss]
  const policy::FeatureNeeds needs{true, true, lo.probe, false, lo.probe, lo.probe};
  const policy::ActMode act = lo.act == "greedy" ? policy::ActMode::Greedy : policy::ActMode::Sample;
  if (lo.act != "greedy" && lo.act != "sample")
    throw std::invalid_argument("compare: learn.act must be sample or greedy, got '" + lo.act + "'");
  int64_t iterations = 0;
  auto tick = [&](const rl::IterationStats& s) {
    out.curve.push_back(s);
    if (progress) progress(double(s.iteration + 1), double(iterations));
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::ostringstream d;
  const std::string unit = std::to_string(b * out.rollout.unit_batches) + "-token units";
  if (m.learner == Learner::PonderNet) {
    rl::PonderNetConfig cfg = lo.pondernet;
    // The prior's mean 1/λ_p sits at the budget's step count.
    cfg.lambda_p = std::clamp(1.0 / double(std::max(budget.budget_k, 1)), 0.05, 0.95);
    iterations = cfg.iterations;
    auto net = std::shared_ptr<policy::PolicyNet>(policy::make_policy_net(lo.net, F, lo.hidden, lo.pondernet_steps, cfg.seed));
    auto p = std::make_unique<policy::HaltingPolicy>(method, net, policy::FeatureNorm{}, needs);
    rl::train_pondernet(*p, env, cfg, tick);
    p->set_mode(act);
    d << "PonderNet halting over 1.." << lo.pondernet_steps << " steps, prior λ_p " << cfg.lambda_p << ", β " << cfg.beta;
    out.policy = std::move(p);
  } else {
    auto net = std::shared_ptr<policy::PolicyNet>(
        policy::make_policy_net(lo.net, F, lo.hidden, int64_t(lo.options.size()), lo.reinforce.seed));
    auto p = std::make_unique<policy::LearnedPolicy>(method, net, lo.options, policy::FeatureNorm{}, needs);
    if (m.learner == Learner::Reinforce) {
      rl::ReinforceConfig cfg = lo.reinforce;
      cfg.k_target = budget.budget_k;
      iterations = cfg.iterations;
      rl::train_reinforce(*p, env, cfg, tick);
      d << "REINFORCE γ " << cfg.gamma << ", penalty λ " << cfg.penalty << " (" << cfg.penalty_kind << ", K target "
        << cfg.k_target << "), " << cfg.baseline << " baseline, " << cfg.samples << " samples × "
        << cfg.contexts_per_iter << " windows per iteration";
    } else {
      rl::PpoPidConfig cfg = lo.ppo;
      if (!(budget.cost_per_unit > 0))
        throw std::invalid_argument("compare: learned-ppo-pid needs a positive budget (compare.budget_k >= 1)");
      cfg.budget = budget.cost_per_unit;
      iterations = cfg.iterations;
      rl::train_ppo_pid(*p, env, cfg, tick);
      d << "PPO-PID budget " << cfg.budget << "× base forward per unit (uniform-" << budget.budget_k << "), γ "
        << cfg.gamma << ", GAE λ " << cfg.gae_lambda << ", final Lagrange λ " << out.curve.back().lambda;
    }
    d << ", options " << join(lo.options);
    p->set_mode(act);
    out.policy = std::move(p);
  }
  out.train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  d << ", " << lo.net << " " << lo.hidden << (lo.probe ? ", with the inner-loss probe" : "") << ", " << unit << ", " << iterations << " iterations on " << windows.size()
    << " windows drawn where the heuristics calibrate (the setup line says where), acts by " << (act == policy::ActMode::Greedy ? "argmax" : "sampling");
  out.kind = m.kind();
  out.detail = d.str();
  return out;
}

}  // namespace ponder::methods
