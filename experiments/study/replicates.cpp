#include "experiments/study/replicates.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

#include "experiments/study/frontier.h"
#include "experiments/study/report.h"
#include "experiments/study/result_json.h"
#include "experiments/study/result_util.h"
#include "stats/stats.h"

namespace ponder::cli {

using nlohmann::ordered_json;

CompareResult compare_result_from_json(const nlohmann::json& results) {
  CompareResult r;
  for (const nlohmann::json& m : results.at("methods")) {
    MethodResult mr;
    mr.name = m.at("name").get<std::string>();
    mr.kind = methods::parse_kind(m.at("kind").get<std::string>());
    for (const nlohmann::json& s : m.at("seeds")) mr.seeds.push_back(s.get<SeedResult>());
    if (results.contains("calibration") && results["calibration"].contains(mr.name)) {
      mr.calib_target = results["calibration"][mr.name].at("target_inner_per_token").get<double>();
      mr.calib_achieved = results["calibration"][mr.name].at("achieved_inner_per_token").get<double>();
    }
    r.methods.push_back(std::move(mr));
  }
  if (results.contains("oracle") && results["oracle"].contains("frontier"))
    for (const nlohmann::json& p : results["oracle"]["frontier"]) {
      FrontierPoint f;
      f.mu = number_or_nan(p.at("mu"));
      f.bpb = number_or_nan(p.at("bpb"));
      f.inner_per_token = number_or_nan(p.at("inner_flops_per_token"));
      f.base_per_token = number_or_nan(p.at("total_flops_per_token")) - f.inner_per_token;
      f.mean_k = number_or_nan(p.at("mean_k"));
      if (p.contains("window_bpb"))
        for (const nlohmann::json& v : p["window_bpb"]) f.window_bpb.push_back(number_or_nan(v));
      r.frontier.push_back(std::move(f));
    }
  return r;
}

namespace {

// The row of one method (or of the headroom) from its paired differences per model.
ReplicateRow row_from(const std::string& name, const std::vector<std::vector<double>>& diffs,
                      const std::vector<double>& flops_ratios) {
  ReplicateRow row;
  row.method = name;
  for (const auto& d : diffs) row.per_model.push_back(stats::mean(d));
  row.delta = stats::mean(row.per_model);
  stats::BootstrapOptions bo;
  bo.seed = 2024;
  row.ci = stats::hierarchical_bootstrap_ci(diffs, bo);
  row.flops_ratio = stats::mean(flops_ratios);
  if (row.per_model.size() >= 2) {
    row.p = stats::paired_t_test(row.per_model).p_value;
    row.mde = stats::minimum_detectable_effect(stats::stddev(row.per_model), int64_t(row.per_model.size()));
  }
  return row;
}

// Per model, the oracle frontier's best point within the baseline's FLOPs against the best uniform schedule there,
// paired by document (as oracle_headroom pairs them: seed 0's windows, or the streams).
ReplicateRow headroom_row(const std::vector<CompareResult>& runs, const std::string& baseline) {
  std::vector<std::vector<double>> diffs;
  std::vector<double> ratios;
  for (const CompareResult& r : runs) {
    const Headroom h = oracle_headroom(r, *find(r, baseline));
    if (h.d.empty()) {
      ReplicateRow none;  // no frontier point within the budget on some model: no headroom to state
      none.method = "oracle";
      return none;
    }
    diffs.push_back(h.d);
    ratios.push_back(h.flops / h.base_flops);
  }
  return row_from("oracle", diffs, ratios);
}

// The row's distance to the uniform frontier, per model and over models.
void add_frontier(const std::vector<CompareResult>& runs, bool streams, ReplicateRow& row) {
  std::vector<std::vector<double>> diffs;
  for (const CompareResult& r : runs) {
    const FrontierDelta f = frontier_delta(r, *find(r, row.method), streams);
    if (f.d.empty()) return;
    diffs.push_back(f.d);
  }
  const ReplicateRow fr = row_from(row.method, diffs, {1.0});
  row.frontier_per_model = fr.per_model;
  row.frontier = fr.delta;
  row.frontier_ci = fr.ci;
  row.frontier_p = fr.p;
}

}  // namespace

ReplicateSummary summarize_replicates(const std::vector<CompareResult>& runs, const std::vector<std::string>& labels,
                                      const CompareOptions& opt) {
  if (runs.empty()) throw std::invalid_argument("summarize_replicates: no models");
  ReplicateSummary s;
  s.baseline = "uniform-" + std::to_string(opt.budget_k);
  s.models = labels;
  for (const CompareResult& r : runs)
    if (!find(r, s.baseline))
      throw std::invalid_argument("replicates: " + s.baseline + " did not run on every model (add it to compare.methods)");
  std::vector<double> p_values;
  std::vector<int> family;  // Holm within each test_family
  for (const MethodResult& m0 : runs.front().methods) {
    if (m0.kind == methods::MethodKind::Oracle || m0.name == s.baseline) continue;
    std::vector<std::vector<double>> diffs;
    std::vector<double> ratios;
    std::vector<int> missed;
    for (const CompareResult& r : runs) {
      const MethodResult* m = find(r, m0.name);
      const MethodResult* base = find(r, s.baseline);
      if (!m) throw std::invalid_argument("replicates: method " + m0.name + " did not run on every model");
      diffs.push_back(paired_differences(*m, *base, opt.streams));
      ratios.push_back(seed_mean(*m, total_of) / seed_mean(*base, total_of));
      if (calibration_missed(*m)) missed.push_back(int(diffs.size()));
    }
    s.documents = int64_t(diffs.front().size());
    s.rows.push_back(row_from(m0.name, diffs, ratios));
    s.rows.back().calibration_missed = missed;
    s.rows.back().policy = test_family(m0) == 0;
    if (m0.kind != methods::MethodKind::Uniform) add_frontier(runs, opt.streams, s.rows.back());
    if (std::isfinite(s.rows.back().p)) {
      p_values.push_back(s.rows.back().p);
      family.push_back(test_family(m0));
    }
  }
  const std::vector<double> holm = stats::within_families(p_values, family, stats::holm);
  size_t i = 0;
  for (ReplicateRow& row : s.rows)
    if (std::isfinite(row.p)) row.p_holm = holm[i++];
  s.headroom = headroom_row(runs, s.baseline);
  return s;
}

namespace {

ordered_json row_json(const ReplicateRow& r) {
  const bool no_frontier = std::isnan(r.frontier);  // uniform schedules: their interval is null, not [0, 0]
  return {{"method", r.method}, {"delta_bpb", r.delta}, {"ci", {r.ci.lo, r.ci.hi}}, {"per_model", r.per_model},
          {"p_t_over_models", r.p}, {"p_holm", r.p_holm}, {"mde_bpb", r.mde}, {"flops_ratio", r.flops_ratio},
          {"frontier_delta", {{"mean", r.frontier},
                              {"ci", {no_frontier ? NAN : r.frontier_ci.lo, no_frontier ? NAN : r.frontier_ci.hi}},
                              {"per_model", r.frontier_per_model}, {"p_t_over_models", r.frontier_p}}},
          {"calibration_missed_models", r.calibration_missed}};
}

// The policies whose distance to the uniform frontier over models has its 95% interval below 0.
std::vector<const ReplicateRow*> below_frontier(const ReplicateSummary& s) {
  std::vector<const ReplicateRow*> below;
  for (const ReplicateRow& r : s.rows)
    if (r.policy && r.frontier_ci.hi < 0) below.push_back(&r);
  return below;
}

// Over models, in words: which policies lie below the uniform frontier, or the closest one when none does. A policy
// whose distance is exactly 0 everywhere ran a uniform schedule (a heuristic that cannot meet the budget): named as
// such, not as the closest.
std::string frontier_answer_over_models(const ReplicateSummary& s) {
  const ReplicateRow* closest = nullptr;
  int policies = 0;
  std::string uniform;
  for (const ReplicateRow& r : s.rows) {
    if (!r.policy || std::isnan(r.frontier)) continue;
    ++policies;
    if (uniform_in_effect(r.frontier_ci))
      uniform += (uniform.empty() ? "`" : ", `") + r.method + "`";
    else if (!closest || r.frontier < closest->frontier)
      closest = &r;
  }
  if (policies == 0) return "";
  auto cell = [](const ReplicateRow& r) {
    return "`" + r.method + "` " + fmt("%+.4f", r.frontier) + " [" + fmt("%+.4f", r.frontier_ci.lo) + ", " +
           fmt("%+.4f", r.frontier_ci.hi) + "] (t-test over models p " + fmt("%.3g", r.frontier_p) + ")";
  };
  std::string out = "**Against the uniform frontier over models**: ";
  const std::vector<const ReplicateRow*> below = below_frontier(s);
  const std::string same = uniform.empty() ? "" : " " + uniform + " read as the frontier on every document (a "
                           "uniform schedule in effect).";
  if (below.empty())
    return out + "no policy of the " + std::to_string(policies) + " compared lies below it (95% CI under 0)" +
           (closest ? "; the closest is " + cell(*closest) : std::string()) + "." + same + "\n";
  for (size_t i = 0; i < below.size(); ++i) out += (i ? ", " : "") + cell(*below[i]);
  return out + (below.size() == 1 ? " lies" : " lie") + " below it (95% CI under 0)." + same + "\n";
}

}  // namespace

ordered_json replicates_json(const ReplicateSummary& s) {
  ordered_json rows = ordered_json::array();
  for (const ReplicateRow& r : s.rows) rows.push_back(row_json(r));
  ordered_json below = ordered_json::array();
  for (const ReplicateRow* r : below_frontier(s)) below.push_back(r->method);
  return {{"models", s.models.size()},
          {"checkpoints", s.models},
          {"baseline", s.baseline},
          {"documents_per_model", s.documents},
          {"unit_of_replication", "model (documents are paired observations inside each model)"},
          {"oracle_headroom", row_json(s.headroom)},
          {"policies_below_frontier", below},
          {"methods", rows}};
}

std::string replicates_markdown(const ReplicateSummary& s) {
  std::ostringstream md;
  const size_t n = s.models.size();
  md << "## Over " << n << " independently trained model" << (n == 1 ? "" : "s") << "\n\n";
  if (n < 2)
    md << "**One trained model**: no interval below contains training variance; it holds only the sampling of "
          "documents. Train more models (`ponder train --seed N`, then several `--checkpoint`) for a result about "
          "the method.\n\n";
  else if (n < 5)
    md << "**Only " << n << " models**: a bootstrap over so few models understates their spread, so read the t-test's p "
          "and the MDE; at least 5 models are needed for a reported result.\n\n";
  md << "Each model was compared on its own (heuristics calibrated and learned policies trained on it; reports in "
        "each model's folder, listed in results.json as replicates.checkpoints). Here the unit of replication is the "
        "model: Δ is bits/byte against " << s.baseline
     << " paired by document (" << s.documents << " per model), averaged per model, then over models; the 95% CI "
        "resamples models, then documents inside each (hierarchical bootstrap); p is a paired t-test over the "
        "per-model means (Holm within the policies, the uniform schedules and the replays, each a family); MDE is the |Δ| that test detects with 80% power at α 0.05 with "
     << n << " models. The last column compares each method with the uniform frontier interpolated at its own "
        "total FLOPs, per model and then over models the same way.\n\n| method | Δ bpb vs "
     << s.baseline << " [95% CI] | per model | p (Holm) | MDE | FLOPs vs " << s.baseline
     << " | Δ vs uniform frontier [95% CI] |\n|---|---|---|---|---|---|---|\n";
  auto line = [&](const ReplicateRow& r, bool holm) {
    std::string per;
    for (double v : r.per_model) per += (per.empty() ? "" : ", ") + fmt("%+.4f", v);
    md << "| " << r.method << " | " << fmt("%+.4f", r.delta) << " [" << fmt("%+.4f", r.ci.lo) << ", "
       << fmt("%+.4f", r.ci.hi) << "] | " << per << " | " << fmt("%.3g", r.p)
       << (holm ? " (" + fmt("%.3g", r.p_holm) + ")" : "") << " | " << fmt("%.4f", r.mde) << " | "
       << fmt("%.3f", r.flops_ratio) << "× |"
       << (holm ? " " + (std::isnan(r.frontier) ? std::string("—") : fmt("%+.4f", r.frontier) + " [" +
                         fmt("%+.4f", r.frontier_ci.lo) + ", " + fmt("%+.4f", r.frontier_ci.hi) + "]") + " |"
                : std::string())
       << "\n";
  };
  for (const ReplicateRow& r : s.rows) line(r, true);
  std::string missed;
  for (const ReplicateRow& r : s.rows) {
    std::string models;
    for (int m : r.calibration_missed) models += (models.empty() ? "" : ", ") + std::to_string(m);
    if (!models.empty())
      missed += (missed.empty() ? "" : "; ") + r.method + (r.calibration_missed.size() > 1 ? " (models " : " (model ") +
                models + ")";
  }
  if (!missed.empty())
    md << "\n**Calibration missed the budget** (more than " << fmt("%.0f", 100 * kCalibrationMiss)
       << " % off its target on the calibration windows; each model's report says by how much), so these rows judge "
          "the method at other FLOPs than the budget's: " << missed << ".\n";
  md << "\n" << frontier_answer_over_models(s);
  md << "\nOracle headroom (positive: the oracle frontier beats the best uniform schedule within " << s.baseline
     << "'s FLOPs):\n\n| | headroom bpb [95% CI] | per model | p | MDE | FLOPs vs " << s.baseline
     << " |\n|---|---|---|---|---|---|\n";
  line(s.headroom, false);
  return md.str() + "\n";
}

}  // namespace ponder::cli
