// Running a sequence unit by unit under a policy or an oracle, with exact cost accounting from the
// engine's counters: base forward, inner TTT steps actually run, and policy overhead.
#pragma once
#include <functional>
#include <vector>

#include "policy/policies.h"

namespace ponder::policy {

struct RolloutOptions {
  ttt::StepMode mode = ttt::StepMode::Carry;
  ttt::InnerPath path = ttt::InnerPath::Dual;
  // Carry mode asks a policy in two stages (policy/unit_features.h, Stage): whether the unit is stepped, before it;
  // its K, after its first step has scored it. A unit of K ≥ 1 steps is run as that first step, then K − 1 steps on
  // its mini-batches at its end (ttt::Model::extra_steps). false: K is decided before the unit and run by the
  // schedule, each mini-batch its K steps in turn (the protocol before two stages). Prefix mode always decides once.
  bool two_stage = true;
  double step_budget = 0;  // total steps a sequence may spend (feeds budget_left; 0 = none)
  // A decision unit spans this many TTT mini-batches (1: the mini-batch; more: a chunk), all run with its K.
  int64_t unit_batches = 1;
  // Counterfactual trials (PonderNet's per-step losses, the oracle's objective): at each unit, the mean loss of
  // the unit and the next `trial_lookahead` units (those run with K = 1) that each K in trial_ks would have given
  // from the unit's starting state. Measurement only: charged to no method.
  std::vector<int> trial_ks;
  int trial_lookahead = 1;
  // The fast-weight oracle's look at later chunks (policy/adapt_rollout.h): 0 reads them with the candidate's
  // weights as they are; k > 0 takes k update steps on each before reading the next, a rollout of uniform-k, so the
  // objective values a choice by what follows it under that policy rather than by frozen weights.
  int oracle_lookahead_k = 0;
  // Windows (or streams) run side by side on CPU threads when a whole set is run (policy/episodes.h); 0: as many as
  // the CPU threads. It changes the time a set takes, never a result.
  int jobs = 0;
  // The index of the window in the set being run (run_episodes sets it for each; Policy::begin_window).
  int64_t window = 0;
  // Optional: told the share of the sequence's units done, every 64 units (a pycode repository read as one stream
  // is tens of thousands of units and minutes of work; run_windows and the comparison turn it into their progress).
  std::function<void(double fraction)> progress;
  void report(int64_t unit, int64_t units) const {
    if (progress && unit > 0 && unit % 64 == 0) progress(double(unit) / double(units));
  }
};

struct UnitRecord {
  int64_t unit = 0;
  int k = 0;
  double loss = 0;            // mean next-token loss of the unit's tokens (nats)
  UnitFeatures features;      // what the decision saw (its last question's, After for a stepped unit in two stages)
  uint64_t base_flops = 0;    // forward pass without the inner steps
  uint64_t inner_flops = 0;   // inner forward + inner gradient + update, all TTT layers
  uint64_t overhead_flops = 0;  // features and the policy itself
  uint64_t measure_flops = 0;   // the evaluation's own loss computation (charged to no method)
  std::vector<double> trial_loss;  // one per RolloutOptions::trial_ks
  bool tied = false;            // oracles: another option gave the same objective (the tie-break rule chose K)
};

struct Episode {
  std::vector<UnitRecord> units;
  std::vector<double> token_loss;  // (N)
  uint64_t base = 0, inner = 0, overhead = 0;
  int64_t tokens() const { return int64_t(token_loss.size()); }
  double mean_loss() const;
};

// Per-token next-token losses (nats) of logits (…, V) against targets (…): what a rollout records as its result.
std::vector<double> unit_losses(const Tensor& logits, const Tensor& targets);
double mean_of(const std::vector<double>& v);  // 0 for an empty vector

// input, target: (1, N) integer tensors, N a multiple of the unit size (mini-batch × unit_batches).
Episode run_policy(const ttt::Model& model, const Tensor& input, const Tensor& target, Policy& policy,
                   const RolloutOptions& opt, uint64_t seed);

// Oracles (use the labels: upper bounds, never deployable). For each unit, try every K in `options`
// from the current state and keep the one minimising  loss + mu·cost, where loss is the mean loss of
// the unit and the next `lookahead` units (run with K = 1) and cost is the trial's inner FLOPs per
// token relative to the base forward's. mu = 0 is oracle-greedy (ties go to the smaller K);
// sweeping mu traces the oracle frontier. In carry mode K > 1 changes only later units, so the
// greedy oracle needs lookahead ≥ 1 to see its effect.
Episode run_oracle(const ttt::Model& model, const Tensor& input, const Tensor& target, const std::vector<int>& options,
                   double mu, int lookahead, const RolloutOptions& opt);

// What a policy could read of the model's own residual stream before deciding each unit (`ponder oracle
// --hidden-k`, scripts/oracle_features.py): the sequence read with k steps on every unit, a reference path that no
// oracle choice enters. Row u holds 2·d values: the mean over unit u − 1's positions of the residual stream after the
// last block (before the final norm), then that stream at its last position; row 0 is zeros (nothing read yet).
// input: (1, N), N a multiple of the unit size → (units × 2d) row-major.
std::vector<float> unit_hidden(const ttt::Model& model, const Tensor& input, int k, const RolloutOptions& opt);

// What K buys, as the comparison, the calibration and the oracle see it: a sequence run unit by unit under a policy,
// or under the oracle. Two kinds: inner steps of the model's TTT layers (LayerRollouts, below) and gradient steps of
// fast weights on a frozen base, one chunk a unit (policy/adapt_rollout.h). Everything that fits or scores a method
// goes through this, so both paths share one registry, one calibration and one comparison.
class Rollouts {
 public:
  virtual ~Rollouts() = default;
  virtual Episode policy(const Tensor& input, const Tensor& target, Policy& p, const RolloutOptions& opt,
                         uint64_t seed) const = 0;
  virtual Episode oracle(const Tensor& input, const Tensor& target, const std::vector<int>& options, double mu,
                         int lookahead, const RolloutOptions& opt) const = 0;
  // Whether K is a count of TTT-layer inner steps (the learned policies train on that environment, and the
  // ttt-loss / gradnorm scores probe those layers).
  virtual bool layer_steps() const = 0;
  virtual const ttt::Model& model() const = 0;
};

class LayerRollouts final : public Rollouts {
 public:
  explicit LayerRollouts(const ttt::Model& model) : model_(model) {}
  Episode policy(const Tensor& input, const Tensor& target, Policy& p, const RolloutOptions& opt,
                 uint64_t seed) const override {
    return run_policy(model_, input, target, p, opt, seed);
  }
  Episode oracle(const Tensor& input, const Tensor& target, const std::vector<int>& options, double mu, int lookahead,
                 const RolloutOptions& opt) const override {
    return run_oracle(model_, input, target, options, mu, lookahead, opt);
  }
  bool layer_steps() const override { return true; }
  const ttt::Model& model() const override { return model_; }
 private:
  const ttt::Model& model_;
};

}  // namespace ponder::policy
