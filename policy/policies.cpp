#include "policy/policies.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ponder::policy {

Score parse_score(const std::string& name) {
  if (name == "entropy") return Score::Entropy;
  if (name == "loss") return Score::Loss;
  if (name == "gradnorm") return Score::GradNorm;
  if (name == "ttt-loss") return Score::TTTLoss;
  throw std::invalid_argument("unknown difficulty score '" + name + "' (entropy, loss, gradnorm, ttt-loss)");
}

std::string score_name(Score s) {
  switch (s) {
    case Score::Entropy: return "entropy";
    case Score::Loss: return "loss";
    case Score::GradNorm: return "gradnorm";
    case Score::TTTLoss: return "ttt-loss";
  }
  return "?";
}

double score_of(Score s, const UnitFeatures& f) {
  switch (s) {
    case Score::Entropy: return f.prev_entropy;
    case Score::Loss: return f.prev_loss;
    case Score::GradNorm: return f.grad_norm;
    case Score::TTTLoss: return f.ttt_loss;
  }
  return NAN;
}

ThresholdPolicy::ThresholdPolicy(Score score, std::vector<double> thresholds, std::vector<int> levels, int fallback)
    : score_(score), thresholds_(std::move(thresholds)), levels_(std::move(levels)), fallback_(fallback) {
  if (levels_.size() != thresholds_.size() + 1)
    throw std::invalid_argument("threshold policy: " + std::to_string(levels_.size()) + " levels need " +
                                std::to_string(levels_.size() - 1) + " thresholds, got " +
                                std::to_string(thresholds_.size()));
}

FeatureNeeds ThresholdPolicy::needs() const {
  FeatureNeeds n;
  n.loss = score_ == Score::Loss;
  n.entropy = score_ == Score::Entropy;
  n.probe_loss = score_ == Score::TTTLoss;
  n.probe_grad = score_ == Score::GradNorm;
  return n;
}

int ThresholdPolicy::decide(const UnitFeatures& f) {
  double s = score_of(score_, f);
  if (std::isnan(s)) return fallback_;
  size_t i = 0;
  while (i < thresholds_.size() && s > thresholds_[i]) ++i;
  return levels_[i];
}

HardBudgetPolicy::HardBudgetPolicy(std::unique_ptr<Policy> inner, double steps_per_unit, std::vector<int> options)
    : inner_(std::move(inner)), per_unit_(steps_per_unit), options_(std::move(options)) {
  std::sort(options_.begin(), options_.end());
  if (!inner_) throw std::invalid_argument("HardBudgetPolicy: no policy to cap");
  if (!(steps_per_unit >= 0) || !std::isfinite(steps_per_unit))
    throw std::invalid_argument("HardBudgetPolicy: steps per unit must be finite and >= 0, got " +
                                std::to_string(steps_per_unit));
}

void HardBudgetPolicy::begin_sequence(uint64_t seed) {
  spent_ = 0;
  inner_->begin_sequence(seed);
}

int HardBudgetPolicy::decide(const UnitFeatures& f) {
  const double left = per_unit_ * double(f.n_units) - spent_;
  const int cap = std::min(inner_->decide(f), int(std::floor(left + 1e-9)));
  int k = 0;
  for (int o : options_)
    if (o <= cap) k = o;
  spent_ += k;
  return k;
}

}  // namespace ponder::policy
