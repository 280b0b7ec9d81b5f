#include "policy/rollout.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ponder::policy {
namespace {

struct UnitRun {
  Tensor logits;  // (1, b, V)
  uint64_t base = 0, inner = 0;
};

bool staged(const RolloutOptions& opt) { return opt.mode == ttt::StepMode::Carry && opt.two_stage; }

// Unit `ids` run by the model's schedule with k steps on each mini-batch, from `state` (advanced in place); with
// `keep` its projections stay in the state for extra_steps().
UnitRun scheduled_unit(const ttt::Model& model, const Tensor& ids, ttt::ModelState& state, int k,
                       const RolloutOptions& opt, bool keep) {
  ttt::UniformSchedule sched(k);
  std::vector<ttt::UnitCost> costs;
  ttt::TTTRun run;
  run.path = opt.path;
  run.mode = opt.mode;
  run.schedule = &sched;
  run.costs = &costs;
  run.keep_chunk = keep;
  FlopScope scope;
  UnitRun r;
  r.logits = model.forward_chunk(ids, state, run);
  uint64_t total = scope.counts().total();
  for (const ttt::UnitCost& c : costs) r.inner += c.inner_forward + c.inner_grad + c.update;
  r.base = total - r.inner;
  return r;
}

// The further steps of a unit just run with its first (staged mode): inner FLOPs, all of them.
uint64_t extra_steps(const ttt::Model& model, ttt::ModelState& state, int steps, const RolloutOptions& opt) {
  if (steps <= 0) return 0;
  ttt::TTTRun run;
  run.path = opt.path;
  run.mode = opt.mode;
  FlopScope scope;
  model.extra_steps(state, steps, run, nullptr);
  return scope.counts().total();
}

// One unit with k steps, from `state` (advanced in place): in two stages, its first step and then k − 1 at its end.
UnitRun step_unit(const ttt::Model& model, const Tensor& ids, ttt::ModelState& state, int k, const RolloutOptions& opt) {
  if (!staged(opt)) return scheduled_unit(model, ids, state, k, opt, false);
  UnitRun r = scheduled_unit(model, ids, state, std::min(k, 1), opt, k > 1);
  r.inner += extra_steps(model, state, k - 1, opt);
  return r;
}

// Mean loss of unit u run with k steps from a copy of `state`, and of the `lookahead` units after it run with
// K = 1: what a decision of k at u buys, as far as the labels can tell (oracles and PonderNet trials).
int64_t unit_tokens(const ttt::Model& model, const RolloutOptions& opt) {
  if (opt.unit_batches < 1) throw std::invalid_argument("rollout: unit_batches must be >= 1");
  return model.config().mini_batch * opt.unit_batches;
}

double trial_loss(const ttt::Model& model, const Tensor& input, const Tensor& target, int64_t u, int k, int lookahead,
                  const ttt::ModelState& state, const RolloutOptions& opt, uint64_t* inner = nullptr,
                  uint64_t* base = nullptr) {
  const int64_t b = unit_tokens(model, opt), n = input.shape()[1] / b;
  auto ids_of = [&](int64_t v) { return raw::slice(input, 1, v * b, (v + 1) * b); };
  auto tgt_of = [&](int64_t v) { return raw::slice(target, 1, v * b, (v + 1) * b); };
  ttt::ModelState trial = state;  // states are immutable tensor handles: copying one is a snapshot
  UnitRun r = step_unit(model, ids_of(u), trial, k, opt);
  if (inner) *inner = r.inner;
  if (base) *base = r.base;
  std::vector<double> losses = unit_losses(r.logits, tgt_of(u));
  for (int64_t a = 1; a <= lookahead && u + a < n; ++a) {
    UnitRun next = step_unit(model, ids_of(u + a), trial, 1, opt);
    auto more = unit_losses(next.logits, tgt_of(u + a));
    losses.insert(losses.end(), more.begin(), more.end());
  }
  return mean_of(losses);
}

void check_inputs(const ttt::Model& model, const Tensor& input, const Tensor& target, const RolloutOptions& opt) {
  const int64_t b = unit_tokens(model, opt);
  if (input.dim() != 2 || input.shape()[0] != 1 || input.shape() != target.shape() || input.shape()[1] % b != 0)
    throw std::invalid_argument("rollout: input and target must be (1, N) with N a multiple of " + std::to_string(b) +
                                ", got " + shape_str(input.shape()) + " and " + shape_str(target.shape()));
}

}  // namespace

