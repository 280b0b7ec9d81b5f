#include "rl/halting.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "util/check.h"

namespace ponder::rl {
namespace {

void check_probabilities(const std::vector<double>& x, const char* who, const char* name) {
  checks::check_nonempty(x, who, name);
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] < 0.0 || x[i] > 1.0)
      throw std::invalid_argument(std::string(who) + ": " + name + "[" + std::to_string(i) + "] = " +
                                  std::to_string(x[i]) + " is outside [0, 1]");
}

void check_lambda_p(double lambda_p, const char* who) {
  if (!(lambda_p > 0.0 && lambda_p <= 1.0))
    throw std::invalid_argument(std::string(who) + ": lambda_p must be in (0, 1], got " + std::to_string(lambda_p));
}

}  // namespace

std::vector<double> pondernet_halting_distribution(const std::vector<double>& lambdas) {
  check_probabilities(lambdas, "pondernet_halting_distribution", "lambdas");
  std::vector<double> p(lambdas.size());
  double log_survival = 0;  // log Π_{j<n}(1-λ_j); -inf once some λ_j = 1
  for (size_t n = 0; n < lambdas.size(); ++n) {
    const double lambda = n + 1 == lambdas.size() ? 1.0 : lambdas[n];
    p[n] = lambda * std::exp(log_survival);
    log_survival += std::log1p(-lambda);
  }
  return p;
}

double reconstruction_loss(const std::vector<double>& p, const std::vector<double>& step_losses) {
  const char* who = "reconstruction_loss";
  check_probabilities(p, who, "p");
  checks::check_finite(step_losses, who, "step_losses");
  checks::check_same_size(p, step_losses, who, "p", "step_losses");
  double s = 0;
  for (size_t n = 0; n < p.size(); ++n) s += p[n] * step_losses[n];
  return s;
}

double expected_steps(const std::vector<double>& p) {
  check_probabilities(p, "expected_steps", "p");
  double s = 0;
  for (size_t n = 0; n < p.size(); ++n) s += double(n + 1) * p[n];
  return s;
}

std::vector<double> truncated_geometric_prior(double lambda_p, int64_t max_steps, bool normalize) {
  const char* who = "truncated_geometric_prior";
  check_lambda_p(lambda_p, who);
  if (max_steps < 1)
    throw std::invalid_argument(std::string(who) + ": max_steps must be >= 1, got " + std::to_string(max_steps));
  std::vector<double> prior(static_cast<size_t>(max_steps));
  double survival = 1, total = 0;
  for (auto& v : prior) {
    total += v = lambda_p * survival;
    survival *= 1.0 - lambda_p;
  }
  if (normalize)
    for (auto& v : prior) v /= total;
  return prior;
}

double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
  const char* who = "kl_divergence";
  check_probabilities(p, who, "p");
  check_probabilities(q, who, "q");
  checks::check_same_size(p, q, who, "p", "q");
  double s = 0;
  for (size_t n = 0; n < p.size(); ++n) {
    if (p[n] == 0.0) continue;
    if (q[n] == 0.0) return std::numeric_limits<double>::infinity();
    s += p[n] * std::log(p[n] / q[n]);
  }
  return s;
}

int64_t prior_max_steps(double lambda_p, double eps) {
  const char* who = "prior_max_steps";
  check_lambda_p(lambda_p, who);
  if (!(eps > 0.0 && eps < 1.0))
    throw std::invalid_argument(std::string(who) + ": eps must be in (0, 1), got " + std::to_string(eps));
  // The tail mass (1-λ_p)^n is tracked directly instead of 1 - Σp_G, which would lose digits near 1.
  int64_t n = 0;
  for (double tail = 1.0; !(tail < eps); tail *= 1.0 - lambda_p) ++n;
  return n;
}

int64_t sample_halting_step(const std::vector<double>& lambdas, const std::vector<double>& uniforms) {
  const char* who = "sample_halting_step";
  check_probabilities(lambdas, who, "lambdas");
  checks::check_finite(uniforms, who, "uniforms");
  if (uniforms.size() + 1 < lambdas.size())
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(lambdas.size()) + " steps need at least " +
                                std::to_string(lambdas.size() - 1) + " uniforms, got " +
                                std::to_string(uniforms.size()));
  for (size_t n = 0; n + 1 < lambdas.size(); ++n)
    if (uniforms[n] < lambdas[n]) return int64_t(n + 1);
  return int64_t(lambdas.size());
}

ActHalting act_halting(const std::vector<double>& halting, int64_t max_steps, double eps) {
  const char* who = "act_halting";
  if (max_steps < 1)
    throw std::invalid_argument(std::string(who) + ": max_steps must be >= 1, got " + std::to_string(max_steps));
  if (halting.size() + 1 != size_t(max_steps) && halting.size() != size_t(max_steps))
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(halting.size()) +
                                " halting units do not fit max_steps = " + std::to_string(max_steps) +
                                " (expected max_steps - 1 or max_steps)");
  if (!halting.empty()) check_probabilities(halting, who, "halting");
  if (!(eps >= 0.0 && eps < 1.0))
    throw std::invalid_argument(std::string(who) + ": eps must be in [0, 1), got " + std::to_string(eps));
  ActHalting out;
  out.p.assign(size_t(max_steps), 0.0);
  out.grad_halting.assign(halting.size(), 0.0);
  double cumulative = 0;
  size_t n = 0;  // 0-based index of the halting step
  while (n + 1 < size_t(max_steps) && cumulative + halting[n] < 1.0 - eps) {
    cumulative += halting[n];
    out.p[n] = halting[n];
    out.grad_halting[n] = -1.0;
    ++n;
  }
  out.steps = int64_t(n + 1);
  out.remainder = 1.0 - cumulative;
  out.p[n] = out.remainder;
  out.ponder_cost = double(out.steps) + out.remainder;
  return out;
}

double act_output(const std::vector<double>& p, const std::vector<double>& outputs) {
  const char* who = "act_output";
  check_probabilities(p, who, "p");
  checks::check_finite(outputs, who, "outputs");
  checks::check_same_size(p, outputs, who, "p", "outputs");
  double s = 0;
  for (size_t n = 0; n < p.size(); ++n) s += p[n] * outputs[n];
  return s;
}

}  // namespace ponder::rl
