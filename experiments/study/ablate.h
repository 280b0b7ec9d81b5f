// `ponder ablate`: the ablations of docs/method.md §5.5 for learned-reinforce — discount γ, penalty λ, step options,
// MLP vs causal LSTM policy, decision unit size — as cells of one comparison run (same held-out windows for
// every cell, so every cell is paired with uniform at the budget), each group reported as a table with
// bootstrap CIs and Holm-corrected paired tests, and a plot.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/study/compare.h"

namespace ponder::cli {

struct AblationCell {
  std::string label;   // the setting, e.g. "γ = 0.5"
  std::string method;  // the compare method that runs it, e.g. learned-reinforce[gamma=0.5]
};
struct AblationGroup {
  std::string name;  // gamma | lambda | options | net | unit
  std::string title;
  std::vector<AblationCell> cells;
};

// The groups of docs/method.md §5.5 around the defaults in `learn` (mini_batch: the model's). Token-level units need a
// model whose TTT mini-batch is 1, so the unit group compares the mini-batch with a 4-mini-batch chunk.
std::vector<AblationGroup> ablation_groups(const methods::LearnOptions& learn, int64_t mini_batch, int64_t seq_len);
// Keeps the groups named in `names` (comma-separated; empty keeps all); an unknown name is an error.
std::vector<AblationGroup> select_groups(const std::vector<AblationGroup>& all, const std::string& names);
// Every distinct method the groups need, after the baseline uniform-<budget_k>.
std::vector<std::string> ablation_methods(const std::vector<AblationGroup>& groups, int64_t budget_k);

// Writes DIR/ablation.md, DIR/ablation.json and DIR/ablation_<group>.png. Returns the markdown.
std::string write_ablation_outputs(const CompareResult& r, const std::vector<AblationGroup>& groups,
                                   const CompareOptions& opt, const nlohmann::ordered_json& provenance,
                                   const std::string& dir);

}  // namespace ponder::cli
