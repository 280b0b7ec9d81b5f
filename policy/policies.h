// Allocation policies: each decides, unit by unit, how many inner steps to spend, from the causal
// features of policy/features.h. Names follow docs/method.md §4.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "policy/unit_features.h"
#include "tensor/rng.h"

namespace ponder::policy {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  virtual FeatureNeeds needs() const { return {}; }
  virtual void begin_sequence(uint64_t seed) { (void)seed; }
  // Which window of the set being run the next sequence is (run_windows numbers them from 0 in the set's order):
  // only a replayed schedule needs it.
  virtual void begin_window(int64_t index) { (void)index; }
  // K for the unit f describes. In carry mode the rollout asks twice (f.stage, policy/unit_features.h): at Before an
  // answer of 0 skips the unit and is final, any other only says it is stepped; at After the answer is its whole K
  // (at least 1). Whatever a policy updates per decision it updates once per unit, at the final answer.
  virtual int decide(const UnitFeatures& f) = 0;
  // Whether it reads the After stage. One that does not is asked once, at Before, and its answer is the unit's K.
  virtual bool posthoc() const { return true; }
  // Whether it may answer 0 (skip a unit). One that never does is not given the Before stage's probes.
  virtual bool may_skip() const { return true; }
  // An independent copy that decides as this one does from begin_sequence() on: run_windows gives one to each thread
  // that runs episodes side by side (policy/episodes.h). So whatever a decision depends on besides the features must
  // be set up again by begin_sequence(), as the sequence's seed alone decides it.
  virtual std::unique_ptr<Policy> clone() const = 0;
};

// clone() for a policy whose members copy as they are (no owned policies or networks).
template <class P>
class Copyable : public Policy {
 public:
  std::unique_ptr<Policy> clone() const override { return std::make_unique<P>(static_cast<const P&>(*this)); }
};

// uniform-K
class UniformPolicy final : public Copyable<UniformPolicy> {
 public:
  explicit UniformPolicy(int k) : k_(k) {}
  std::string name() const override { return "uniform-" + std::to_string(k_); }
  int decide(const UnitFeatures&) override { return k_; }
  bool may_skip() const override { return k_ == 0; }
 private:
  int k_;
};

// every-K/N: K on every N-th unit (starting with the first), SKIP otherwise.
class EveryPolicy final : public Copyable<EveryPolicy> {
 public:
  EveryPolicy(int k, int every) : k_(k), every_(every) {
    if (every < 1 || k < 0)  // every = 0 would divide by zero in decide()
      throw std::invalid_argument("every-" + std::to_string(k) + "/" + std::to_string(every) +
                                  ": K must be >= 0 and N >= 1 (K on every N-th unit)");
  }
  std::string name() const override { return "every-" + std::to_string(k_) + "/" + std::to_string(every_); }
  int decide(const UnitFeatures& f) override { return f.unit % every_ == 0 ? k_ : 0; }
 private:
  int k_, every_;
};

// Two levels: `high` with probability q, `low` otherwise (i.i.d. per unit, seeded per sequence).
class RandomPolicy final : public Copyable<RandomPolicy> {
 public:
  RandomPolicy(int low, int high, double q) : low_(low), high_(high), q_(q) {}
  std::string name() const override { return "random"; }
  void begin_sequence(uint64_t seed) override {
    gen_ = Generator(seed);
    drawn_ = -1;
  }
  // One draw a unit, at its first question; After gives the level drawn at Before (so P(high) stays q).
  int decide(const UnitFeatures& f) override {
    if (f.stage == Stage::After && drawn_ >= 0) return std::exchange(drawn_, -1);
    const int k = gen_.uniform01() < q_ ? high_ : low_;
    drawn_ = f.stage == Stage::Before && k > 0 ? k : -1;
    return k;
  }
  bool may_skip() const override { return low_ == 0 || high_ == 0; }
 private:
  int low_, high_;
  double q_;
  Generator gen_{0};
  int drawn_ = -1;
};

// Difficulty scores a heuristic can use; each reads one causal feature. The easy-* scores are the same features
// negated, so a threshold on one sends the units after the *least* difficult ones to `high`: where an inner step
// may pay most when what it learns is reusable (an oracle's K can run against difficulty; docs/method.md §4.3).
// One list: X(id, name, feature, need) — the UnitFeatures field the score reads and the FeatureNeeds flag that has
// the rollout compute it. A score on a feature units already carry is one line here (docs/adding_a_method.md).
#define PONDER_SCORES(X)                                                                                       \
  X(Entropy, "entropy", prev_entropy, entropy) X(Loss, "loss", prev_loss, loss)                               \
  X(GradNorm, "gradnorm", grad_norm, probe_grad) X(TTTLoss, "ttt-loss", ttt_loss, probe_loss)                 \
  X(Recon, "recon", recon_before, recon) X(ReconDrop, "recon-drop", recon_drop, recon_drop)
