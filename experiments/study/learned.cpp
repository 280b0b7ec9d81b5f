#include "experiments/study/learned.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "rl/ttt_env.h"

namespace ponder::cli {
namespace {

const char* const kKinds[] = {"learned-reinforce", "learned-ppo-pid", "pondernet"};

std::string base_name(const std::string& method) { return method.substr(0, method.find('[')); }

double to_double(const std::string& key, const std::string& v, const std::string& method) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("compare: '" + method + "': " + key + " needs a number, got '" + v + "'");
}

std::vector<int> to_options(const std::string& v, const std::string& method) {
  std::vector<int> out;
  std::stringstream in(v);
  for (std::string item; std::getline(in, item, '/');) {
    const double k = to_double("options", item, method);
    if (k < 0 || k != int(k)) throw std::invalid_argument("compare: '" + method + "': step options must be integers >= 0");
    out.push_back(int(k));
  }
  if (out.size() < 2) throw std::invalid_argument("compare: '" + method + "': options needs at least two step counts, e.g. 1/2/4/8");
  return out;
}

// Applies "key=value,..." from the brackets of `method` to `lo`.
void apply_overrides(const std::string& method, LearnOptions& lo) {
  const size_t open = method.find('[');
  if (open == std::string::npos) return;
  if (method.back() != ']') throw std::invalid_argument("compare: '" + method + "': overrides must end with ']'");
  std::stringstream in(method.substr(open + 1, method.size() - open - 2));
  for (std::string kv; std::getline(in, kv, ',');) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("compare: '" + method + "': expected key=value, got '" + kv + "'");
    const std::string key = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (key == "gamma") {
      lo.reinforce.gamma = lo.ppo.gamma = to_double(key, v, method);
    } else if (key == "lambda") {
      lo.reinforce.penalty = to_double(key, v, method);
    } else if (key == "options") {
      lo.options = to_options(v, method);
    } else if (key == "net") {
      lo.net = v;
    } else if (key == "unit") {
      lo.unit_tokens = int64_t(to_double(key, v, method));
    } else if (key == "iters") {
      lo.reinforce.iterations = lo.ppo.iterations = lo.pondernet.iterations = int64_t(to_double(key, v, method));
    } else if (key == "probe") {
      lo.probe = to_double(key, v, method) != 0;
    } else if (key == "hidden") {
      lo.hidden = int64_t(to_double(key, v, method));
    } else {
      throw std::invalid_argument("compare: '" + method + "': unknown override '" + key +
                                  "' (gamma, lambda, options, net, unit, iters, hidden, probe)");
    }
  }
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {  // appended piecewise: "" + string trips GCC 12's -Wrestrict
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return "{" + s + "}";
}

}  // namespace

LearnOptions learned_options(const std::string& method, const LearnOptions& learn) {
  const std::string b = base_name(method);
  if (std::find(std::begin(kKinds), std::end(kKinds), b) == std::end(kKinds))
    throw std::invalid_argument("compare: '" + method + "' is not a learned method");
  LearnOptions lo = learn;
  apply_overrides(method, lo);
  if (lo.net != "mlp" && lo.net != "lstm")
    throw std::invalid_argument("compare: '" + method + "': net must be mlp or lstm, got '" + lo.net + "'");
  if (lo.unit_tokens < 0 || lo.hidden < 1 || lo.reinforce.iterations < 1)
    throw std::invalid_argument("compare: '" + method + "': unit must be >= 0, hidden and iters >= 1");
  return lo;
}

std::string fast_weight_learned_refusal(const std::string& method, const LearnOptions& learn, int64_t chunk) {
  const LearnOptions lo = learned_options(method, learn);
  if (lo.probe)
    return "'" + method + "': the inner-loss probe reads TTT layers, which fast weights on a frozen base do not have";
  if (lo.unit_tokens != 0 && lo.unit_tokens != chunk)
    return "'" + method + "': a decision covers one chunk (" + std::to_string(chunk) + " tokens); unit must be 0 or that";
  return "";
}

int64_t learned_unit_batches(const std::string& method, const LearnOptions& learn, int64_t mini_batch,
                             const policy::RolloutOptions& base, bool layer_steps) {
  const LearnOptions lo = learned_options(method, learn);
  if (lo.unit_tokens == 0 || !layer_steps) return base.unit_batches;
  if (lo.unit_tokens < mini_batch || lo.unit_tokens % mini_batch != 0)
    throw std::invalid_argument("compare: '" + method + "': unit must be a multiple of the mini-batch (" +
                                std::to_string(mini_batch) + " tokens), got " + std::to_string(lo.unit_tokens));
  return lo.unit_tokens / mini_batch;
}

LearnedMethod build_learned(const std::string& method, const policy::Rollouts& rollouts, const std::vector<policy::Window>& windows,
                            const LearnOptions& learn, const LearnBudget& budget, const policy::RolloutOptions& base,
                            const std::function<void(double, double)>& progress) {
  const std::string kind = base_name(method);
  const LearnOptions lo = learned_options(method, learn);
  LearnedMethod out;
  out.rollout = base;
  const int64_t b = rollouts.model().config().mini_batch;
  if (!rollouts.layer_steps())
    if (const std::string why = fast_weight_learned_refusal(method, learn, b * base.unit_batches); !why.empty())
      throw std::invalid_argument("adapt: " + why);
  out.rollout.unit_batches = learned_unit_batches(method, learn, b, base, rollouts.layer_steps());
  rl::TTTEnv env(rollouts, windows, out.rollout);
  const int64_t F = policy::feature_count();
  const policy::FeatureNeeds needs{true, true, lo.probe, false};  // losses, entropies[, inner-loss probe]
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
  if (kind == "pondernet") {
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
    if (kind == "learned-reinforce") {
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
  out.kind = kind == "pondernet" ? "pondernet" : kind.substr(8);
  out.detail = d.str();
  return out;
}

}  // namespace ponder::cli
