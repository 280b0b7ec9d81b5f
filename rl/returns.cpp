#include "rl/returns.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "util/check.h"

namespace ponder::rl {

using checks::check_finite;
using checks::check_nonempty;
using checks::check_same_size;
using checks::mean_unchecked;

std::vector<double> discounted_returns(const std::vector<double>& rewards, const Boundaries& boundaries,
                                       double gamma) {
  const char* who = "discounted_returns";
  check_finite(rewards, who, "rewards");
  checks::check_unit_interval(gamma, who, "gamma");
  boundaries.validate(rewards.size(), who);
  const size_t steps = rewards.size();
  std::vector<double> g(steps);
  double following = 0;
  for (size_t t = steps; t-- > 0;) {
    g[t] = rewards[t] + gamma * boundaries.next(t, steps, following);
    following = g[t];
  }
  return g;
}

std::vector<double> batch_mean_advantages(const std::vector<double>& returns) {
  check_nonempty(returns, "batch_mean_advantages", "returns");
  const double m = mean_unchecked(returns);
  std::vector<double> a(returns.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = returns[i] - m;
  return a;
}

std::vector<double> leave_one_out_advantages(const std::vector<double>& returns, int64_t group_size) {
  const char* who = "leave_one_out_advantages";
  check_nonempty(returns, who, "returns");
  if (group_size < 2)
    throw std::invalid_argument(std::string(who) + ": group_size must be >= 2 (one sample has no others to average),"
                                " got " + std::to_string(group_size));
  const size_t k = size_t(group_size);
  if (returns.size() % k != 0)
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(returns.size()) +
                                " returns do not split into groups of " + std::to_string(k));
  std::vector<double> a(returns.size());
  for (size_t start = 0; start < returns.size(); start += k) {
    double sum = 0;
    for (size_t i = start; i < start + k; ++i) sum += returns[i];
    for (size_t i = start; i < start + k; ++i) a[i] = returns[i] - (sum - returns[i]) / double(k - 1);
  }
  return a;
}

EmaBaseline::EmaBaseline(double decay) : decay_(decay) {
  if (!(decay >= 0.0 && decay < 1.0))
    throw std::invalid_argument("EmaBaseline: decay must be in [0, 1), got " + std::to_string(decay));
}

std::vector<double> EmaBaseline::advantages(const std::vector<double>& returns) {
  check_nonempty(returns, "EmaBaseline::advantages", "returns");
  const double m = mean_unchecked(returns);
  if (!initialised_) value_ = m, initialised_ = true;
  std::vector<double> a(returns.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = returns[i] - value_;
  value_ = decay_ * value_ + (1.0 - decay_) * m;
  return a;
}

std::vector<double> standardize(const std::vector<double>& x, int ddof, double eps, double* divisor) {
  const char* who = "standardize";
  check_nonempty(x, who, "x");
  if (ddof != 0 && ddof != 1)
    throw std::invalid_argument(std::string(who) + ": ddof must be 0 or 1, got " + std::to_string(ddof));
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw std::invalid_argument(std::string(who) + ": eps must be finite and >= 0, got " + std::to_string(eps));
  if (divisor) *divisor = 1;
  if (x.size() == 1) return x;
  const double m = mean_unchecked(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  const double sd = std::sqrt(ss / double(x.size() - size_t(ddof)));
  if (divisor && sd + eps > 0) *divisor = sd + eps;
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = sd + eps > 0 ? (x[i] - m) / (sd + eps) : 0.0;
  return out;
}

double policy_gradient_loss(const std::vector<double>& log_probs, const std::vector<double>& advantages) {
  const char* who = "policy_gradient_loss";
  check_nonempty(log_probs, who, "log_probs");
  check_finite(advantages, who, "advantages");
  check_same_size(log_probs, advantages, who, "log_probs", "advantages");
  double s = 0;
  for (size_t i = 0; i < log_probs.size(); ++i) s += log_probs[i] * advantages[i];
  return -s / double(log_probs.size());
}

double value_loss(const std::vector<double>& values, const std::vector<double>& returns) {
  const char* who = "value_loss";
  check_nonempty(values, who, "values");
  check_finite(returns, who, "returns");
  check_same_size(values, returns, who, "values", "returns");
  double s = 0;
  for (size_t i = 0; i < values.size(); ++i) s += (values[i] - returns[i]) * (values[i] - returns[i]);
  return 0.5 * s / double(values.size());
}

std::vector<double> policy_gradient_logit_grad(const std::vector<double>& logits, int64_t action, double advantage) {
  const char* who = "policy_gradient_logit_grad";
  check_nonempty(logits, who, "logits");
  if (action < 0 || action >= int64_t(logits.size()))
    throw std::invalid_argument(std::string(who) + ": action " + std::to_string(action) + " is outside [0, " +
                                std::to_string(logits.size()) + ")");
  if (!std::isfinite(advantage)) throw std::invalid_argument(std::string(who) + ": advantage is not finite");
  // Softmax shifted by the max so large logits do not overflow.
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> g(logits.size());
  double z = 0;
  for (size_t i = 0; i < g.size(); ++i) z += g[i] = std::exp(logits[i] - top);
  for (size_t i = 0; i < g.size(); ++i) g[i] = -advantage * ((int64_t(i) == action ? 1.0 : 0.0) - g[i] / z);
  return g;
}

}  // namespace ponder::rl
