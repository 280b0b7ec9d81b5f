// `ponder adapt` over independently trained bases: the fast-weight views of each model's comparison (its
// results.json's `adapt_summary` and `cost_multiples`, experiments/study/adapt_report.h) pooled over the models, so the
// tables a reader needs (per stream: SKIP, uniform-K, every method, the oracle and the regret against it; the share
// of the SKIP → oracle gap; where each method spends by chunk difficulty; each K's cost) stand at the top of the
// multi-model report instead of five times in model-<i>/report.md.
//   - Numbers are means over models (each model's own number is over its scored tokens, or its chunks).
//   - The gap share is (mean SKIP − mean method) / (mean SKIP − mean oracle), with a 95 % percentile interval from
//     resampling models (one resample for the three means, so it is paired).
//   - Difficulty bands are each model's own thirds by its SKIP chunk loss (the band edges differ between models; the
//     header gives their range).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ponder::cli {

struct AdaptOverModels {
  nlohmann::ordered_json cost_multiples;  // [{k, measured_multiple (mean), min, max}], results.json's top level
  nlohmann::ordered_json summary;         // results.json's `adapt_summary` of the multi-model run
  std::string markdown;                   // the report section
};

// `per_model`: each model's results.json, in model order. Throws std::invalid_argument naming the model whose file
// has no adapt_summary (a run of `ponder compare`, or one written before it existed).
AdaptOverModels adapt_over_models(const std::vector<nlohmann::json>& per_model);

}  // namespace ponder::cli
