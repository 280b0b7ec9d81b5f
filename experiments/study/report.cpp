#include "experiments/study/report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "experiments/study/frontier.h"
#include "experiments/study/plots.h"
#include "experiments/study/result_json.h"
#include "experiments/study/result_util.h"
#include "stats/rliable.h"
#include "stats/stats.h"
#include "util/files.h"

namespace ponder::cli {
namespace {

using nlohmann::ordered_json;

// One section of the report: its markdown and what results.json holds of it.
struct Section {
  std::string md;
  ordered_json json;
};

std::string setup_text(const CompareResult& r, const CompareOptions& opt) {
  if (!opt.streams)
    return std::to_string(opt.seeds) + " seeds × " + std::to_string(r.windows_per_seed) +
           (opt.windows_per_seed == 0 ? " (every window of the split)" : "") + " held-out windows of " +
           std::to_string(opt.seq_len) + " bytes = " + fmt("%.1f", 100 * scored_fraction(r)) + " % of the split's windows "
           "(a seed fixes the windows and the random policy's draws; every method sees the same windows, so comparisons "
           "are paired by window).";
  // A cap on the context before each scored part (streams.max_adapt) does nothing when the streams are scored from
  // their first token (a document, not a repository's adaptation files then its evaluation files): say so, since a
  // reader of the config would expect that context to be read.
  const std::string context =
      r.segments == 0 ? ""
      : r.context_tokens > 0
          ? "; each of the " + std::to_string(r.segments) + " segments read after " +
                fmt("%.0f", double(r.context_tokens) / double(r.segments)) + " unscored tokens of context on average"
          : "; no segment has unscored context before its scored part" +
                std::string(r.stream_reset ? " (each file is scored from its start, and the reset drops what came "
                                             "before it)"
                            : opt.stream_max_adapt > 0 ? " (streams.max_adapt has no effect: every stream is scored "
                                                         "from its first token)"
                                                       : "");
  const std::string how = r.stream_reset ? "each read with its state reset at every file's start (" +
                                               std::to_string(r.segments) + " files read alone, each after the byte "
                                               "before it; `streams.reset_at_documents`), "
                                         : "each read whole with its state carried, ";
  return std::to_string(r.stream_names.size()) + " held-out streams, " + how +
         std::to_string(r.eval_tokens) + " scored tokens = " +
         fmt("%.1f", r.split_tokens > 0 ? 100.0 * double(r.eval_tokens) / double(r.split_tokens) : 0.0) +
         " % of the split (caps in `streams:`)" + context + ", × " + std::to_string(opt.seeds) +
         " seeds (a seed fixes the methods' own random draws; every method reads the same streams, so comparisons are "
         "paired by stream; per-stream bits/byte are in results.json as window_bpb).";
}

std::string degenerate_md(const std::vector<std::string>& why, const DegeneracyChecks& checked) {
  if (why.empty() && !checked.uniform && !checked.oracle)
    return "**Degeneracy not checked**: fewer than two uniform schedules with K ≥ 1 and no oracle ran, so nothing "
           "here shows whether a decision changes an output.\n\n";
  if (why.empty())
    return std::string("**Not degenerate**: ") +
           (checked.uniform ? "some decision changes some output" : "(not checked whether a decision changes an "
                                                                    "output: fewer than two uniform-K with K ≥ 1)") +
           (checked.oracle ? ", and the oracle's choices are not mostly ties" : "; no oracle ran") + ".\n\n";
  std::string s = "**Degenerate by construction** — no method can show anything in this comparison:\n\n";
  for (const std::string& w : why) s += "- " + w + ".\n";
  return s + "\n";
}

// Per method: bits/byte with a bootstrap CI (over windows stratified by seed, or over streams), IQM, FLOPs, mean K.
Section method_table(const CompareResult& r, const CompareOptions& opt) {
  stats::BootstrapOptions bo;
  bo.seed = 2024;
  Section s;
  s.json = ordered_json::array();
  std::ostringstream table;
  table << "| method | bpb (95% CI " << (opt.streams ? "over streams" : "over windows, stratified by seed")
        << ") | IQM bpb | FLOPs/token total | inner TTT | policy overhead | mean K |\n|---|---|---|---|---|---|---|\n";
  for (const MethodResult& m : r.methods) {
    // Streams mode: every seed reads the same streams, so resample streams (values averaged over seeds), not
    // stream × seed readings, which would give a CI too narrow for deterministic methods.
    stats::ScoreMatrix x = windows_by_seed(m);
    if (opt.streams)
      for (std::vector<double>& row : x) {
        double mean = 0;
        for (double v : row) mean += v / double(row.size());
        row = {mean};
      }
    const stats::Interval ci = stats::stratified_bootstrap_ci(x, stats::aggregate_mean, bo);
    const double iqm = stats::iqm(all_windows(m));
    table << "| " << m.name << " | " << fmt("%.4f", ci.point) << " [" << fmt("%.4f", ci.lo) << ", "
          << fmt("%.4f", ci.hi) << "] | " << fmt("%.4f", iqm) << " | " << fmt("%.4g", seed_mean(m, total_of)) << " | "
          << fmt("%.4g", seed_mean(m, inner_of)) << " | " << fmt("%.3g", seed_mean(m, overhead_of)) << " | "
          << fmt("%.2f", seed_mean(m, k_of)) << " |\n";
    const ordered_json seeds = m.seeds, curve = m.curve;
    ordered_json j = {{"name", m.name}, {"kind", methods::kind_name(m.kind)}, {"detail", m.detail}, {"unit_tokens", m.unit_tokens},
                      {"bpb", {{"mean", ci.point}, {"ci95", {ci.lo, ci.hi}}, {"iqm", iqm}}},
                      {"k_options", r.k_options}, {"k_hist", m.k_hist}, {"seeds", seeds}};
    // The oracle's too: its distance at its own FLOPs is what a replay of oracle choices (replay:) is measured against.
    if (m.kind != methods::MethodKind::Uniform) j["frontier_delta"] = frontier_delta_json(frontier_delta(r, m, opt.streams));
    if (!m.curve.empty()) {
      j["train_seconds"] = m.train_seconds;
      j["training_curve"] = curve;
    }
    s.json.push_back(j);
  }
  s.md = table.str();
  return s;
}

Section tests_section(const std::vector<Comparison>& cmp, const std::string& base_name) {
  Section s;
  s.json = ordered_json::array();
  std::ostringstream tests;
  tests << "| method | Δbpb vs " << base_name << " | paired t p | Wilcoxon p (n after zeros, method) | Holm p (t) | "
        << "Bonferroni p (t) | Cohen's d_z | P(improvement), paired |\n|---|---|---|---|---|---|---|---|\n";
  for (const Comparison& c : cmp) {
    tests << "| " << c.method << " | " << fmt("%+.4f", c.delta) << " | " << fmt("%.3g", c.t_p) << " | "
          << fmt("%.3g", c.w_p) << " (" << c.w_n << ", " << (c.w_exact ? "exact" : "normal") << ") | "
          << fmt("%.3g", c.holm) << " | " << fmt("%.3g", c.bonferroni) << " | " << fmt("%+.3f", c.dz) << " | "
          << fmt("%.3f", c.p_improve) << " |\n";
    s.json.push_back({{"method", c.method}, {"baseline", base_name}, {"delta_bpb", c.delta}, {"paired_t_p", c.t_p},
                      {"wilcoxon_p", c.w_p}, {"holm_p", c.holm}, {"bonferroni_p", c.bonferroni},
                      {"wilcoxon_n", c.w_n}, {"wilcoxon_exact", c.w_exact}, {"cohens_dz", c.dz},
                      {"p_improvement", c.p_improve}, {"p_improvement_unpaired", c.p_improve_unpaired}});
  }
  s.md = tests.str();
  return s;
}

// The oracle's correlations with the difficulty scores, its frontier and its headroom at the budget.
Section oracle_section(const CompareResult& r, const CompareOptions& opt, const OracleAnalysis& oa, const Headroom& hr,
                       const std::string& base_name) {
  Section s;
  std::ostringstream md;
  for (const auto& [name, c] : oa.score_corr) s.json["spearman_oracle_k"][name] = {{"rho", c.rho}, {"p", c.p_value}};
  s.json["headroom_bpb_at_budget"] = hr.bpb;
  s.json["headroom"] = {{"bpb", hr.bpb}, {"ci95", {hr.lo, hr.hi}}, {"n_paired", hr.n}, {"mu", hr.mu},
                        {"total_flops_per_token", hr.flops}, {"budget_total_flops_per_token", hr.base_flops},
                        {"fraction_of_budget", hr.flops / hr.base_flops}, {"budget", base_name}, {"uniform", hr.uniform}};
  s.json["frontier"] = ordered_json::array();
  for (const FrontierPoint& p : r.frontier)
    s.json["frontier"].push_back({{"mu", p.mu}, {"bpb", p.bpb}, {"inner_flops_per_token", p.inner_per_token},
                                  {"total_flops_per_token", p.base_per_token + p.inner_per_token},
                                  {"mean_k", p.mean_k}, {"window_bpb", p.window_bpb}});
  md << "Spearman correlation of the oracle's K with each difficulty score (over " << r.oracle_units.distinct().k.size()
     << " units; scores are those the policies see, from completed units):\n\n| score | ρ | p |\n|---|---|---|\n";
  for (const auto& [name, c] : oa.score_corr) md << "| " << name << " | " << fmt("%+.3f", c.rho) << " | " << fmt("%.3g", c.p_value) << " |\n";
  md << "\nOracle frontier (per unit minimise loss + μ·inner cost / base cost; seed 0's windows):\n\n"
     << "| μ | bpb | FLOPs/token | mean K |\n|---|---|---|---|\n";
  for (const FrontierPoint& p : r.frontier)
    md << "| " << p.mu << " | " << fmt("%.4f", p.bpb) << " | " << fmt("%.4g", p.base_per_token + p.inner_per_token)
       << " | " << fmt("%.2f", p.mean_k) << " |\n";
  md << "\nHeadroom of the oracle over the uniform frontier at no more than " << base_name << "'s FLOPs per token ("
     << fmt("%.4g", hr.base_flops) << "; best uniform there: " << hr.uniform << "; seed 0's windows): "
     << fmt("%+.4f", hr.bpb) << " bits per byte, 95% CI [" << fmt("%+.4f", hr.lo) << ", " << fmt("%+.4f", hr.hi)
     << "] paired over " << hr.n << (opt.streams ? " streams" : " windows") << " (frontier point μ = "
     << fmt("%g", hr.mu) << ", " << fmt("%.4g", hr.flops) << " FLOPs/token = "
     << fmt("%.1f", 100 * hr.flops / hr.base_flops) << " % of the budget; positive = the oracle is better).\n";
  s.md = md.str();
  return s;
}

// Each policy's decisions against the oracle's on the same units.
Section agreement_section(const CompareResult& r, const OracleAnalysis& oa) {
  Section s;
  if (!find(r, "oracle")) return s;
  std::ostringstream md;
  md << "\nSpearman ρ between each method's K and the oracle's K on the same units (same windows, unit by "
        "unit; the trajectories differ, so this measures agreement of placement):\n\n| method | ρ |\n|---|---|\n";
  for (const auto& [name, rho] : oa.policy_rho) {
    if (std::isnan(rho) && find(r, name)->unit_tokens != find(r, "oracle")->unit_tokens) {
      md << "| " << name << " | — (" << find(r, name)->unit_tokens << "-token units) |\n";
      continue;
    }
    s.json[name] = rho;
    md << "| " << name << " | " << fmt("%+.3f", rho) << " |\n";
  }
  s.md = md.str();
  return s;
}

// The calibrated heuristics: what each threshold spent on the calibration windows against its target. A miss is said
// out loud: a rule whose decisions feed the score it reads (an easy-* rule at K = 0 never learns, so its units never
// read as easy) may have no threshold that meets the budget, and the table then judges it at other FLOPs.
Section calibration_section(const CompareResult& r) {
  Section s;
  std::ostringstream md;
  for (const MethodResult& m : r.methods) {
    if (!(m.calib_target > 0)) continue;
    const double off = calibration_off(m);
    const bool missed = calibration_missed(m);
    md << "- `" << m.name << "`: " << m.detail << "; " << fmt("%+.1f", 100 * off) << " % off its target"
       << (missed ? " — **missed its budget** (more than " + fmt("%.0f", 100 * kCalibrationMiss) +
                        " %): no threshold spent the budget on these windows, so it is judged at the FLOPs it spends"
                  : "") << ".\n";
    s.json[m.name] = {{"target_inner_per_token", m.calib_target}, {"achieved_inner_per_token", m.calib_achieved},
                      {"missed", missed}};
  }
  s.md = md.str();
  return s;
}

// The learned methods: settings, training curve endpoints, overhead against what they save.
std::string learned_section(const CompareResult& r, const MethodResult* base, const std::string& base_name) {
  std::ostringstream learned;
  for (const MethodResult& m : r.methods) {
    if (m.curve.empty()) continue;
    const rl::IterationStats &first = m.curve.front(), &last = m.curve.back();
    learned << "- `" << m.name << "`: " << m.detail << ", trained in " << fmt("%.0f", m.train_seconds)
            << " s. Training (sampled decisions; each iteration sees other windows, so the loss moves with the text "
            << "too), first → last iteration: unit loss " << fmt("%.4f", first.loss) << " → " << fmt("%.4f", last.loss)
            << " nats, mean K " << fmt("%.2f", first.mean_k) << " → " << fmt("%.2f", last.mean_k) << ", E_π[K] "
            << fmt("%.2f", first.expected_k) << " → " << fmt("%.2f", last.expected_k) << ", entropy "
            << fmt("%.3f", first.entropy) << " → " << fmt("%.3f", last.entropy) << " nats.";
    if (base) {
      const double saved = seed_mean(*base, inner_of) - seed_mean(m, inner_of), over = seed_mean(m, overhead_of);
      learned << " Policy overhead " << fmt("%.4g", over) << " FLOPs/token (its features and its network) "
              << "against " << fmt("%.4g", saved) << " inner FLOPs/token saved vs " << base_name << ": net "
              << fmt("%+.4g", saved - over) << " FLOPs/token (" << (saved - over > 0 ? "a saving" : "a loss") << ").";
    }
    learned << "\n";
  }
  return learned.str();
}

Section cost_section(const CompareResult& r, const CompareOptions& opt) {
  Section s;
  s.json = ordered_json::array();
  static const std::map<int, double> assumed = {{0, 1}, {1, 3}, {2, 5}, {4, 12}};
  std::ostringstream costs;
  costs << "| K | measured (base + inner) / base | assumed multiple |\n|---|---|---|\n";
  for (size_t i = 0; i < opt.step_options.size(); ++i) {
    const int k = opt.step_options[i];
    const auto it = assumed.find(k);
    costs << "| " << k << " | " << fmt("%.3f×", r.k_cost_multiple[i]) << " | "
          << (it == assumed.end() ? std::string("—") : fmt("%.0f×", it->second)) << " |\n";
    s.json.push_back({{"k", k}, {"measured_multiple", r.k_cost_multiple[i]}});
  }
  s.md = costs.str();
  return s;
}

Section criteria_section(const CriteriaVerdicts& v, const OracleAnalysis& oa, const Criteria& cr) {
  auto mark = [](Verdict x) {
    return x == Verdict::Met ? "**met**" : x == Verdict::NotMet ? "**not met**" : "**not testable here**";
  };
  auto verdict_json = [](Verdict x) -> ordered_json {
    if (x == Verdict::NotTestable) return "not testable";
    return x == Verdict::Met;
  };
  Section s;
  std::ostringstream crit;
  crit << "- Quality within " << fmt("%g", 100 * cr.quality) << " % of uniform-4 at ≥ " << fmt("%g", 100 * cr.flops)
       << " % lower net FLOPs, p < " << fmt("%g", cr.alpha) << " after Holm correction: " << mark(v.quality) << ". "
       << v.quality_detail << "\n"
       << "- Oracle-K / difficulty correlation ρ > " << fmt("%g", cr.difficulty_corr) << ": " << mark(v.difficulty)
       << " (best Spearman ρ " << fmt("%+.3f", oa.best_corr) << "; " << v.tie_text << ").\n"
       << "- Policy / oracle Spearman ρ > " << fmt("%g", cr.policy_rho) << ": " << mark(v.policy) << " (best "
       << fmt("%+.3f", oa.best_policy_rho) << "; " << v.tie_text << ").\n"
       << "\nThresholds come from the config (`compare.criteria_*`).\n";
  s.md = crit.str();
  s.json = {{"quality_near_uniform4_at_fewer_flops", verdict_json(v.quality)},
            {"oracle_difficulty_correlation", verdict_json(v.difficulty)},
            {"policy_oracle_spearman", verdict_json(v.policy)},
            {"thresholds", {{"quality", cr.quality}, {"flops", cr.flops}, {"alpha", cr.alpha},
                            {"difficulty_corr", cr.difficulty_corr}, {"policy_rho", cr.policy_rho},
                            {"max_tie_share", cr.max_tie_share}}}};
  return s;
}

// A difference in bits per byte, to 4 decimals, or to 2 significant digits when 4 decimals would show 0.
std::string bpb_delta(double d) { return std::abs(d) >= 5e-5 || d == 0 ? fmt("%+.4f", d) : fmt("%+.2g", d); }

bool cannot_meet_budget(const MethodResult* m) { return m && m->detail.rfind("cannot meet the budget", 0) == 0; }

// The comparison the answer leads with: the lowest Δ among methods that do not read labels, leaving out those that
// could not meet the budget (each runs one uniform schedule, so it is no allocation) unless nothing else is left;
// `left_out` names what was passed over that way.
const Comparison* answer_method(const CompareResult& r, const std::vector<Comparison>& cmp, std::string& left_out) {
  const Comparison *best = nullptr, *any = nullptr;
  std::string skipped;
  for (const Comparison& c : cmp) {
    const MethodResult* m = find(r, c.method);
    if (m && reads_labels(*m)) continue;
    if (!any || c.delta < any->delta) any = &c;
    if (cannot_meet_budget(m))
      skipped += (skipped.empty() ? "`" : ", `") + c.method + "` (Δ " + bpb_delta(c.delta) + ")";
    else if (!best || c.delta < best->delta)
      best = &c;
  }
  if (best) left_out = skipped;
  return best ? best : any;
}

// The answer, in words computed from the numbers: the best method against the budget and against the uniform
// frontier, the oracle's headroom, and what the carry factor allows.
std::string answer_text(const CompareResult& r, const CompareOptions& opt, const std::vector<Comparison>& cmp,
                        const Headroom& hr, const std::string& base_name, const std::string& section) {
  std::ostringstream answer;
  if (!find(r, base_name))
    return "No answer: the methods compared do not include " + base_name + ", the budget that " + section +
           ".budget_k = " + std::to_string(opt.budget_k) + " names, which every method is matched to and tested "
           "against, so there are no paired tests and no oracle headroom. Add " + base_name + " to " + section +
           ".methods.";
  std::string left_out;
  const Comparison* best = answer_method(r, cmp, left_out);
  if (!best) {
    answer << "No adaptive method was compared with " << base_name << ".";
  } else {
    const bool sig = std::isfinite(best->holm) && best->holm < 0.05;
    // A paired test over thousands of tokens resolves differences far below any that matter; an effect under a
    // tenth of the size the comparisons are built to resolve (the positive control's floor) is said to be nil.
    const double tiny = opt.criteria.control_headroom / 10;
    answer << "Best adaptive method at the budget of " << base_name << ": `" << best->method << "`, Δ = "
           << bpb_delta(best->delta) << " bits per byte per window (Holm-corrected paired t p = "
           << fmt("%.3g", best->holm) << "): "
           << (best->delta == 0 ? "identical to " + base_name + " on every window"
               : sig ? (best->delta < 0 ? "significantly better than " : "significantly worse than ") + base_name
                     : "not significantly different from " + base_name);
    if (best->delta != 0 && sig && std::abs(best->delta) < tiny)
      answer << ", but by less than " << fmt("%g", tiny) << " bits per byte, a tenth of the effect the comparison is "
             << "built to resolve (compare.criteria_control_headroom): practically nil";
    answer << "." << frontier_answer(r, best->method, opt.streams)
           << " The oracle's headroom over the uniform frontier at no more than that compute is "
           << bpb_delta(hr.bpb) << " bits per byte (95% CI [" << bpb_delta(hr.lo) << ", " << bpb_delta(hr.hi) << "])";
    if (std::isfinite(hr.hi) && std::abs(hr.hi) < tiny && std::abs(hr.lo) < tiny)
      answer << ": under " << fmt("%g", tiny) << " bits per byte, so at this budget there is nothing to allocate";
    answer << ".";
    if (headroom_short_of_budget(r, hr))
      answer << " Note: the oracle frontier's best point within the budget spends only "
             << fmt("%.0f", 100 * hr.flops / hr.base_flops) << " % of it, so that headroom is a cheaper oracle's; "
             << "raise compare.oracle_bisect (or add smaller compare.frontier_mus) to measure it at the budget.";
    const MethodResult* bm = find(r, best->method);
    if (cannot_meet_budget(bm))
      answer << " Note: `" << best->method << "` " << bm->detail << ": it is a uniform schedule plus the cost of its "
             << "score, not an allocation, and its distance to the uniform frontier (below) is what to read.";
    if (!left_out.empty())
      answer << " Left out of \"best\": " << left_out << ", which could not meet the budget and so ran one uniform "
             << "schedule plus the cost of its score: no allocation.";
    if (!hr.uniform.empty() && hr.uniform != base_name)
      answer << " Note: `" << hr.uniform << "` is better than " << base_name << " at less compute, so the uniform "
             << "frontier at this budget is " << hr.uniform << ", and a method must beat it, not " << base_name
             << ", to beat uniform.";
  }
  bool dead = !r.carry_token_factor.empty();
  for (double f : r.carry_token_factor) dead = dead && f == 0;
  answer << "\n\nCarry factor per TTT layer (η's last-row token factor, which scales every carried update; "
            "model.token_factor says how it is parametrised): ";
  for (size_t i = 0; i < r.carry_token_factor.size(); ++i) answer << (i ? ", " : "") << fmt("%.4g", r.carry_token_factor[i]);
  answer << ".";
  if (dead && opt.rollout.mode == ttt::StepMode::Carry)
    answer << " It is 0 in every layer: the trained model hands the same state (its W0) to every unit, so in "
              "carry mode all K ≥ 1 give identical outputs, extra steps only cost FLOPs, and what TTT contributes "
              "(uniform-1 vs uniform-0) comes from updates within each unit. Methods that differ from uniform "
              "here differ only in where they SKIP.";
  return answer.str();
}

// The non-uniform method (not one that reads labels) with the best mean bits/byte; empty when there is none.
std::string best_method_name(const CompareResult& r) {
  std::string best;
  double best_bpb = INFINITY;
  for (const MethodResult& m : r.methods)
    if (!reads_labels(m) && m.kind != methods::MethodKind::Uniform && seed_mean(m, bpb_of) < best_bpb) {
      best_bpb = seed_mean(m, bpb_of);
      best = m.name;
    }
  return best;
}

// What the heuristics were calibrated (and the learned policies trained) on, in words.
std::string calibration_text(const CompareResult& r, const CompareOptions& opt) {
  if (opt.calibrate_from != "streams")
    return std::to_string(r.calibration_windows) + " validation windows of " + std::to_string(opt.seq_len) + " tokens";
  return std::to_string(r.calibration_windows) + " segments of the validation streams (" +
         std::to_string(r.calibration_tokens) + " tokens, each read as a scored segment is: up to " +
         std::to_string(opt.stream_max_adapt) + " tokens of context, then up to " + std::to_string(opt.stream_max_scored) +
         "; 0 = no cap); the learned policies train on segments drawn the same way";
}

// Everything the report says, in the order it says it.
struct ReportParts {
  Section methods, tests, oracle, agreement, costs, criteria, calibration;
  std::string learned, answer, best_method;
  std::vector<std::string> degenerate;
  DegeneracyChecks checked;
  double ties = NAN;
};

ordered_json results_json(const CompareResult& r, const CompareOptions& opt, const ordered_json& provenance,
                          const ReportParts& p) {
  const std::string base_name = "uniform-" + std::to_string(opt.budget_k);
  ordered_json out = provenance;
  out["options"] = {{"seeds", opt.seeds}, {"windows_per_seed", opt.windows_per_seed}, {"seq_len", opt.seq_len},
                    {"step_options", opt.step_options}, {"budget", base_name}, {"levels", {opt.low, opt.high}},
                    {"calibration_windows", r.calibration_windows}, {"calibration_tokens", r.calibration_tokens},
                    {"calibrate_from", opt.calibrate_from}, {"oracle_lookahead", opt.oracle_lookahead},
                    {"oracle_lookahead_k", opt.rollout.oracle_lookahead_k},
                    {"mode", opt.rollout.mode == ttt::StepMode::Carry ? "carry" : "prefix"},
                    {"decisions", opt.rollout.mode == ttt::StepMode::Carry && opt.rollout.two_stage ? "two-stage" : "before-unit"},
                    {"path", opt.rollout.path == ttt::InnerPath::Dual ? "dual" : "iterative"}};
  out["budget_inner_flops_per_token"] = r.budget_inner_per_token;
  out["cost_multiples"] = p.costs.json;
  out["methods"] = p.methods.json;
  out["comparisons"] = p.tests.json;
  out["oracle"] = p.oracle.json;
  out["models"] = 1;  // one trained model: its intervals hold document sampling only (ponder compare with several
                      // --checkpoint gives the statistics over models)
  if (p.oracle.json.contains("headroom"))
    out["oracle_headroom"] = {{"mean", p.oracle.json["headroom"]["bpb"]}, {"ci", p.oracle.json["headroom"]["ci95"]}};
  out["policy_oracle_spearman"] = p.agreement.json;
  out["degenerate"] = {{"value", !p.degenerate.empty()}, {"reason", ordered_json(p.degenerate)}};
  out["oracle_tie_share"] = p.ties;
  out["success_criteria"] = p.criteria.json;
  if (!p.calibration.json.is_null()) out["calibration"] = p.calibration.json;
  out["carry_token_factor"] = r.carry_token_factor;
  if (opt.streams) {
    out["streams"] = r.stream_names;
    out["eval_tokens"] = r.eval_tokens;
    out["segments"] = r.segments;
    out["context_tokens"] = r.context_tokens;  // unscored tokens read before the segments' scored parts
    out["reset_at_documents"] = r.stream_reset;
  } else {  // distinct windows scored over all seeds, of all the split's non-overlapping windows
    out["scored_windows"] = r.eval_tokens / opt.seq_len;
    out["split_windows"] = r.split_tokens / opt.seq_len;
  }
  out["scored_fraction"] = scored_fraction(r);
  out["seconds"] = r.seconds;
  return out;
}

void write_report_md(const CompareResult& r, const CompareOptions& opt, const ordered_json& provenance,
                     const ReportParts& p, const std::string& mode, const std::string& path) {
  const std::string base_name = "uniform-" + std::to_string(opt.budget_k);
  const MethodResult* oracle = find(r, "oracle");
  std::ostringstream md;
  md << "# Does adaptive test-time training beat uniform at equal compute?\n\n"
     << "Produced by `ponder` " << provenance.value("version", "") << " (commit " << provenance.value("commit", "?")
     << ", " << provenance.value("build_type", "") << " build) on " << provenance.value("machine", "") << " with "
     << provenance.value("threads", 0) << " thread(s). Data: " << provenance.value("data", "") << " (sha256 "
     << provenance.value("data_sha256", "") << "). Every number below comes from this run; results.json holds them "
     << "all, per seed and per window.\n\n"
     << "Setup: " << setup_text(r, opt) << " Inner steps in `" << mode << "` mode; a method picks one K per unit of "
     << r.mini_batch * opt.rollout.unit_batches << " tokens (a learned method whose options name a unit, its own). Heuristics and `random` spend K="
     << opt.low << " or K=" << opt.high << " per unit and are calibrated to "
     << (opt.calibrate_on == "total" ? "the total FLOPs per token of " + base_name +
        " (their own overhead comes out of their inner budget; inner budget " : "the inner FLOPs per token of " +
        base_name + " (") << fmt("%.4g", r.budget_inner_per_token) << ") on " << calibration_text(r, opt) << ".\n\n"
     << degenerate_md(p.degenerate, p.checked) << "## Answer\n\n"
     << p.answer << "\n\n## Results\n\n"
     << p.methods.md << "\nFLOPs are counted by the engine, not estimated: base forward + inner TTT steps actually run "
     << "+ policy overhead (features, probes).\n\n## Paired tests against " << base_name << " (same budget)\n\n"
     << "Per-window differences of bits per byte (negative = better than " << base_name << "); n = "
     << (opt.streams ? int64_t(r.stream_names.size()) : opt.seeds * r.windows_per_seed)
     << (opt.streams ? " streams (each stream's difference averaged over the seeds, so a stream counts once)"
                     : " windows") << ". Holm and Bonferroni correct the policies' tests among themselves, and "
     << "any replays' (which read labels) among themselves.\n\n" << p.tests.md << "\n" << frontier_markdown(r, opt.streams)
     << (p.calibration.md.empty() ? std::string() : "\n## Calibrated heuristics\n\n" + p.calibration.md)
     << (p.learned.empty() ? std::string() : "\n## Learned policies\n\n" + p.learned +
                                                  "\nTraining curves per iteration are in results.json.\n")
     << "\n## Success criteria (docs/method.md §6.4)\n\n" << p.criteria.md << "\n## Oracle\n\n"
     << (oracle ? "Greedy oracle: " + oracle->detail + ", bpb " + fmt("%.4f", seed_mean(*oracle, bpb_of)) + " at " +
                      fmt("%.4g", seed_mean(*oracle, total_of)) + " FLOPs/token (labels used, not a policy; an upper bound only for gains that show within its look-ahead: "
                      "it undervalues a step whose gain carries to every later unit, so a uniform schedule can beat it).\n\n"
                : std::string())
     << p.oracle.md << p.agreement.md << "\n## Measured cost of inner steps\n\n" << p.costs.md
     << "\n## Figures\n\n![Pareto](pareto.png)\n\n![Distance to the uniform frontier](forest.png)\n\n"
     << "![K histogram](k_hist.png)\n\n"
     << "[Per-token view of a held-out passage](tokens.html) under `" << p.best_method << "`.\n";
  util::write_atomically(path, md.str());
}

}  // namespace

std::string write_compare_outputs(const CompareResult& r, const CompareOptions& opt, const ordered_json& provenance,
                                  const std::string& dir) {
  const std::string base_name = "uniform-" + std::to_string(opt.budget_k);
  const MethodResult* base = find(r, base_name);
  const MethodResult* oracle = find(r, "oracle");
  const std::vector<Comparison> cmp = base ? paired_comparisons(r, *base, opt.streams) : std::vector<Comparison>{};
  const OracleAnalysis oa = analyse_oracle(r);
  const Headroom hr = base ? oracle_headroom(r, *base) : Headroom{};  // the frontier runs on seed 0's windows
  ReportParts p;
  p.methods = method_table(r, opt);
  p.tests = tests_section(cmp, base_name);
  p.oracle = oracle_section(r, opt, oa, hr, base_name);
  p.agreement = agreement_section(r, oa);
  p.learned = learned_section(r, base, base_name);
  p.calibration = calibration_section(r);
  p.costs = cost_section(r, opt);
  p.criteria = criteria_section(evaluate_criteria(r, opt, oa), oa, opt.criteria);
  // adapt runs this comparison on its own config section
  const std::string section = provenance.value("produced_by", "") == "ponder adapt" ? "adapt" : "compare";
  p.answer = answer_text(r, opt, cmp, hr, base_name, section);
  p.degenerate = degenerate_reasons(r, opt.criteria);
  if (!base)  // a report with every comparison empty must say why
    p.degenerate.insert(p.degenerate.begin(), section + ".methods has no " + base_name + " (" + section + ".budget_k = " +
                        std::to_string(opt.budget_k) + "): nothing to test the methods against");
  p.checked = degeneracy_checks(r);
  p.ties = oa.tie_share;
  p.best_method = best_method_name(r);

  const ordered_json out = results_json(r, opt, provenance, p);
  util::write_atomically(dir + "/results.json", out.dump(1) + "\n");
  write_report_md(r, opt, provenance, p, out["options"]["mode"].get<std::string>(), dir + "/report.md");
  // The figures last: a machine without gnuplot then fails naming it with the results and report already written.
  std::vector<std::string> shown;  // the oracle beside the best non-uniform method
  if (oracle) shown.push_back(oracle->name);
  if (!p.best_method.empty()) shown.push_back(p.best_method);
  if (!shown.empty()) write_tokens_html(r, shown, dir + "/tokens.html");
  write_k_hist(r, r.k_options, dir);
  return p.methods.md;
}

}  // namespace ponder::cli
