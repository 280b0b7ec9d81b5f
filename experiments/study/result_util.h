// Small helpers over a CompareResult shared by the report and the analysis commands (oracle, overhead, ablate).
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "experiments/study/compare.h"
#include "stats/stats.h"

namespace ponder::cli {

// printf-style formatting of one number; NaN prints as "—".
inline std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "—";
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// "8" or "all" (compare.windows_per_seed 0: every window of the split), for messages.
inline std::string windows_label(int64_t per_seed) { return per_seed > 0 ? std::to_string(per_seed) : "all"; }

// The share of the split's tokens a comparison scored.
inline double scored_fraction(const CompareResult& r) {
  return r.split_tokens > 0 ? double(r.eval_tokens) / double(r.split_tokens) : 0.0;
}

// What a comparison scored, for the analysis commands' first line: "3 seed(s) x 8 windows of 128 tokens", or in streams
// mode "14 segments of 7 held-out streams, 26937 scored tokens (9.0 % of the split), each after up to 4096 tokens".
inline std::string scored_label(const CompareResult& r, const CompareOptions& opt) {
  if (!opt.streams)
    return std::to_string(opt.seeds) + " seed(s) x " + windows_label(opt.windows_per_seed) + " windows of " +
           std::to_string(opt.seq_len) + " tokens";
  const double pct = 100.0 * scored_fraction(r);
  return std::to_string(opt.seeds) + " seed(s) x " + std::to_string(r.segments) + " segments of " +
         std::to_string(r.stream_names.size()) + " held-out streams, " + std::to_string(r.eval_tokens) +
         " scored tokens (" + fmt("%.1f", pct) + " % of the split), each after up to " +
         (opt.stream_max_adapt > 0 ? std::to_string(opt.stream_max_adapt) : std::string("all the")) + " tokens of context";
}

// Methods whose choices read the labels: the oracle, and a replay of oracle choices (methods::reads_labels). They
// are measured beside the policies but never stand for one (the success criteria, "the best method").
inline bool reads_labels(const MethodResult& m) { return methods::reads_labels(m.kind); }

// The family a method's test against the baseline is corrected in (Holm, Bonferroni): the policies, which the
// report's answer rests on; the uniform schedules; the methods that read labels. Adding replays or more uniform
// schedules to a comparison so never weakens the policies' corrected p-values.
inline int test_family(const MethodResult& m) { return reads_labels(m) ? 2 : m.kind == methods::MethodKind::Uniform ? 1 : 0; }

inline const MethodResult* find(const CompareResult& r, const std::string& name) {
  for (const MethodResult& m : r.methods)
    if (m.name == name) return &m;
  return nullptr;
}

// Per-window bpb as a ScoreMatrix with windows as runs and seeds as tasks, so a stratified bootstrap
// resamples windows within each seed.
inline stats::ScoreMatrix windows_by_seed(const MethodResult& m) {
  const size_t W = m.seeds.front().window_bpb.size();
  stats::ScoreMatrix x(W, std::vector<double>(m.seeds.size()));
  for (size_t s = 0; s < m.seeds.size(); ++s)
    for (size_t w = 0; w < W; ++w) x[w][s] = m.seeds[s].window_bpb[w];
  return x;
}

// Every window's bpb, seed after seed (the order is the same for every method of a run: paired).
inline std::vector<double> all_windows(const MethodResult& m) {
  std::vector<double> v;
  for (const SeedResult& s : m.seeds) v.insert(v.end(), s.window_bpb.begin(), s.window_bpb.end());
  return v;
}

// Per-window bpb(m) − scale·bpb(base), paired by window.
inline std::vector<double> window_differences(const MethodResult& m, const MethodResult& base, double scale = 1.0) {
  std::vector<double> a = all_windows(m), b = all_windows(base);
  for (size_t i = 0; i < a.size(); ++i) a[i] -= scale * b[i];
  return a;
}

// The paired differences a test may treat as independent. With sampled windows every seed draws other windows,
// so each window is one. In streams mode every seed reads the same streams, and a deterministic method gives the
// same number on each: the differences are averaged over seeds per stream, one per stream (counting each stream
// once per seed would be pseudo-replication).
// Bits/byte per document in that sense: in streams mode one per stream (averaged over seeds, which read the same
// streams); with sampled windows every seed's windows in order.
inline std::vector<double> document_bpb(const MethodResult& m, bool per_stream) {
  std::vector<double> all = all_windows(m);
  if (!per_stream || m.seeds.empty()) return all;
  const size_t W = m.seeds.front().window_bpb.size(), S = m.seeds.size();
  std::vector<double> out(W, 0.0);
  for (size_t s = 0; s < S; ++s)
    for (size_t w = 0; w < W; ++w) out[w] += all[s * W + w] / double(S);
  return out;
}

inline std::vector<double> paired_differences(const MethodResult& m, const MethodResult& base, bool per_stream,
                                              double scale = 1.0) {
  if (!per_stream) return window_differences(m, base, scale);
  std::vector<double> a = document_bpb(m, true);
  const std::vector<double> b = document_bpb(base, true);
  for (size_t i = 0; i < a.size(); ++i) a[i] -= scale * b[i];
  return a;
}

// A calibrated heuristic whose threshold spent more than this share away from its target on the calibration windows
// missed its budget (the calibration stops within 0.5 % when it can): a rule whose decisions feed the score it reads
// may have no threshold that meets it, and the comparison then judges it at other FLOPs.
constexpr double kCalibrationMiss = 0.05;
inline double calibration_off(const MethodResult& m) {
  return m.calib_target > 0 ? m.calib_achieved / m.calib_target - 1 : 0.0;
}
inline bool calibration_missed(const MethodResult& m) { return std::abs(calibration_off(m)) > kCalibrationMiss; }

// Per-seed numbers, for seed_mean.
inline double bpb_of(const SeedResult& s) { return s.bpb; }
inline double total_of(const SeedResult& s) { return s.total_per_token(); }
inline double inner_of(const SeedResult& s) { return s.inner_per_token; }
inline double overhead_of(const SeedResult& s) { return s.overhead_per_token; }
inline double k_of(const SeedResult& s) { return s.mean_k; }

// Mean over seeds of a per-seed number.
inline double seed_mean(const MethodResult& m, double (*get)(const SeedResult&)) {
  double v = 0;
  for (const SeedResult& s : m.seeds) v += get(s) / double(m.seeds.size());
  return v;
}

// Spearman ρ over the pairs where both values are finite (NaN when fewer than 3 remain).
inline stats::Correlation spearman_finite(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> x, y;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::isfinite(a[i]) && std::isfinite(b[i])) {
      x.push_back(a[i]);
      y.push_back(b[i]);
    }
  if (x.size() < 3) return {NAN, NAN};
  return stats::spearman(x, y);
}

}  // namespace ponder::cli
