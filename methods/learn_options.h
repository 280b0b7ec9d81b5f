// The settings of the learned methods (learned-reinforce, learned-ppo-pid, pondernet; docs/method.md §4.5–§4.7):
// the `learn:` section of a config, and the overrides a method name may carry in brackets, which is how
// `ponder ablate` names its cells:
//   learned-reinforce[gamma=0.5,lambda=0.1,options=1/2/4/8,net=lstm,unit=64,iters=40,hidden=16,probe=1]
// The overrides are parsed once, with the method's name (methods/registry.h), into LearnOverrides.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rl/pondernet.h"
#include "rl/ppo_pid.h"
#include "rl/reinforce.h"

namespace ponder::methods {

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

// The bracketed overrides of one learned method's name; an absent key leaves the `learn:` setting as it is.
struct LearnOverrides {
  std::optional<double> gamma;           // REINFORCE's and PPO's discount
  std::optional<double> lambda;          // REINFORCE's budget penalty
  std::optional<std::vector<int>> options;  // the step options, written 1/2/4/8
  std::optional<std::string> net;
  std::optional<int64_t> unit, iters, hidden;
  std::optional<bool> probe;
};

// The overrides in the brackets of `method` (none without brackets); an std::invalid_argument names a malformed one.
LearnOverrides parse_learn_overrides(const std::string& method);
// `learn` with `o` applied, checked (net, unit, hidden, iters); `method` names it in errors.
LearnOptions apply_learn_overrides(const std::string& method, const LearnOverrides& o, const LearnOptions& learn);

}  // namespace ponder::methods