std::vector<double> unit_losses(const Tensor& logits, const Tensor& targets) {
  const int64_t V = logits.shape().back();
  return cross_entropy_per_token(reshape(logits, {-1, V}), raw::reshape(targets, {-1})).to_vector();
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

double Episode::mean_loss() const { return mean_of(token_loss); }

namespace {
// Unit u of a sequence under the policy, in two stages where it reads them (staged mode): rec.k from Before, the
// unit run with min(K, 1) steps and scored, then After's K from the unit's own signals and its K − 1 further steps.
UnitRun policy_unit(const ttt::Model& model, const Tensor& ids, const Tensor& tgt, ttt::ModelState& state,
                    Policy& policy, FeatureTracker& tracker, const RolloutOptions& opt, UnitRecord& rec) {
  if (!staged(opt)) {
    UnitRun r = step_unit(model, ids, state, rec.k, opt);
    FlopScope observe;
    tracker.observe(rec.k, r.logits, tgt);
    rec.overhead_flops += observe.counts().total();
    return r;
  }
  const ttt::ModelState before = state;  // handles: a snapshot costs nothing
  UnitRun r = scheduled_unit(model, ids, state, std::min(rec.k, 1), opt, true);
  FlopScope observe;  // the unit's own loss, entropy and probes, then the After question
  tracker.observe_logits(r.logits, tgt);
  if (rec.k > 0 && policy.posthoc()) {
    rec.features = tracker.after_step(rec.unit, model, before, state);
    rec.k = std::max(1, policy.decide(rec.features));
  }
  tracker.record_k(rec.k);
  rec.overhead_flops += observe.counts().total();
  r.inner += extra_steps(model, state, rec.k - 1, opt);
  return r;
}
}  // namespace

Episode run_policy(const ttt::Model& model, const Tensor& input, const Tensor& target, Policy& policy,
                   const RolloutOptions& opt, uint64_t seed) {
  check_inputs(model, input, target, opt);
  NoGradGuard ng;
  const int64_t b = unit_tokens(model, opt), n = input.shape()[1] / b;
  FeatureTracker tracker(n, policy.needs(), opt.step_budget);
  ttt::ModelState state;
  Episode ep;
  policy.begin_window(opt.window);
  policy.begin_sequence(seed);
  for (int64_t u = 0; u < n; ++u) {
    opt.report(u, n);
    UnitRecord rec;
    rec.unit = u;
    FlopScope decide;
    const bool two = staged(opt) && policy.posthoc();
    rec.features = tracker.next(u, model, state, !two || policy.may_skip());
    rec.features.stage = two ? Stage::Before : Stage::Whole;
    rec.k = policy.decide(rec.features);
    rec.overhead_flops = decide.counts().total();
    for (int k : opt.trial_ks) {
      FlopScope trials;  // measurement, charged to no method
      rec.trial_loss.push_back(trial_loss(model, input, target, u, k, opt.trial_lookahead, state, opt));
      rec.measure_flops += trials.counts().total();
    }
    Tensor ids = raw::slice(input, 1, u * b, (u + 1) * b), tgt = raw::slice(target, 1, u * b, (u + 1) * b);
    UnitRun r = policy_unit(model, ids, tgt, state, policy, tracker, opt, rec);
    rec.base_flops = r.base;
    rec.inner_flops = r.inner;
    FlopScope measure;
    std::vector<double> losses = unit_losses(r.logits, tgt);  // measurement, not charged to the method
    rec.measure_flops += measure.counts().total();
    rec.loss = mean_of(losses);
    ep.token_loss.insert(ep.token_loss.end(), losses.begin(), losses.end());
    ep.base += rec.base_flops;
    ep.inner += rec.inner_flops;
    ep.overhead += rec.overhead_flops;
    ep.units.push_back(rec);
  }
  return ep;
}

Episode run_oracle(const ttt::Model& model, const Tensor& input, const Tensor& target, const std::vector<int>& choices,
                   double mu, int lookahead, const RolloutOptions& opt) {
  check_inputs(model, input, target, opt);
  if (choices.empty()) throw std::invalid_argument("oracle: no step options");
  std::vector<int> options = choices;
  std::sort(options.begin(), options.end());  // so ties go to the cheaper K
  NoGradGuard ng;
  const int64_t b = unit_tokens(model, opt), n = input.shape()[1] / b;
  auto ids_of = [&](int64_t u) { return raw::slice(input, 1, u * b, (u + 1) * b); };
  auto tgt_of = [&](int64_t u) { return raw::slice(target, 1, u * b, (u + 1) * b); };
  FeatureTracker tracker(n, FeatureNeeds{true, true, true, true});  // every score, for the oracle analysis
  ttt::ModelState state;
  Episode ep;
  for (int64_t u = 0; u < n; ++u) {
    opt.report(u, n);
    UnitRecord rec;
    rec.unit = u;
    rec.features = tracker.next(u, model, state);
    double best = 0;
    std::vector<double> objectives;
    for (int k : options) {
      uint64_t inner = 0, base = 0;
      const double loss = trial_loss(model, input, target, u, k, lookahead, state, opt, &inner, &base);
      double objective = loss + mu * double(inner) / double(std::max<uint64_t>(base, 1));
      objectives.push_back(objective);
      if (k == options.front() || objective < best - 1e-12) {
        best = objective;
        rec.k = k;
      }
    }
    int at_best = 0;
    for (double o : objectives) at_best += std::abs(o - best) <= 1e-12;
    rec.tied = at_best > 1;
    UnitRun r = step_unit(model, ids_of(u), state, rec.k, opt);
    rec.base_flops = r.base;
    rec.inner_flops = r.inner;
    std::vector<double> losses = unit_losses(r.logits, tgt_of(u));
    rec.loss = mean_of(losses);
    ep.token_loss.insert(ep.token_loss.end(), losses.begin(), losses.end());
    tracker.observe(rec.k, r.logits, tgt_of(u));
    ep.base += rec.base_flops;
    ep.inner += rec.inner_flops;
    ep.units.push_back(rec);
  }
  return ep;
}

std::vector<float> unit_hidden(const ttt::Model& model, const Tensor& input, int k, const RolloutOptions& opt) {
  check_inputs(model, input, input, opt);
  if (k < 0) throw std::invalid_argument("unit_hidden: k must be >= 0, got " + std::to_string(k));
  NoGradGuard ng;
  const int64_t b = unit_tokens(model, opt), n = input.shape()[1] / b, d = model.config().d;
  ttt::UniformSchedule sched(k);
  ttt::TTTRun run;
  run.path = opt.path;
  run.mode = opt.mode;
  run.schedule = &sched;
  ttt::ModelState state;
  std::vector<float> out(size_t(n * 2 * d), 0.0f);
  for (int64_t u = 0; u + 1 < n; ++u) {  // the last unit's stream would describe a unit that does not exist
    opt.report(u, n);
    const std::vector<double> h = model.hidden_chunk(raw::slice(input, 1, u * b, (u + 1) * b), state, run).to_vector();
    float* row = &out[size_t((u + 1) * 2 * d)];  // (b, d) → mean over b, then the last position
    for (int64_t i = 0; i < d; ++i) {
      double sum = 0;
      for (int64_t t = 0; t < b; ++t) sum += h[size_t(t * d + i)];
      row[i] = float(sum / double(b));
      row[d + i] = float(h[size_t((b - 1) * d + i)]);
    }
  }
  return out;
}

}  // namespace ponder::policy
