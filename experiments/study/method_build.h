// Turns a method of the registry (methods/registry.h) into a policy ready to evaluate on one model: uniform-K and
// every-K/N as they are, random with the probability that meets the budget, each heuristic with its threshold
// calibrated to it, each learned method trained on validation windows. The oracle has no policy (it reads the labels
// and runs through policy::run_oracle).
#pragma once
#include <memory>
#include <vector>

#include "experiments/study/compare.h"
#include "methods/registry.h"

namespace ponder::cli {

// What fitting a method to the budget needs, measured once per model on the calibration windows.
struct MethodBudget {
  std::vector<policy::Window> cal;       // calibration windows (validation split)
  double base_per_token = 0;             // FLOPs of the base forward per token
  double budget_inner_per_token = 0;     // uniform-<budget_k>'s inner FLOPs per token
  std::vector<policy::Window> learn;     // validation windows the learned methods train on
};

struct BuiltMethod {
  MethodResult result;                     // name, kind, detail, and for learned methods the curve and training time
  std::unique_ptr<policy::Policy> policy;  // null for the oracle
  policy::RolloutOptions rollout;          // the method's own unit size (learned methods may choose theirs)
};

BuiltMethod build_method(const methods::MethodSpec& m, const policy::Rollouts& rollouts, const CompareOptions& opt,
                         const MethodBudget& budget, const CompareProgress& progress);

}  // namespace ponder::cli
