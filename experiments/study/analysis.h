// The analysis of one comparison, as typed results the renderers (experiments/study/report.cpp: markdown and JSON) only
// format: paired tests against the budget's uniform schedule, the oracle's headroom and correlations, whether the
// comparison is degenerate by construction, and the success criteria with their verdicts (docs/method.md §6.4).
// The distance of each method to the uniform frontier is in experiments/study/frontier.h.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "experiments/study/compare.h"
#include "stats/stats.h"

namespace ponder::cli {

// A method against the budget's uniform schedule, paired by window (or stream).
struct Comparison {
  std::string method;
  double delta = 0;  // mean bpb(method) − bpb(baseline), per window
  double t_p = NAN, w_p = NAN, holm = NAN, bonferroni = NAN, dz = NAN, p_improve = NAN, p_improve_unpaired = NAN;
  int64_t w_n = 0;       // Wilcoxon: differences left after dropping zeros
  bool w_exact = false;  // Wilcoxon: exact distribution (else normal approximation)
};
// Every method that is neither uniform nor the oracle, with Holm and Bonferroni corrections within two families:
// the policies, and the methods that read labels (replays).
std::vector<Comparison> paired_comparisons(const CompareResult& r, const MethodResult& base, bool streams);

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
// Whether the headroom was read at under 90 % of the budget although some frontier point spends more than it: the μ
// search stopped short (too few compare.oracle_bisect, or a sweep too coarse for the gains per step), so the
// headroom is a cheaper oracle's. An oracle that wants less than the budget even at μ = 0 is not short.
bool headroom_short_of_budget(const CompareResult& r, const Headroom& h);

// What the oracle's decisions say: Spearman ρ of its K with each difficulty score, and each policy's agreement with
// it unit by unit (methods deciding over other unit sizes are listed with a NaN ρ).
struct OracleAnalysis {
  std::vector<std::pair<std::string, stats::Correlation>> score_corr;  // loss, entropy, ttt-loss, gradnorm
  double best_corr = NAN;
  std::vector<std::pair<std::string, double>> policy_rho;  // per method that is neither uniform nor the oracle
  double best_policy_rho = NAN;  // over the policies (a replay of oracle choices is listed but not counted)
  double tie_share = NAN;  // share of the oracle's decisions that a tie between options decided
};
OracleAnalysis analyse_oracle(const CompareResult& r);

// True when `a` and `b` give the same bits/byte on every window.
bool same_windows(const MethodResult& a, const MethodResult& b);
// Why this comparison cannot show anything whatever the methods do; empty when it can (or when nothing that
// could show it ran: see DegeneracyChecks).
std::vector<std::string> degenerate_reasons(const CompareResult& r, const Criteria& c);
// Which of degenerate_reasons' two tests had something to test: two uniform-K with K ≥ 1 to compare, an oracle
// whose ties to count. A report says "not degenerate" only for what was checked.
struct DegeneracyChecks {
  bool uniform = false, oracle = false;
};
DegeneracyChecks degeneracy_checks(const CompareResult& r);

enum class Verdict { Met, NotMet, NotTestable };
struct CriteriaVerdicts {
  Verdict quality = Verdict::NotTestable;  // within criteria.quality of uniform-4 at criteria.flops fewer FLOPs
  std::string quality_detail;
  Verdict difficulty = Verdict::NotTestable, policy = Verdict::NotTestable;
  std::string tie_text;  // how many of the oracle's decisions were ties (why 2 and 3 may be untestable)
};
CriteriaVerdicts evaluate_criteria(const CompareResult& r, const CompareOptions& opt, const OracleAnalysis& oa);

}  // namespace ponder::cli
