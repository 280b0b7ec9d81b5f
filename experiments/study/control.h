// The positive control: the comparison pipeline run on the planted corpus (data/planted.h), where the answer is
// known — inner steps on text units pay, steps on noise units do not (they overwrite what the text taught) — and a verdict on whether the pipeline
// found it. Reports state it so that a null elsewhere can be read: a pipeline that cannot find a planted effect
// proves nothing by not finding one.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/study/compare.h"
#include "experiments/study/report.h"

namespace ponder::cli {

struct ControlVerdict {
  bool passed = false;
  Headroom headroom;                      // oracle over the budget baseline, paired, with a 95% CI
  std::string baseline;                   // the uniform frontier at uniform-<budget_k>'s FLOPs (Headroom::uniform)
  double floor = 0;                       // the CI's lower bound must exceed this (compare.criteria_control_headroom)
  double k_text = NAN, k_noise = NAN;    // the oracle's mean K on text units and on noise units
  int64_t n_text = 0, n_noise = 0;
  struct Method {
    std::string name;
    double delta = NAN;      // paired mean bpb(method) − bpb(baseline), over streams; negative = better
    double flops_ratio = NAN;  // total FLOPs/token relative to the baseline's
    double recovered = NAN;  // −delta / headroom: the share of the oracle's headroom the method recovers
  };
  std::vector<Method> methods;
  std::vector<std::string> failed;  // the conditions not met, in words (empty when passed)
};

// Passes when (1) the oracle beats the uniform frontier at no more than uniform-<budget_k>'s FLOPs with the paired
// 95% CI above compare.criteria_control_headroom (0.01 bits/byte), and (2) the oracle spends more steps on text units than on noise units (a noise unit starts with
// '.'). A CI merely above 0 is not enough: an oracle that picks each unit's best K from the labels gains a little on
// any model (a model trained 20 steps passed that with +0.0005), so (1) asks for an effect of the size comparisons
// resolve, and (2) that the oracle found the planted structure. Needs the
// oracle's per-unit records (CompareResult::oracle_units with first_token) and the baseline's run.
ControlVerdict judge_control(const CompareResult& r, const CompareOptions& opt);

nlohmann::ordered_json control_json(const ControlVerdict& v);
// The inverse of control_json (a finished control is reused from its results.json).
ControlVerdict control_from_json(const nlohmann::json& j);
// A report section ("## Positive control"), naming where the control's own report is.
std::string control_markdown(const ControlVerdict& v, const std::string& report_path);
// One paragraph for a report that did not run the control itself: what `dir`/results.json says about the control in
// this build (`commit`), or that it has not been run in this build and how to run it.
std::string control_status(const std::string& dir, const std::string& commit);

}  // namespace ponder::cli
