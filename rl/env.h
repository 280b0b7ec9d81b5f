// What the learners train on: episodes of unit-by-unit decisions, produced by an environment that
// runs a policy. The TTT environment (rl/ttt_env.h) runs the language model over text windows; the
// synthetic one (rl/synthetic.h) has a known right answer, for tests.
#pragma once
#include <cstdint>
#include <vector>

#include "policy/policies.h"

namespace ponder::rl {

// One episode (one sequence), time-major over its units. An episode always ends at a true terminal:
// the inner state is fresh at the start of every sequence, so nothing after it depends on its actions.
struct Trajectory {
  std::vector<std::vector<double>> x;  // (T, F) raw feature vectors the decisions saw
  std::vector<int> k;                  // (T) inner steps spent
  std::vector<double> reward;          // (T) −loss of the unit's tokens (nats)
  std::vector<double> cost;            // (T) the unit's compute cost (what budgets are stated in)
  std::vector<std::vector<double>> trial_loss;  // (T, N) loss each trial step count would have given (run_trials)
  int64_t size() const { return int64_t(k.size()); }
};

class Env {
 public:
  virtual ~Env() = default;
  virtual int64_t contexts() const = 0;  // how many distinct training sequences there are
  // One episode of context `c` (taken modulo contexts()) under `policy`, whose randomness is seeded by `seed`.
  virtual Trajectory run(policy::Policy& policy, int64_t c, uint64_t seed) = 0;
  // The same, also filling trial_loss: at each unit, the loss every step count in `trial_ks` would have given
  // from the state the unit started in. The carried state follows the policy's own decisions.
  virtual Trajectory run_trials(policy::Policy& policy, int64_t c, uint64_t seed, const std::vector<int>& trial_ks) = 0;
  // How many episodes may run side by side, each on its own thread with its own copy of the policy (policy/episodes.h):
  // more than 1 only where run() and run_trials() change nothing the environment keeps.
  virtual int jobs() const { return 1; }
};

}  // namespace ponder::rl
