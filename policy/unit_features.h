// Policy features: what a policy may know when it decides unit u, all from completed units (< u),
// so decisions are causal. Each feature's cost is counted by the caller as policy overhead.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "ttt/model.h"

namespace ponder::policy {

// When a decision is asked for (docs/method.md §4.1). Whole: once, before the unit (prefix mode, where K changes the
// unit's own outputs; the fast-weight path, after the chunk is read). In carry mode, twice: Before the unit, from
// completed units, whether it is stepped at all (0 is final); After its first step, from the unit's own signals, its
// whole K (at least 1: the further K − 1 steps change only later units).
enum class Stage { Whole, Before, After };

struct UnitFeatures {
  Stage stage = Stage::Whole;
  int64_t unit = 0;
  int64_t n_units = 1;
  double prev_loss = NAN;     // mean next-token loss of the previous unit's tokens (nats)
  double prev_entropy = NAN;  // mean entropy of the model's predictions for those tokens (nats)
  double ema_loss = NAN;      // exponential moving averages over earlier units (decay 0.7)
  double ema_entropy = NAN;
  // At Before (and Whole), prev_* describe the previous unit; at After they describe the unit itself, just scored.
  double ttt_loss = NAN;      // inner loss of the last unit read's last mini-batch under the weights carried out of it
  double grad_norm = NAN;     // inner-gradient norm: at Before of that probe, at After of the unit's first step
  // After only (NaN before): the unit's reconstruction loss over all its rows under the weights it started from (the
  // published gate's signal), under the weights after its first step, and the drop between them (mean over layers).
  double recon_before = NAN, recon_after = NAN, recon_drop = NAN;
  double hidden_mean = NAN, hidden_std = NAN, hidden_sparsity = NAN;  // logits statistics of the previous unit
  double budget_left = 1;     // fraction of the episode's step budget not yet spent (1 when unbudgeted)
  int prev_k = -1;            // previous decision
  double mean_k = 0;          // mean K so far
  // The unit's first input token, known before the unit is decided: it was the previous unit's last target. -1 for
  // the first unit. Learned policies see its byte class (newline, space, letter, digit, punctuation): on the planted
  // corpus a noise line starts with '.', and this is where a policy can tell.
  int first_token = -1;
  // A fixed-order, NaN-free vector for learned policies (missing values are 0 with an indicator).
  std::vector<double> vector() const;
  static std::vector<std::string> vector_names();
};

// Which optional features a policy needs (probes cost FLOPs).
struct FeatureNeeds {
  bool loss = false;
  bool entropy = false;
  bool probe_loss = false;
  bool probe_grad = false;
  bool recon = false;       // recon_before (carry mode's After stage): one inner forward over the unit
  bool recon_drop = false;  // recon_after and recon_drop too: a second one
};

// Accumulates the per-unit statistics of one sequence as its units complete.
class FeatureTracker {
 public:
  FeatureTracker(int64_t n_units, FeatureNeeds needs, double step_budget = 0);
  // The features before `unit`; `probe` false leaves the inner-loss probes out (a policy that steps every unit reads
  // nothing at carry mode's Before stage, so it pays for nothing there).
  UnitFeatures next(int64_t unit, const ttt::Model& model, const ttt::ModelState& state, bool probe = true) const;
  // logits (1, b, V) and targets (1, b) of the unit just completed with `k` steps.
  void observe(int k, const Tensor& logits, const Tensor& targets);
  // observe() in its two halves, for protocols that decide a unit's K after reading it (fast weights: a chunk is
  // scored, then the policy picks how many updates to take on it): the unit's loss and entropy, then its K.
  void observe_logits(const Tensor& logits, const Tensor& targets);
  void record_k(int k);
  // The After stage of carry mode: the unit has been run with its first step from `before` to `after` (with
  // TTTRun::keep_chunk) and observe_logits() has seen it. Its own probes, as needs() asks.
  UnitFeatures after_step(int64_t unit, const ttt::Model& model, const ttt::ModelState& before,
                          const ttt::ModelState& after) const;
 private:
  int64_t n_units_;
  FeatureNeeds needs_;
  double step_budget_, steps_spent_ = 0;
  int64_t done_ = 0;
  UnitFeatures last_;
  int read_first_ = -1;  // the first input token of the unit observe_logits() saw last (After describes that unit)
};

// Mean entropy (nats) of softmax rows of logits (…, V).
double mean_entropy(const Tensor& logits);

}  // namespace ponder::policy
