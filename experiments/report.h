// What a comparison writes: results.json (every number, with what produced it), report.md
// (tables with bootstrap CIs, paired tests against uniform at the same budget with Holm and
// Bonferroni corrections, the oracle analysis and the success criteria of docs/method.md §6.4, met or not),
// pareto.png, k_hist.png and tokens.html.
#pragma once
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "experiments/compare.h"

namespace ponder::cli {

// The oracle's headroom at a budget (the total FLOPs per token of a baseline, uniform-<budget_k>): the best
// oracle-frontier point within it against the best uniform schedule within it (the uniform frontier, which need
// not be the baseline itself: fewer steps can be better), on the same windows (seed 0's, or the streams), with a
// paired bootstrap CI.
struct Headroom {
  std::string uniform;          // the uniform schedule compared with
  double bpb = NAN;             // uniform bpb − frontier bpb (positive: the oracle is better); NaN: no point fits
  double lo = NAN, hi = NAN;    // 95% percentile bootstrap over the paired windows (streams)
  int64_t n = 0;                // paired windows (streams)
  double mu = NAN, flops = NAN, base_flops = NAN;  // the frontier point used, and the budget
  std::vector<double> d;        // per window (stream): uniform bpb − frontier bpb, the values the interval resamples
};
Headroom oracle_headroom(const CompareResult& r, const MethodResult& base);

// Returns the report's headline table (also written into report.md), for printing.
std::string write_compare_outputs(const CompareResult& r, const CompareOptions& opt,
                                  const nlohmann::ordered_json& provenance, const std::string& dir);

}  // namespace ponder::cli
