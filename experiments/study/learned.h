// The learned methods of the comparison suite (docs/method.md §4.5–§4.7): learned-reinforce, learned-ppo-pid and
// pondernet, each trained on validation windows before it is evaluated. A method name may carry overrides in
// brackets, which is how `ponder ablate` names its cells:
//   learned-reinforce[gamma=0.5,lambda=0.1,options=1/2/4/8,net=lstm,unit=64,iters=40]
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "policy/calibrate.h"
#include "rl/pondernet.h"
#include "rl/ppo_pid.h"
#include "rl/reinforce.h"

namespace ponder::cli {

struct LearnOptions {
  std::string net = "mlp";  // mlp | lstm (a causal LSTM over the units of a sequence)
  int64_t hidden = 32;
  int64_t train_windows = 32;               // validation windows the policies train on
  std::vector<int> options = {0, 1, 2, 4};  // actions of learned-reinforce and learned-ppo-pid
  std::string act = "sample";               // how a trained policy acts at evaluation: sample | greedy
  int64_t unit_tokens = 0;                  // decision unit in tokens (a multiple of the mini-batch); 0 = mini-batch
  // Whether the policies may read the inner-loss probe (ttt_loss: one inner forward per unit and TTT layer, about
  // 0.04× a forward pass on the tiny model — more than a learned policy can save when K ≥ 1 are alike). Off: the
  // features come from losses and entropies the forward pass already produced.
  bool probe = false;
  rl::ReinforceConfig reinforce;
  rl::PpoPidConfig ppo;
  rl::PonderNetConfig pondernet;
  int64_t pondernet_steps = 4;  // N: the halting policy chooses 1..N inner steps
};

// What the comparison knows about the budget when it builds a learned method.
struct LearnBudget {
  int budget_k = 2;               // uniform-<budget_k> sets the budget
  double cost_per_unit = 0;       // its inner FLOPs in multiples of the base forward's (PPO-PID's budget)
};

struct LearnedMethod {
  std::unique_ptr<policy::Policy> policy;
  policy::RolloutOptions rollout;  // the method's own unit size
  std::string kind;                // reinforce | ppo-pid | pondernet
  std::string detail;              // settings, for the report
  std::vector<rl::IterationStats> curve;  // its training curve
  double train_seconds = 0;
};

// The learn: settings with the bracketed overrides of `method` applied (an std::invalid_argument names a bad one):
// configs are checked with it before anything runs.
LearnOptions learned_options(const std::string& method, const LearnOptions& learn);
// Mini-batches per decision of learned `method` (its unit override, else `base`'s); throws when the unit is not a
// multiple of the mini-batch. Known before the method is trained, so that every shard of a comparison pads its
// streams alike (experiments/study/compare.h).
int64_t learned_unit_batches(const std::string& method, const LearnOptions& learn, int64_t mini_batch,
                             const policy::RolloutOptions& base, bool layer_steps);

// Parses `method`, trains it on `windows` with the rollout `base` and returns it ready to evaluate.
// `progress(done, total)` is called after every training iteration.
// Why the learned `method` (with its bracketed overrides of `learn`) cannot train on the fast-weight path with chunks of
// `chunk` tokens, or "": it may not read the TTT layers' inner-loss probe, and its unit is the chunk.
std::string fast_weight_learned_refusal(const std::string& method, const LearnOptions& learn, int64_t chunk);
// K is spent by `rollouts` (the TTT layers' inner steps, or fast-weight updates on a frozen base, where a decision
// covers one chunk and the inner-loss probe does not exist).
LearnedMethod build_learned(const std::string& method, const policy::Rollouts& rollouts, const std::vector<policy::Window>& windows,
                            const LearnOptions& learn, const LearnBudget& budget, const policy::RolloutOptions& base,
                            const std::function<void(double, double)>& progress = {});

}  // namespace ponder::cli
