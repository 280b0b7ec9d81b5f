#include "policy/policies.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <stdexcept>

namespace ponder::policy {

namespace {
#define PONDER_SCORE_ENTRY(id, ...) Score::id,
#define PONDER_EASY_SCORE_ENTRY(id, ...) Score::Easy##id,
#define PONDER_SCORE_NAME(id, name, ...) name,
constexpr Score kDifficulty[] = {PONDER_SCORES(PONDER_SCORE_ENTRY)};
constexpr Score kEasy[] = {PONDER_SCORES(PONDER_EASY_SCORE_ENTRY)};
constexpr const char* kNames[] = {PONDER_SCORES(PONDER_SCORE_NAME)};
#undef PONDER_SCORE_ENTRY
#undef PONDER_EASY_SCORE_ENTRY
#undef PONDER_SCORE_NAME

// The score `name` names ("loss", "easy-loss", …), or nothing: the one place that reads score names.
std::optional<Score> find_score(const std::string& name) {
  const bool easy = name.rfind("easy-", 0) == 0;
  const std::string base = easy ? name.substr(5) : name;
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (base == kNames[i]) return easy ? kEasy[i] : kDifficulty[i];
  return std::nullopt;
}

}  // namespace

bool is_score_name(const std::string& name) { return find_score(name).has_value(); }

Score parse_score(const std::string& name) {
  if (const std::optional<Score> s = find_score(name)) return *s;
  throw std::invalid_argument("unknown difficulty score '" + name + "' (" + score_names() + ", each also as easy-<score>)");
}

const std::string& score_names() {
  static const std::string names = [] {
    std::string s;
    for (const char* n : kNames) s += (s.empty() ? "" : ", ") + std::string(n);
    return s;
  }();
  return names;
}

Score difficulty_of(Score s) {
  for (size_t i = 0; i < std::size(kEasy); ++i)
    if (s == kEasy[i]) return kDifficulty[i];
  return s;
}

std::string score_name(Score s) {
  const Score d = difficulty_of(s);
  for (size_t i = 0; i < std::size(kDifficulty); ++i)
    if (d == kDifficulty[i]) return (d == s ? "" : "easy-") + std::string(kNames[i]);
  return "?";
}

double score_of(Score s, const UnitFeatures& f) {
  if (difficulty_of(s) != s) return -score_of(difficulty_of(s), f);  // NaN stays NaN
  switch (s) {
#define PONDER_SCORE_FEATURE(id, name, feature, need) \
    case Score::id:                                  \
      return f.feature;
    PONDER_SCORES(PONDER_SCORE_FEATURE)
#undef PONDER_SCORE_FEATURE
    default: return NAN;
  }
}

ThresholdPolicy::ThresholdPolicy(Score score, std::vector<double> thresholds, std::vector<int> levels, int fallback)
    : score_(score), thresholds_(std::move(thresholds)), levels_(std::move(levels)), fallback_(fallback) {
  if (levels_.size() != thresholds_.size() + 1)
    throw std::invalid_argument("threshold policy: " + std::to_string(levels_.size()) + " levels need " +
                                std::to_string(levels_.size() - 1) + " thresholds, got " +
                                std::to_string(thresholds_.size()));
}

FeatureNeeds score_needs(Score s) {
  FeatureNeeds n;
  const Score d = difficulty_of(s);
#define PONDER_SCORE_NEED(id, name, feature, need) n.need = n.need || d == Score::id;
  PONDER_SCORES(PONDER_SCORE_NEED)
#undef PONDER_SCORE_NEED
  return n;
}

FeatureNeeds ThresholdPolicy::needs() const { return score_needs(score_); }

int ThresholdPolicy::decide(const UnitFeatures& f) {
  double s = score_of(score_, f);
  if (std::isnan(s)) return fallback_;
  size_t i = 0;
  while (i < thresholds_.size() && s > thresholds_[i]) ++i;
  return levels_[i];
}

bool ThresholdPolicy::may_skip() const {
  return fallback_ == 0 || std::find(levels_.begin(), levels_.end(), 0) != levels_.end();
}

EmaGatePolicy::EmaGatePolicy(Score score, double tau0, int low, int high, double rate, double alpha)
    : score_(score), tau0_(tau0), rate_(rate), alpha_(alpha), low_(low), high_(high), tau_(tau0), ema_(rate) {
  if (!std::isfinite(tau0) || !(rate >= 0 && rate <= 1) || !(alpha > 0 && alpha < 1))
    throw std::invalid_argument("gate-" + score_name(score) + ": needs a finite threshold (got " + std::to_string(tau0) +
                                "), a rate in [0, 1] (got " + std::to_string(rate) + ") and an EMA factor in (0, 1) (got " +
                                std::to_string(alpha) + ")");
}

FeatureNeeds EmaGatePolicy::needs() const { return score_needs(score_); }

void EmaGatePolicy::begin_sequence(uint64_t) {
  tau_ = tau0_;
  ema_ = rate_;
}

int EmaGatePolicy::decide(const UnitFeatures& f) {
  const double s = score_of(score_, f);
  if (std::isnan(s)) return low_;
  const bool high = s > tau_;
  if (f.stage == Stage::Before && (high ? high_ : low_) > 0) return high ? high_ : low_;  // provisional: After decides
  ema_ = (1 - alpha_) * ema_ + alpha_ * (high ? 1.0 : 0.0);
  tau_ += (ema_ - rate_) * alpha_ * std::abs(tau_);
  return high ? high_ : low_;
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

std::unique_ptr<Policy> HardBudgetPolicy::clone() const {
  return std::make_unique<HardBudgetPolicy>(inner_->clone(), per_unit_, options_);
}

int HardBudgetPolicy::decide(const UnitFeatures& f) {
  const double left = per_unit_ * double(f.n_units) - spent_;
  const int cap = std::min(inner_->decide(f), int(std::floor(left + 1e-9)));
  int k = 0;
  for (int o : options_)
    if (o <= cap) k = o;
  if (f.stage != Stage::Before || k == 0) spent_ += k;  // a stepped unit's K is spent when After settles it
  return k;
}

ReplayPolicy::ReplayPolicy(std::string name, std::vector<std::vector<int>> per_window,
                           std::vector<std::vector<int>> first_tokens)
    : name_(std::move(name)), k_(std::move(per_window)), first_(std::move(first_tokens)) {
  if (k_.size() != first_.size()) throw std::invalid_argument(name_ + ": one list of first tokens per window expected");
  for (size_t w = 0; w < k_.size(); ++w)
    if (k_[w].size() != first_[w].size())
      throw std::invalid_argument(name_ + ": window " + std::to_string(w) + " has " + std::to_string(k_[w].size()) +
                                  " K and " + std::to_string(first_[w].size()) + " first tokens");
}

int ReplayPolicy::decide(const UnitFeatures& f) {
  const auto at = [&](size_t w, int64_t u) { return "unit " + std::to_string(u) + " of window " + std::to_string(w); };
  const size_t w = size_t(window_);
  if (window_ < 0 || w >= k_.size() || f.unit < 0 || size_t(f.unit) >= k_[w].size())
    throw std::invalid_argument(name_ + ": the schedule has no " + at(w, f.unit) + " (it holds " +
                                std::to_string(k_.size()) + " windows): it was made on other segments");
  const int expected = first_[w][size_t(f.unit)];
  if (f.first_token >= 0 && f.first_token != expected)
    throw std::invalid_argument(name_ + ": " + at(w, f.unit) + " starts with token " + std::to_string(f.first_token) +
                                " where the schedule's text had " + std::to_string(expected) +
                                ": it was made on other segments");
  return k_[w][size_t(f.unit)];
}

}  // namespace ponder::policy
