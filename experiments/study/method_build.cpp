#include "experiments/study/method_build.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "experiments/study/replay.h"
#include "experiments/study/result_util.h"

namespace ponder::cli {
namespace {

using methods::MethodSpec;

double inner_cost(const policy::Rollouts& ro, const MethodBudget& b, policy::Policy& p, const CompareOptions& opt) {
  return policy::run_windows(ro, b.cal, p, opt.rollout, 0).inner_per_token;
}

// K = high with the probability that spends the budget's inner FLOPs on the calibration windows, else K = low.
void build_random(const policy::Rollouts& ro, const CompareOptions& opt, const MethodBudget& b, BuiltMethod& out) {
  policy::UniformPolicy lo(int(opt.low)), hi(int(opt.high));
  const double c_lo = inner_cost(ro, b, lo, opt), c_hi = inner_cost(ro, b, hi, opt);
  const double q = std::clamp((b.budget_inner_per_token - c_lo) / (c_hi - c_lo), 0.0, 1.0);
  out.result.detail = "K=" + std::to_string(opt.high) + " with p=" + std::to_string(q) + ", else K=" + std::to_string(opt.low);
  out.policy = std::make_unique<policy::RandomPolicy>(int(opt.low), int(opt.high), q);
}

// The high level above a threshold of the score, set so the calibration windows spend the budget: its inner FLOPs
// (compare.calibrate_on: inner), or its total FLOPs less the score's own overhead (total).
void build_heuristic(const MethodSpec& m, const policy::Rollouts& ro, const CompareOptions& opt, const MethodBudget& b,
                     BuiltMethod& out) {
  const int low = int(opt.low), high = int(opt.high);
  double target = b.budget_inner_per_token;
  if (opt.calibrate_on == "total") {  // the score is computed for every unit, so its cost does not depend on K
    policy::ThresholdPolicy all_low(m.score, {INFINITY}, {low, high}, low);
    const double overhead = policy::run_windows(ro, b.cal, all_low, opt.rollout, 0).overhead_per_token;
    target -= overhead;
    if (target < 0)
      throw std::invalid_argument("compare: " + m.name + "'s overhead (" + std::to_string(overhead) + " FLOPs/token) "
                                  "exceeds uniform-" + std::to_string(opt.budget_k) + "'s inner FLOPs; with "
                                  "compare.calibrate_on: total it cannot match the budget");
  }
  // A target outside what the two levels can spend (an overhead that leaves less than K = low costs) is not met by
  // any threshold: the heuristic then runs at the nearer level, says so, and is judged at the FLOPs it spends.
  policy::UniformPolicy lo_p(low), hi_p(high);
  const double c_lo = inner_cost(ro, b, lo_p, opt), c_hi = inner_cost(ro, b, hi_p, opt);
  out.result.calib_target = target;
  if (!(target >= c_lo && target <= c_hi)) {
    const bool under = target < c_lo;
    out.result.calib_achieved = under ? c_lo : c_hi;
    out.result.detail = "cannot meet the budget: its target of " + std::to_string(target) + " inner FLOPs/token lies " +
                        (under ? "below uniform-" + std::to_string(low) : "above uniform-" + std::to_string(high)) +
                        "'s " + std::to_string(under ? c_lo : c_hi) + ", so every unit gets K=" +
                        std::to_string(under ? low : high);
    out.policy = std::make_unique<policy::ThresholdPolicy>(m.score, std::vector<double>{under ? INFINITY : -INFINITY},
                                                           std::vector<int>{low, high}, under ? low : high);
    return;
  }
  const policy::Calibration c = policy::calibrate_budget(ro, b.cal, m.score, low, high, low, target, opt.rollout);
  out.result.calib_achieved = c.achieved;
  out.result.detail = "threshold " + std::to_string(c.threshold) + ", calibration cost " + std::to_string(c.achieved) +
                      " vs target " + std::to_string(c.target) + " FLOPs/token";
  if (m.ema_gate) {
    out.result.detail += "; adapted by an EMA (α " + std::to_string(opt.gate_alpha) + ") toward K=" +
                         std::to_string(high) + " on " + std::to_string(c.fraction_high) + " of the units";
    out.policy = std::make_unique<policy::EmaGatePolicy>(m.score, c.threshold, low, high, c.fraction_high, opt.gate_alpha);
    return;
  }
  out.policy = std::make_unique<policy::ThresholdPolicy>(m.score, std::vector<double>{c.threshold},
                                                         std::vector<int>{low, high}, low);
}

void build_learned_method(const MethodSpec& m, const policy::Rollouts& ro, const CompareOptions& opt,
                          const MethodBudget& b, const CompareProgress& progress, BuiltMethod& out) {
  methods::LearnedMethod lm = methods::build_learned(m, ro, b.learn, opt.learn,
                                   {int(opt.budget_k), b.budget_inner_per_token / b.base_per_token}, opt.rollout,
                                   [&](double d, double t) {
                                     if (progress) progress("training " + m.name, d, t);
                                   });
  out.result.kind = lm.kind;
  out.result.detail = lm.detail;
  out.result.curve = std::move(lm.curve);
  out.result.train_seconds = lm.train_seconds;
  out.rollout = lm.rollout;
  out.policy = std::move(lm.policy);
}

}  // namespace

BuiltMethod build_method(const MethodSpec& m, const policy::Rollouts& ro, const CompareOptions& opt,
                         const MethodBudget& budget, const CompareProgress& progress) {
  if (!ro.layer_steps())
    if (const std::string why = methods::fast_weight_refusal(m); !why.empty()) throw std::invalid_argument("adapt: " + why);
  BuiltMethod out;
  out.result.name = m.name;
  out.result.kind = m.kind();
  out.rollout = opt.rollout;
  switch (m.family) {
    case methods::MethodFamily::Uniform:
    case methods::MethodFamily::Every:
      out.policy = methods::schedule_policy(m);
      break;
    case methods::MethodFamily::Front:
      out.policy = methods::schedule_policy(m, double(opt.budget_k), opt.step_options);
      out.result.detail = std::to_string(m.k) + " step(s) per unit until " + std::to_string(opt.budget_k) +
                          " per unit of the sequence are spent, then none";
      break;
    case methods::MethodFamily::Random:
      build_random(ro, opt, budget, out);
      break;
    case methods::MethodFamily::Heuristic:
      if (progress) progress("calibrating " + m.name, 0, 1);
      build_heuristic(m, ro, opt, budget, out);
      break;
    case methods::MethodFamily::Learned:
      build_learned_method(m, ro, opt, budget, progress, out);
      break;
    case methods::MethodFamily::Replay: {
      if (!opt.streams) throw std::invalid_argument("method '" + m.name + "' replays streams-mode segments; set compare.streams: true");
      Replay r = load_replay(m, ro.model().config().mini_batch * opt.rollout.unit_batches, opt.step_options);
      out.policy = std::move(r.policy);
      out.result.detail = r.detail;
      break;
    }
    case methods::MethodFamily::Oracle:
      out.result.detail = (opt.oracle_mu == 0 ? std::string("greedy") : "mu " + fmt("%g", opt.oracle_mu)) +
                          ", lookahead " + std::to_string(opt.oracle_lookahead) + " unit(s)";
      if (opt.rollout.oracle_lookahead_k > 0)
        out.result.detail += ", " + std::to_string(opt.rollout.oracle_lookahead_k) + " step(s) on each";
      break;
  }
  const bool adaptive = m.family == methods::MethodFamily::Random || m.family == methods::MethodFamily::Heuristic ||
                        m.family == methods::MethodFamily::Learned;
  if (opt.hard_budget && adaptive) {
    out.policy = std::make_unique<policy::HardBudgetPolicy>(std::move(out.policy), double(opt.budget_k), opt.step_options);
    out.result.detail += "; hard budget: at most " + std::to_string(opt.budget_k) + " step(s) per unit of a sequence";
  }
  return out;
}

}  // namespace ponder::cli
