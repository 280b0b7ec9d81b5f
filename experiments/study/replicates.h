// A comparison over independently trained models (docs/method.md §6.6). Each model was compared on its own (its
// heuristics calibrated and its learned policies trained on it); here the model is the unit of replication and the
// held-out documents (streams, or windows) are paired observations inside it. Per method: the paired difference
// from the budget's uniform schedule, averaged per model, with a hierarchical bootstrap interval over models ×
// documents, a paired t-test over the per-model means (Holm-corrected over methods), and the minimum effect that test
// detects at this number of models; and the oracle's headroom over the uniform frontier, over models × documents.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/study/compare.h"
#include "stats/rliable.h"

namespace ponder::cli {

// One model's comparison as its results.json holds it: the methods (name, kind, per-seed numbers with per-window
// bits/byte) and the oracle frontier (with per-window bits/byte). Enough for the statistics below.
CompareResult compare_result_from_json(const nlohmann::json& results);

struct ReplicateRow {
  std::string method;
  std::vector<double> per_model;  // mean over its documents of the paired Δ bits/byte, one per model
  double delta = NAN;             // mean over models of per_model (negative: better than the baseline)
  stats::Interval ci;             // 95% hierarchical bootstrap over models, then documents inside each
  double p = NAN, p_holm = NAN;   // paired t-test over the per-model means; NaN with fewer than 2 models
  double mde = NAN;               // the |Δ| that test detects with 80% power at α 0.05 (NaN: < 2 models)
  double flops_ratio = NAN;       // total FLOPs per token against the baseline's, mean over models
  // Against the uniform frontier at the method's own FLOPs (experiments/study/frontier.h), the same way over models; NaN
  // for uniform schedules and the oracle.
  std::vector<double> frontier_per_model;
  double frontier = NAN, frontier_p = NAN;
  stats::Interval frontier_ci;
  std::vector<int> calibration_missed;  // models (from 1) where its calibration missed the budget (result_util.h)
  bool policy = false;                  // neither a uniform schedule nor a method that reads labels (test_family 0)
};

struct ReplicateSummary {
  std::string baseline;             // uniform-<budget_k>
  std::vector<std::string> models;  // labels (checkpoint paths)
  int64_t documents = 0;            // paired documents per model (streams, or windows × seeds)
  std::vector<ReplicateRow> rows;
  ReplicateRow headroom;            // the oracle frontier within the baseline's FLOPs against the best uniform there
};

ReplicateSummary summarize_replicates(const std::vector<CompareResult>& runs, const std::vector<std::string>& labels,
                                      const CompareOptions& opt);
nlohmann::ordered_json replicates_json(const ReplicateSummary& s);
std::string replicates_markdown(const ReplicateSummary& s);

}  // namespace ponder::cli