#define PONDER_SCORE_ID(id, ...) id,
#define PONDER_EASY_SCORE_ID(id, ...) Easy##id,
enum class Score { PONDER_SCORES(PONDER_SCORE_ID) PONDER_SCORES(PONDER_EASY_SCORE_ID) };
#undef PONDER_SCORE_ID
#undef PONDER_EASY_SCORE_ID
// Each name of the list, each also with "easy-" before it.
Score parse_score(const std::string& name);
bool is_score_name(const std::string& name);
std::string score_name(Score s);
Score difficulty_of(Score s);  // the feature an easy-* score negates (easy-loss → loss); a difficulty score itself
// The score names, "entropy, loss, …", for messages and --help.
const std::string& score_names();
double score_of(Score s, const UnitFeatures& f);  // NaN when unknown (first unit)
FeatureNeeds score_needs(Score s);  // what a rollout must compute for the score (its line's need)

// Maps a difficulty score to K by thresholds: score ≤ thresholds[0] → levels[0], …, above the last
// threshold → levels.back(). Units without a score (the first one) get `fallback`.
class ThresholdPolicy final : public Copyable<ThresholdPolicy> {
 public:
  ThresholdPolicy(Score score, std::vector<double> thresholds, std::vector<int> levels, int fallback);
  std::string name() const override { return score_name(score_); }
  FeatureNeeds needs() const override;
  int decide(const UnitFeatures& f) override;
  bool may_skip() const override;
  const std::vector<double>& thresholds() const { return thresholds_; }
  void set_thresholds(std::vector<double> t) { thresholds_ = std::move(t); }
 private:
  Score score_;
  std::vector<double> thresholds_;
  std::vector<int> levels_;
  int fallback_;
};

// An EMA-adapted threshold gate (the gate of "When to Ponder", deveworld/ponderTTT): `high` when the score is
// above τ, `low` otherwise (and for the unscored first unit). After each scored decision the running share of
// high decisions e ← (1 − α)·e + α·[high] moves the threshold, τ ← τ + (e − rate)·α·|τ|: up while it spends
// more often than `rate`, down while less. Each sequence starts from the calibrated τ0 with e = rate, so a
// stream's decisions depend on its own past only.
class EmaGatePolicy final : public Copyable<EmaGatePolicy> {
 public:
  EmaGatePolicy(Score score, double tau0, int low, int high, double rate, double alpha);
  std::string name() const override { return "gate-" + score_name(score_); }
  FeatureNeeds needs() const override;
  void begin_sequence(uint64_t seed) override;
  int decide(const UnitFeatures& f) override;
  bool may_skip() const override { return low_ == 0 || high_ == 0; }
  double threshold() const { return tau_; }
 private:
  Score score_;
  double tau0_, rate_, alpha_;
  int low_, high_;
  double tau_, ema_;
};

// A schedule read from elsewhere, one list of K per window of the set it runs on (replay:<oracle.json> in a
// comparison: another run's oracle choices; they used labels, so this is a diagnostic, never a policy). Each unit's
// first token is checked against the one the schedule was made on, so a schedule never runs on other text.
class ReplayPolicy final : public Copyable<ReplayPolicy> {
 public:
  // per_window[w][u]: K of unit u of window w; first_tokens likewise (the unit's first input token).
  ReplayPolicy(std::string name, std::vector<std::vector<int>> per_window, std::vector<std::vector<int>> first_tokens);
  std::string name() const override { return name_; }
  void begin_window(int64_t index) override { window_ = index; }
  int decide(const UnitFeatures& f) override;
 private:
  std::string name_;
  std::vector<std::vector<int>> k_, first_;
  int64_t window_ = 0;
};

// A hard budget around another policy: a sequence of n units spends at most steps_per_unit·n steps. Each unit
// gets the largest of `options` not above min(K, steps still unspent) (0 when none is), which only the past decides,
// so the cap is causal; a policy that spends early has nothing left for the end. Uniform schedules are the reference
// frontier and are never capped.
class HardBudgetPolicy final : public Policy {
 public:
  HardBudgetPolicy(std::unique_ptr<Policy> inner, double steps_per_unit, std::vector<int> options);
  std::string name() const override { return inner_->name(); }
  FeatureNeeds needs() const override { return inner_->needs(); }
  bool posthoc() const override { return inner_->posthoc(); }
  void begin_sequence(uint64_t seed) override;
  void begin_window(int64_t index) override { inner_->begin_window(index); }
  int decide(const UnitFeatures& f) override;
  std::unique_ptr<Policy> clone() const override;
 private:
  std::unique_ptr<Policy> inner_;
  double per_unit_;
  std::vector<int> options_;  // sorted
  double spent_ = 0;
};

}  // namespace ponder::policy
