#include "rl/pid.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "util/check.h"

namespace ponder::rl {
namespace {

void check_finite_scalar(double v, const char* who, const char* name) {
  if (!std::isfinite(v)) throw std::invalid_argument(std::string(who) + ": " + name + " is not finite");
}

void check_lambda(double lambda, const char* who) {
  if (!(lambda >= 0.0) || !std::isfinite(lambda))
    throw std::invalid_argument(std::string(who) + ": lambda must be finite and >= 0, got " + std::to_string(lambda));
}

}  // namespace

PidLagrangian::PidLagrangian(const PidConfig& config)
    : config_(config), integral_(config.lambda_init), lambda_(config.lambda_init) {
  const char* who = "PidLagrangian";
  for (auto [v, name] : {std::pair{config.kp, "kp"}, {config.ki, "ki"}, {config.kd, "kd"},
                         {config.lambda_init, "lambda_init"}, {config.penalty_max, "penalty_max"}}) {
    check_finite_scalar(v, who, name);
    if (v < 0) throw std::invalid_argument(std::string(who) + ": " + name + " must be >= 0, got " + std::to_string(v));
  }
  check_finite_scalar(config.cost_limit, who, "cost_limit");
  checks::check_unit_interval(config.alpha_p, who, "alpha_p");
  checks::check_unit_interval(config.alpha_d, who, "alpha_d");
  if (config.d_delay < 1)
    throw std::invalid_argument(std::string(who) + ": d_delay must be >= 1, got " + std::to_string(config.d_delay));
}

double PidLagrangian::update(double cost) {
  check_finite_scalar(cost, "PidLagrangian::update", "cost");
  const PidConfig& c = config_;
  const bool diff = c.norm == PenaltyNorm::Diff;
  const double delta = cost - c.cost_limit;
  integral_ = std::max(0.0, integral_ + c.ki * delta);
  if (diff) integral_ = std::min(integral_, 1.0);
  error_ema_ = c.alpha_p * error_ema_ + (1.0 - c.alpha_p) * delta;
  cost_ema_ = c.alpha_d * cost_ema_ + (1.0 - c.alpha_d) * cost;
  const double derivative = std::max(0.0, cost_ema_ - history_.front());
  lambda_ = std::max(0.0, c.kp * error_ema_ + integral_ + c.kd * derivative);
  if (diff) lambda_ = std::min(lambda_, 1.0);
  if (c.norm == PenaltyNorm::None) lambda_ = std::min(lambda_, c.penalty_max);
  history_.push_back(cost_ema_);
  if (int64_t(history_.size()) > c.d_delay) history_.pop_front();
  return lambda_;
}

double projected_sgd_lagrange_step(double lambda, double cost, double cost_limit, double lr) {
  const char* who = "projected_sgd_lagrange_step";
  check_lambda(lambda, who);
  check_finite_scalar(cost, who, "cost");
  check_finite_scalar(cost_limit, who, "cost_limit");
  check_finite_scalar(lr, who, "lr");
  return std::max(0.0, lambda + lr * (cost - cost_limit));
}

std::vector<double> combine_advantages(const std::vector<double>& reward_advantages,
                                       const std::vector<double>& cost_advantages, double lambda) {
  const char* who = "combine_advantages";
  checks::check_finite(reward_advantages, who, "reward_advantages");
  checks::check_finite(cost_advantages, who, "cost_advantages");
  checks::check_same_size(reward_advantages, cost_advantages, who, "reward_advantages", "cost_advantages");
  check_lambda(lambda, who);
  std::vector<double> out(reward_advantages.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = (reward_advantages[i] - lambda * cost_advantages[i]) / (1.0 + lambda);
  return out;
}

double combine_losses(double reward_loss, double cost_loss, double lambda, PenaltyNorm norm) {
  const char* who = "combine_losses";
  check_finite_scalar(reward_loss, who, "reward_loss");
  check_finite_scalar(cost_loss, who, "cost_loss");
  check_lambda(lambda, who);
  switch (norm) {
    case PenaltyNorm::Sum: return (reward_loss + lambda * cost_loss) / (1.0 + lambda);
    case PenaltyNorm::Diff:
      if (lambda > 1.0) throw std::invalid_argument("combine_losses: lambda must be <= 1 under PenaltyNorm::Diff");
      return (1.0 - lambda) * reward_loss + lambda * cost_loss;
    case PenaltyNorm::None: return reward_loss + lambda * cost_loss;
  }
  throw std::invalid_argument("combine_losses: unknown PenaltyNorm");
}

}  // namespace ponder::rl
