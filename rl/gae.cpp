#include "rl/gae.h"

#include "util/check.h"

namespace ponder::rl {

GaeResult gae(const std::vector<double>& rewards, const std::vector<double>& values, const Boundaries& boundaries,
              double gamma, double lambda) {
  const char* who = "gae";
  checks::check_finite(rewards, who, "rewards");
  checks::check_finite(values, who, "values");
  checks::check_same_size(rewards, values, who, "rewards", "values");
  checks::check_unit_interval(gamma, who, "gamma");
  checks::check_unit_interval(lambda, who, "lambda");
  boundaries.validate(rewards.size(), who);
  const size_t steps = rewards.size();
  GaeResult out{std::vector<double>(steps), std::vector<double>(steps)};
  double last = 0;
  for (size_t t = steps; t-- > 0;) {
    const double following = t + 1 < steps ? values[t + 1] : 0.0;
    const double delta = rewards[t] + gamma * boundaries.next(t, steps, following) - values[t];
    last = delta + (boundaries.done(t) ? 0.0 : gamma * lambda * last);
    out.advantages[t] = last;
    out.returns[t] = last + values[t];
  }
  return out;
}

}  // namespace ponder::rl
