// The learned methods of the comparison suite (docs/method.md §4.5–§4.7): learned-reinforce, learned-ppo-pid and
// pondernet, each trained on validation windows before it is evaluated, with the `learn:` settings and the
// overrides its name carries in brackets (methods/learn_options.h).
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "methods/registry.h"
#include "policy/calibrate.h"
#include "rl/learn_util.h"

namespace ponder::methods {

// What the comparison knows about the budget when it builds a learned method.
struct LearnBudget {
  int budget_k = 2;               // uniform-<budget_k> sets the budget
  double cost_per_unit = 0;       // its inner FLOPs in multiples of the base forward's (PPO-PID's budget)
};

struct LearnedMethod {
  std::unique_ptr<policy::Policy> policy;
  policy::RolloutOptions rollout;  // the method's own unit size
  MethodKind kind = MethodKind::Reinforce;  // Reinforce | PpoPid | PonderNet
  std::string detail;              // settings, for the report
  std::vector<rl::IterationStats> curve;  // its training curve
  double train_seconds = 0;
};

// The learn: settings with the bracketed overrides of learned method `m` applied (an std::invalid_argument names a bad
// value): configs are checked with it before anything runs.
LearnOptions learned_options(const MethodSpec& m, const LearnOptions& learn);
// Mini-batches per decision of learned `method` (its unit override, else `base`'s); throws when the unit is not a
// multiple of the mini-batch. Known before the method is trained, so that every shard of a comparison pads its
// streams alike (experiments/study/compare.h).
int64_t learned_unit_batches(const MethodSpec& m, const LearnOptions& learn, int64_t mini_batch,
                             const policy::RolloutOptions& base, bool layer_steps);

// Why learned method `m` (with its bracketed overrides of `learn`) cannot train on the fast-weight path with chunks of
// `chunk` tokens, or "": it may not read the TTT layers' inner-loss probe, and its unit is the chunk.
std::string fast_weight_learned_refusal(const MethodSpec& m, const LearnOptions& learn, int64_t chunk);
// Trains learned method `m` on `windows` with the rollout `base` and returns it ready to evaluate; K is spent by
// `rollouts` (the TTT layers' inner steps, or fast-weight updates on a frozen base, where a decision covers one chunk
// and the inner-loss probe does not exist). `progress(done, total)` is called after every training iteration.
LearnedMethod build_learned(const MethodSpec& m, const policy::Rollouts& rollouts, const std::vector<policy::Window>& windows,
                            const LearnOptions& learn, const LearnBudget& budget, const policy::RolloutOptions& base,
                            const std::function<void(double, double)>& progress = {});

}  // namespace ponder::methods
