#include "rl/ppo_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "util/check.h"
#include "rl/returns.h"

namespace ponder::rl {
namespace {

void check_clip_eps(double eps, const char* who) {
  if (!(eps >= 0.0) || !std::isfinite(eps))
    throw std::invalid_argument(std::string(who) + ": clip_eps must be finite and >= 0, got " + std::to_string(eps));
}

}  // namespace

ClippedSurrogate clipped_surrogate(const std::vector<double>& logratio, const std::vector<double>& advantages,
                                   double clip_eps) {
  const char* who = "clipped_surrogate";
  checks::check_nonempty(logratio, who, "logratio");
  checks::check_finite(advantages, who, "advantages");
  checks::check_same_size(logratio, advantages, who, "logratio", "advantages");
  check_clip_eps(clip_eps, who);
  const double n = double(logratio.size());
  ClippedSurrogate out{0.0, std::vector<double>(logratio.size())};
  for (size_t i = 0; i < logratio.size(); ++i) {
    const double r = std::exp(logratio[i]), a = advantages[i];
    const double unclipped = -a * r, clipped = -a * std::clamp(r, 1.0 - clip_eps, 1.0 + clip_eps);
    out.loss += std::max(unclipped, clipped) / n;
    // ∂(-a·r)/∂logratio = -a·r; the clipped branch is flat in r outside [1-ε, 1+ε] and equals the unclipped one
    // inside, so only a strictly larger clipped term stops the gradient.
    out.grad_logratio[i] = clipped > unclipped ? 0.0 : -a * r / n;
  }
  return out;
}

double approx_kl(const std::vector<double>& logratio) {
  checks::check_nonempty(logratio, "approx_kl", "logratio");
  double s = 0;
  for (double l : logratio) s += std::expm1(l) - l;
  return s / double(logratio.size());
}

double old_approx_kl(const std::vector<double>& logratio) {
  checks::check_nonempty(logratio, "old_approx_kl", "logratio");
  return -checks::mean_unchecked(logratio);
}

double clip_fraction(const std::vector<double>& logratio, double clip_eps) {
  checks::check_nonempty(logratio, "clip_fraction", "logratio");
  check_clip_eps(clip_eps, "clip_fraction");
  size_t count = 0;
  for (double l : logratio) count += std::abs(std::exp(l) - 1.0) > clip_eps;
  return double(count) / double(logratio.size());
}

double clip_value(double v_new, double v_old, double clip_eps) {
  check_clip_eps(clip_eps, "clip_value");
  return v_old + std::clamp(v_new - v_old, -clip_eps, clip_eps);
}

double clipped_value_loss(const std::vector<double>& v_new, const std::vector<double>& v_old,
                          const std::vector<double>& returns, double clip_eps) {
  const char* who = "clipped_value_loss";
  checks::check_nonempty(v_new, who, "v_new");
  checks::check_finite(v_old, who, "v_old");
  checks::check_finite(returns, who, "returns");
  checks::check_same_size(v_new, v_old, who, "v_new", "v_old");
  checks::check_same_size(v_new, returns, who, "v_new", "returns");
  double s = 0;
  for (size_t i = 0; i < v_new.size(); ++i) {
    const double unclipped = v_new[i] - returns[i], clipped = clip_value(v_new[i], v_old[i], clip_eps) - returns[i];
    s += std::max(unclipped * unclipped, clipped * clipped);
  }
  return 0.5 * s / double(v_new.size());
}

std::vector<double> normalize_advantages(const std::vector<double>& advantages, double eps) {
  return standardize(advantages, 1, eps);
}

double explained_variance(const std::vector<double>& values, const std::vector<double>& returns) {
  const char* who = "explained_variance";
  checks::check_nonempty(values, who, "values");
  checks::check_finite(returns, who, "returns");
  checks::check_same_size(values, returns, who, "values", "returns");
  std::vector<double> residual(values.size());
  for (size_t i = 0; i < values.size(); ++i) residual[i] = returns[i] - values[i];
  auto var = [](const std::vector<double>& x) {
    const double m = checks::mean_unchecked(x);
    double s = 0;
    for (double v : x) s += (v - m) * (v - m);
    return s / double(x.size());
  };
  const double var_r = var(returns);
  return var_r == 0.0 ? std::numeric_limits<double>::quiet_NaN() : 1.0 - var(residual) / var_r;
}

double categorical_entropy(const std::vector<double>& probs) {
  const char* who = "categorical_entropy";
  checks::check_nonempty(probs, who, "probs");
  double total = 0, h = 0;
  for (double p : probs) {
    if (p < 0)
      throw std::invalid_argument(std::string(who) + ": a probability is negative (" + std::to_string(p) + ")");
    total += p;
    if (p > 0) h -= p * std::log(p);
  }
  if (std::abs(total - 1.0) > 1e-9)
    throw std::invalid_argument(std::string(who) + ": probabilities sum to " + std::to_string(total) + ", not 1");
  return h;
}

}  // namespace ponder::rl
