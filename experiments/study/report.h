// What a comparison writes: results.json (every number, with what produced it), report.md
// (tables with bootstrap CIs, paired tests against uniform at the same budget with Holm and
// Bonferroni corrections, the oracle analysis and the success criteria of docs/method.md §6.4, met or not),
// pareto.png, k_hist.png and tokens.html.
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "experiments/study/analysis.h"
#include "experiments/study/compare.h"

namespace ponder::cli {

// Returns the report's headline table (also written into report.md), for printing.
std::string write_compare_outputs(const CompareResult& r, const CompareOptions& opt,
                                  const nlohmann::ordered_json& provenance, const std::string& dir);

}  // namespace ponder::cli
