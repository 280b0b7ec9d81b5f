#include "experiments/report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "experiments/plots.h"
#include "experiments/result_json.h"
#include "experiments/frontier.h"
#include "experiments/result_util.h"
#include "stats/stats.h"

namespace ponder::cli {
namespace {

using nlohmann::ordered_json;

struct Comparison {
  std::string method;
  double delta = 0;  // mean bpb(method) − bpb(baseline), per window
  double t_p = NAN, w_p = NAN, holm = NAN, bonferroni = NAN, dz = NAN, p_improve = NAN, p_improve_unpaired = NAN;
  int64_t w_n = 0;      // Wilcoxon: differences left after dropping zeros
  bool w_exact = false;  // Wilcoxon: exact distribution (else normal approximation)
};

// Paired probability of improvement: the share of paired windows where the method's bits/byte is below the
// baseline's (d < 0), ties counting one half.
double paired_improvement(const std::vector<double>& d) {
  double n = 0;
  for (double x : d) n += x < 0 ? 1.0 : x == 0 ? 0.5 : 0.0;
  return d.empty() ? NAN : n / double(d.size());
}

// The frontier point with the best bpb at no more than `flops` per token (null if none is).
const FrontierPoint* best_within(const std::vector<FrontierPoint>& f, double flops) {
  const FrontierPoint* best = nullptr;
  for (const FrontierPoint& p : f)
    if (p.base_per_token + p.inner_per_token <= flops * (1 + 1e-9) && !(best && best->bpb <= p.bpb)) best = &p;
  return best;
}

}  // namespace

// The frontier runs on seed 0's windows (or the streams), so its best point within the baseline's FLOPs is
// paired window by window with the baseline's seed 0: the interval resamples those windows.
Headroom oracle_headroom(const CompareResult& r, const MethodResult& base) {
  Headroom h;
  h.base_flops = base.seeds.front().total_per_token();
  const MethodResult* u = &base;
  for (const MethodResult& m : r.methods)
    if (m.kind == "uniform" && !m.seeds.empty() && m.seeds.front().total_per_token() <= h.base_flops * (1 + 1e-9) &&
        m.seeds.front().bpb < u->seeds.front().bpb)
      u = &m;
  h.uniform = u->name;
  const FrontierPoint* p = best_within(r.frontier, h.base_flops);
  if (!p) return h;
  h.mu = p->mu;
  h.flops = p->base_per_token + p->inner_per_token;
  h.bpb = u->seeds.front().bpb - p->bpb;
  const std::vector<double>& b = u->seeds.front().window_bpb;
  if (p->window_bpb.size() != b.size() || b.size() < 2) return h;
  stats::ScoreMatrix d(b.size(), std::vector<double>(1));
  for (size_t w = 0; w < b.size(); ++w) h.d.push_back(d[w][0] = b[w] - p->window_bpb[w]);
  stats::BootstrapOptions bo;
  bo.seed = 2024;
  const stats::Interval ci = stats::stratified_bootstrap_ci(d, stats::aggregate_mean, bo);
  h.lo = ci.lo;
  h.hi = ci.hi;
  h.n = int64_t(b.size());
  return h;
}

namespace {

// The uniform methods with K ≥ 1 that ran, by K.
std::vector<const MethodResult*> uniform_steps(const CompareResult& r) {
  std::vector<const MethodResult*> out;
  for (const MethodResult& m : r.methods)
    if (m.kind == "uniform" && m.name != "uniform-0") out.push_back(&m);
  return out;
}

// True when `a` and `b` give the same bits/byte on every window.
bool same_windows(const MethodResult& a, const MethodResult& b) {
  const std::vector<double> x = all_windows(a), y = all_windows(b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::abs(x[i] - y[i]) > 1e-12) return false;
  return true;
}

std::string setup_text(const CompareResult& r, const CompareOptions& opt) {
  if (!opt.streams)
    return std::to_string(opt.seeds) + " seeds × " + std::to_string(opt.windows_per_seed) + " held-out windows of " +
           std::to_string(opt.seq_len) + " bytes (a seed fixes the windows and the random policy's draws; every method "
           "sees the same windows, so comparisons are paired by window).";
  return std::to_string(r.stream_names.size()) + " held-out streams, each read whole with its state carried, " +
         std::to_string(r.eval_tokens) + " scored tokens = " +
         fmt("%.1f", r.split_tokens > 0 ? 100.0 * double(r.eval_tokens) / double(r.split_tokens) : 0.0) +
         " % of the split (caps in `streams:`), × " + std::to_string(opt.seeds) +
         " seeds (a seed fixes the methods' own random draws; every method reads the same streams, so comparisons are "
         "paired by stream; per-stream bits/byte are in results.json as window_bpb).";
}

std::string degenerate_md(const std::vector<std::string>& why) {
  if (why.empty()) return "**Not degenerate**: some decision changes some output, and the oracle's choices are not "
                          "mostly ties.\n\n";
  std::string s = "**Degenerate by construction** — no method can show anything in this comparison:\n\n";
  for (const std::string& w : why) s += "- " + w + ".\n";
  return s + "\n";
}

// Share of the oracle's decisions that a tie between options decided (NaN without oracle units).
double tie_share(const OracleUnits& u) {
  if (u.tied.empty()) return NAN;
  double n = 0;
  for (double t : u.tied) n += t;
  return n / double(u.tied.size());
}

// Why this comparison cannot show anything whatever the methods do; empty when it can.
std::vector<std::string> degenerate_reasons(const CompareResult& r, const Criteria& c) {
  std::vector<std::string> why;
  const std::vector<const MethodResult*> u = uniform_steps(r);
  bool all_same = u.size() >= 2;
  for (size_t i = 1; i < u.size() && all_same; ++i) all_same = same_windows(*u[0], *u[i]);
  if (all_same)
    why.push_back("every uniform-K with K ≥ 1 gives the same bits/byte on every window, so no choice between "
                  "K ≥ 1 can change an output (see the carry factor): methods can differ only in where they SKIP");
  const double ties = tie_share(r.oracle_units);
  if (std::isfinite(ties) && ties > c.max_tie_share)
    why.push_back("the oracle's K was decided by a tie between options in " + fmt("%.0f", 100 * ties) +
                  " % of units, so its K distribution and every correlation with it measure the tie-break rule");
  return why;
}

}  // namespace

std::string write_compare_outputs(const CompareResult& r, const CompareOptions& opt, const ordered_json& provenance,
                                  const std::string& dir) {
  const std::string base_name = "uniform-" + std::to_string(opt.budget_k);
  const MethodResult* base = find(r, base_name);
  const MethodResult* u4 = find(r, "uniform-4");
  const MethodResult* oracle = find(r, "oracle");
  stats::BootstrapOptions bo;
  bo.seed = 2024;

  // ---- per-method summaries with CIs
  ordered_json methods = ordered_json::array();
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
    stats::Interval ci = stats::stratified_bootstrap_ci(x, stats::aggregate_mean, bo);
    const double iqm = stats::iqm(all_windows(m));
    table << "| " << m.name << " | " << fmt("%.4f", ci.point) << " [" << fmt("%.4f", ci.lo) << ", "
          << fmt("%.4f", ci.hi) << "] | " << fmt("%.4f", iqm) << " | " << fmt("%.4g", seed_mean(m, total_of)) << " | "
          << fmt("%.4g", seed_mean(m, inner_of)) << " | " << fmt("%.3g", seed_mean(m, overhead_of)) << " | "
          << fmt("%.2f", seed_mean(m, k_of)) << " |\n";
    const ordered_json seeds = m.seeds, curve = m.curve;
    methods.push_back({{"name", m.name}, {"kind", m.kind}, {"detail", m.detail}, {"unit_tokens", m.unit_tokens},
                       {"bpb", {{"mean", ci.point}, {"ci95", {ci.lo, ci.hi}}, {"iqm", iqm}}},
                       {"k_options", r.k_options}, {"k_hist", m.k_hist}, {"seeds", seeds}});
    if (m.kind != "uniform" && m.kind != "oracle")
      methods.back()["frontier_delta"] = frontier_delta_json(frontier_delta(r, m, opt.streams));
    if (!m.curve.empty()) {
      methods.back()["train_seconds"] = m.train_seconds;
      methods.back()["training_curve"] = curve;
    }
  }

  // ---- paired tests against uniform at the same budget (windows are paired across methods)
  std::vector<Comparison> cmp;
  if (base) {
    for (const MethodResult& m : r.methods) {
      if (m.name == base->name || m.kind == "oracle" || m.kind == "uniform") continue;
      Comparison c;
      c.method = m.name;
      const std::vector<double> a = all_windows(m), b = all_windows(*base), d = paired_differences(m, *base, opt.streams);
      c.delta = stats::mean(d);
      c.t_p = stats::paired_t_test(d).p_value;
      const stats::Wilcoxon w = stats::wilcoxon_signed_rank(d);
      c.w_p = w.p_value;
      c.w_n = w.n;
      c.w_exact = w.exact;
      c.dz = stats::cohens_dz(d);
      c.p_improve = paired_improvement(d);
      c.p_improve_unpaired = stats::probability_greater(b, a);  // P(a random baseline window > a random method window)
      cmp.push_back(c);
    }
    std::vector<double> ps;
    for (const Comparison& c : cmp) ps.push_back(std::isfinite(c.t_p) ? c.t_p : 1.0);
    if (!ps.empty()) {
      std::vector<double> holm = stats::holm(ps), bonf = stats::bonferroni(ps);
      for (size_t i = 0; i < cmp.size(); ++i) {
        cmp[i].holm = holm[i];
        cmp[i].bonferroni = bonf[i];
      }
    }
  }
  std::ostringstream tests;
  tests << "| method | Δbpb vs " << base_name << " | paired t p | Wilcoxon p (n after zeros, method) | Holm p (t) | "
        << "Bonferroni p (t) | Cohen's d_z | P(improvement), paired |\n|---|---|---|---|---|---|---|---|\n";
  ordered_json cmp_json = ordered_json::array();
  for (const Comparison& c : cmp) {
    tests << "| " << c.method << " | " << fmt("%+.4f", c.delta) << " | " << fmt("%.3g", c.t_p) << " | "
          << fmt("%.3g", c.w_p) << " (" << c.w_n << ", " << (c.w_exact ? "exact" : "normal") << ") | " << fmt("%.3g", c.holm) << " | " << fmt("%.3g", c.bonferroni) << " | "
          << fmt("%+.3f", c.dz) << " | " << fmt("%.3f", c.p_improve) << " |\n";
    cmp_json.push_back({{"method", c.method}, {"baseline", base_name}, {"delta_bpb", c.delta}, {"paired_t_p", c.t_p},
                        {"wilcoxon_p", c.w_p}, {"holm_p", c.holm}, {"bonferroni_p", c.bonferroni},
                        {"wilcoxon_n", c.w_n}, {"wilcoxon_exact", c.w_exact}, {"cohens_dz", c.dz},
                        {"p_improvement", c.p_improve}, {"p_improvement_unpaired", c.p_improve_unpaired}});
  }

  // ---- oracle analysis
  const OracleUnits& ou = r.oracle_units;
  std::ostringstream oracle_md;
  ordered_json oracle_json;
  std::vector<std::pair<std::string, stats::Correlation>> corr = {
      {"loss", spearman_finite(ou.k, ou.loss)}, {"entropy", spearman_finite(ou.k, ou.entropy)},
      {"ttt-loss", spearman_finite(ou.k, ou.ttt_loss)}, {"gradnorm", spearman_finite(ou.k, ou.grad_norm)}};
  double best_corr = NAN;
  for (auto& [name, s] : corr) {
    oracle_json["spearman_oracle_k"][name] = {{"rho", s.rho}, {"p", s.p_value}};
    if (std::isfinite(s.rho) && !(best_corr >= s.rho)) best_corr = s.rho;
  }
  // The frontier runs on seed 0's windows: compare it with the baseline on the same windows.
  const Headroom hr = base ? oracle_headroom(r, *base) : Headroom{};
  const double headroom = hr.bpb, base_flops = hr.base_flops;
  oracle_json["headroom_bpb_at_budget"] = headroom;
  oracle_json["headroom"] = {{"bpb", hr.bpb}, {"ci95", {hr.lo, hr.hi}}, {"n_paired", hr.n}, {"mu", hr.mu},
                             {"total_flops_per_token", hr.flops}, {"budget_total_flops_per_token", hr.base_flops},
                             {"fraction_of_budget", hr.flops / hr.base_flops},
                             {"budget", base_name}, {"uniform", hr.uniform}};
  ordered_json frontier = ordered_json::array();
  for (const FrontierPoint& p : r.frontier)
    frontier.push_back({{"mu", p.mu}, {"bpb", p.bpb}, {"inner_flops_per_token", p.inner_per_token},
                        {"total_flops_per_token", p.base_per_token + p.inner_per_token}, {"mean_k", p.mean_k},
                        {"window_bpb", p.window_bpb}});
  oracle_json["frontier"] = frontier;
  oracle_md << "Spearman correlation of the oracle's K with each difficulty score (over " << ou.k.size()
            << " units; scores are those the policies see, from completed units):\n\n| score | ρ | p |\n|---|---|---|\n";
  for (auto& [name, s] : corr) oracle_md << "| " << name << " | " << fmt("%+.3f", s.rho) << " | " << fmt("%.3g", s.p_value) << " |\n";
  oracle_md << "\nOracle frontier (per unit minimise loss + μ·inner cost / base cost; seed 0's windows):\n\n"
            << "| μ | bpb | FLOPs/token | mean K |\n|---|---|---|---|\n";
  for (const FrontierPoint& p : r.frontier)
    oracle_md << "| " << p.mu << " | " << fmt("%.4f", p.bpb) << " | " << fmt("%.4g", p.base_per_token + p.inner_per_token)
              << " | " << fmt("%.2f", p.mean_k) << " |\n";
  oracle_md << "\nHeadroom of the oracle over the uniform frontier at no more than " << base_name
            << "'s FLOPs per token (" << fmt("%.4g", base_flops) << "; best uniform there: " << hr.uniform
            << "; seed 0's windows): " << fmt("%+.4f", headroom) << " bits per byte, 95% CI ["
            << fmt("%+.4f", hr.lo) << ", " << fmt("%+.4f", hr.hi) << "] paired over " << hr.n
            << (opt.streams ? " streams" : " windows") << " (frontier point μ = " << fmt("%g", hr.mu) << ", "
            << fmt("%.4g", hr.flops) << " FLOPs/token = " << fmt("%.1f", 100 * hr.flops / base_flops)
            << " % of the budget; positive = the oracle is better).\n";
  // decisions of each policy vs the oracle's on the same units
  std::ostringstream agree;
  ordered_json agree_json;
  double best_policy_rho = NAN;
  if (oracle) {
    agree << "\nSpearman ρ between each method's K and the oracle's K on the same units (same windows, unit by "
             "unit; the trajectories differ, so this measures agreement of placement):\n\n| method | ρ |\n|---|---|\n";
    std::vector<double> ok(oracle->unit_k.begin(), oracle->unit_k.end());
    for (const MethodResult& m : r.methods) {
      if (m.kind == "oracle" || m.kind == "uniform") continue;
      if (m.unit_tokens != oracle->unit_tokens) {  // decisions about different spans of text: not comparable
        agree << "| " << m.name << " | — (" << m.unit_tokens << "-token units) |\n";
        continue;
      }
      std::vector<double> mk(m.unit_k.begin(), m.unit_k.end());
      double rho = spearman_finite(mk, ok).rho;
      agree_json[m.name] = rho;
      agree << "| " << m.name << " | " << fmt("%+.3f", rho) << " |\n";
      if (std::isfinite(rho) && !(best_policy_rho >= rho)) best_policy_rho = rho;
    }
  }

  // ---- learned methods: training, overhead against what they save
  std::ostringstream learned;
  for (const MethodResult& m : r.methods) {
    if (m.curve.empty()) continue;
    const rl::IterationStats &first = m.curve.front(), &last = m.curve.back();
    learned << "- `" << m.name << "`: " << m.detail << ", trained in " << fmt("%.0f", m.train_seconds)
            << " s. Training (sampled decisions; each iteration sees other "
            << "windows, so the loss moves with the text too), first → last iteration: unit loss " << fmt("%.4f", first.loss) << " → " << fmt("%.4f", last.loss)
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

  // ---- cost multiples
  std::ostringstream costs;
  static const std::map<int, double> assumed = {{0, 1}, {1, 3}, {2, 5}, {4, 12}};
  costs << "| K | measured (base + inner) / base | assumed multiple |\n|---|---|---|\n";
  ordered_json cost_json = ordered_json::array();
  for (size_t i = 0; i < opt.step_options.size(); ++i) {
    int k = opt.step_options[i];
    auto it = assumed.find(k);
    costs << "| " << k << " | " << fmt("%.3f×", r.k_cost_multiple[i]) << " | "
          << (it == assumed.end() ? std::string("—") : fmt("%.0f×", it->second)) << " |\n";
    cost_json.push_back({{"k", k}, {"measured_multiple", r.k_cost_multiple[i]}});
  }

  // ---- success criteria (docs/method.md §6.4): met, not met, or not testable where the design cannot tell
  const Criteria& cr = opt.criteria;
  const std::vector<std::string> degenerate = degenerate_reasons(r, cr);
  const double ties = tie_share(r.oracle_units);
  std::ostringstream crit;
  enum class Verdict { Met, NotMet, NotTestable };
  Verdict c1 = Verdict::NotTestable;
  std::string c1_detail = "uniform-4 was not run";
  const MethodResult* u1 = find(r, "uniform-1");
  if (u4 && u1 && same_windows(*u4, *u1)) {
    c1_detail = "uniform-4 gives the same bits/byte as uniform-1 on every window, so quality \"within 1 % of "
                "uniform-4\" is met by spending fewer steps on anything";
  } else if (u4) {
    const double b4 = seed_mean(*u4, bpb_of), f4 = seed_mean(*u4, total_of);
    std::vector<double> ps;
    std::vector<std::string> names;
    std::vector<std::pair<double, double>> quality_cost;
    for (const MethodResult& m : r.methods) {
      if (m.kind == "oracle" || m.kind == "uniform") continue;
      // one-sided non-inferiority: H0 bpb(m) ≥ (1 + quality)·bpb(uniform-4), per window
      const stats::TTest t = stats::paired_t_test(paired_differences(m, *u4, opt.streams, 1 + cr.quality));
      ps.push_back(std::isfinite(t.p_value) ? (t.mean < 0 ? t.p_value / 2 : 1 - t.p_value / 2) : 1.0);
      names.push_back(m.name);
      quality_cost.push_back({seed_mean(m, bpb_of) / b4 - 1, 1 - seed_mean(m, total_of) / f4});
    }
    c1_detail = "no adaptive method was run";
    std::string cheaper;  // a cheaper uniform schedule that clears the bar makes the criterion uninformative
    for (const MethodResult& m : r.methods) {
      if (m.kind != "uniform" || m.name == "uniform-4") continue;
      const double dq = seed_mean(m, bpb_of) / b4 - 1, dc = 1 - seed_mean(m, total_of) / f4;
      if (dq <= cr.quality && dc >= cr.flops && cheaper.empty())
        cheaper = m.name + " clears the same bar (bpb " + fmt("%+.2f%%", 100 * dq) + ", FLOPs " +
                  fmt("%+.1f%%", -100 * dc) + "), so the bar says nothing about adaptive allocation; the paired tests "
                  "at equal FLOPs decide that";
    }
    if (!ps.empty()) {
      const std::vector<double> holm = stats::holm(ps);
      std::ostringstream d;
      bool any = false;
      for (size_t i = 0; i < names.size(); ++i) {
        const bool ok = quality_cost[i].first <= cr.quality && quality_cost[i].second >= cr.flops && holm[i] < cr.alpha;
        any = any || ok;
        d << names[i] << ": bpb " << fmt("%+.2f%%", 100 * quality_cost[i].first) << ", FLOPs "
          << fmt("%+.1f%%", -100 * quality_cost[i].second) << ", non-inferiority Holm p " << fmt("%.3g", holm[i])
          << (ok ? " (meets it)" : "") << "; ";
      }
      c1 = !cheaper.empty() ? Verdict::NotTestable : any ? Verdict::Met : Verdict::NotMet;
      c1_detail = cheaper.empty() ? d.str() : cheaper + ". " + d.str();
    }
  }
  const bool oracle_ties = !std::isfinite(ties) || ties > cr.max_tie_share;
  const std::string tie_text = std::isfinite(ties) ? fmt("%.0f %%", 100 * ties) + " of the oracle's decisions were ties"
                                                   : "no oracle decisions";
  const Verdict c2 = oracle_ties ? Verdict::NotTestable
                                 : std::isfinite(best_corr) && best_corr > cr.difficulty_corr ? Verdict::Met : Verdict::NotMet;
  const Verdict c3 = oracle_ties ? Verdict::NotTestable
                                 : std::isfinite(best_policy_rho) && best_policy_rho > cr.policy_rho ? Verdict::Met
                                                                                                     : Verdict::NotMet;
  auto mark = [](Verdict v) {
    return v == Verdict::Met ? "**met**" : v == Verdict::NotMet ? "**not met**" : "**not testable here**";
  };
  auto verdict_json = [](Verdict v) -> ordered_json {
    if (v == Verdict::NotTestable) return "not testable";
    return v == Verdict::Met;
  };
  crit << "- Quality within " << fmt("%g", 100 * cr.quality) << " % of uniform-4 at ≥ " << fmt("%g", 100 * cr.flops)
       << " % lower net FLOPs, p < " << fmt("%g", cr.alpha) << " after Holm correction: " << mark(c1) << ". "
       << c1_detail << "\n"
       << "- Oracle-K / difficulty correlation ρ > " << fmt("%g", cr.difficulty_corr) << ": " << mark(c2)
       << " (best Spearman ρ " << fmt("%+.3f", best_corr) << "; " << tie_text << ").\n"
       << "- Policy / oracle Spearman ρ > " << fmt("%g", cr.policy_rho) << ": " << mark(c3) << " (best "
       << fmt("%+.3f", best_policy_rho) << "; " << tie_text << ").\n"
       << "\nThresholds come from the config (`compare.criteria_*`).\n";

  // ---- the answer, in words computed from the numbers above
  std::ostringstream answer;
  {
    const Comparison* best = nullptr;
    for (const Comparison& c : cmp)
      if (!best || c.delta < best->delta) best = &c;
    if (!best) {
      answer << "No adaptive method was compared with " << base_name << ".";
    } else {
      const bool sig = std::isfinite(best->holm) && best->holm < 0.05;
      answer << "Best adaptive method at the budget of " << base_name << ": `" << best->method << "`, Δ = "
             << fmt("%+.4f", best->delta) << " bits per byte per window (Holm-corrected paired t p = "
             << fmt("%.3g", best->holm) << "): "
             << (best->delta == 0 ? "identical to uniform on every window"
                 : sig ? (best->delta < 0 ? "significantly better than uniform" : "significantly worse than uniform")
                       : "not significantly different from uniform")
             << ". The oracle's headroom over the uniform frontier at no more than that compute is "
             << fmt("%+.4f", headroom) << " bits per byte (95% CI [" << fmt("%+.4f", hr.lo) << ", "
             << fmt("%+.4f", hr.hi) << "]).";
      if (!hr.uniform.empty() && hr.uniform != base_name)
        answer << " Note: `" << hr.uniform << "` is better than " << base_name << " at less compute, so the uniform "
               << "frontier at this budget is " << hr.uniform << ", and a method must beat it, not " << base_name
               << ", to beat uniform.";
    }
    bool dead = !r.carry_token_factor.empty();
    for (double f : r.carry_token_factor) dead = dead && f == 0;
    answer << "\n\nCarry factor per TTT layer (η's last-row token factor, which scales every carried update; "
              "model.token_factor says how it is parametrised): ";
    for (size_t i = 0; i < r.carry_token_factor.size(); ++i)
      answer << (i ? ", " : "") << fmt("%.4g", r.carry_token_factor[i]);
    answer << ".";
    if (dead && opt.rollout.mode == ttt::StepMode::Carry)
      answer << " It is 0 in every layer: the trained model hands the same state (its W0) to every unit, so in "
                "carry mode all K ≥ 1 give identical outputs, extra steps only cost FLOPs, and what TTT contributes "
                "(uniform-1 vs uniform-0) comes from updates within each unit. Methods that differ from uniform "
                "here differ only in where they SKIP.";
  }

  // ---- files
  write_k_hist(r, r.k_options, dir);
  std::string best_method;
  double best_bpb = INFINITY;
  for (const MethodResult& m : r.methods)
    if (m.kind != "oracle" && m.kind != "uniform" && seed_mean(m, bpb_of) < best_bpb) {
      best_bpb = seed_mean(m, bpb_of);
      best_method = m.name;
    }
  std::vector<std::string> shown;  // the oracle beside the best non-uniform method
  if (oracle) shown.push_back(oracle->name);
  if (!best_method.empty()) shown.push_back(best_method);
  if (!shown.empty()) write_tokens_html(r, shown, dir + "/tokens.html");

  ordered_json out = provenance;
  out["options"] = {{"seeds", opt.seeds}, {"windows_per_seed", opt.windows_per_seed}, {"seq_len", opt.seq_len},
                    {"step_options", opt.step_options}, {"budget", base_name}, {"levels", {opt.low, opt.high}},
                    {"calibration_windows", opt.calib_windows}, {"oracle_lookahead", opt.oracle_lookahead},
                    {"mode", opt.rollout.mode == ttt::StepMode::Carry ? "carry" : "prefix"},
                    {"path", opt.rollout.path == ttt::InnerPath::Dual ? "dual" : "iterative"}};
  out["budget_inner_flops_per_token"] = r.budget_inner_per_token;
  out["cost_multiples"] = cost_json;
  out["methods"] = methods;
  out["comparisons"] = cmp_json;
  out["oracle"] = oracle_json;
  out["models"] = 1;  // one trained model: its intervals hold document sampling only (ponder compare with several
                      // --checkpoint gives the statistics over models)
  if (oracle_json.contains("headroom"))
    out["oracle_headroom"] = {{"mean", oracle_json["headroom"]["bpb"]}, {"ci", oracle_json["headroom"]["ci95"]}};
  out["policy_oracle_spearman"] = agree_json;
  out["degenerate"] = {{"value", !degenerate.empty()}, {"reason", ordered_json(degenerate)}};
  out["oracle_tie_share"] = ties;
  out["success_criteria"] = {{"quality_near_uniform4_at_fewer_flops", verdict_json(c1)},
                             {"oracle_difficulty_correlation", verdict_json(c2)},
                             {"policy_oracle_spearman", verdict_json(c3)},
                             {"thresholds", {{"quality", cr.quality}, {"flops", cr.flops}, {"alpha", cr.alpha},
                                             {"difficulty_corr", cr.difficulty_corr}, {"policy_rho", cr.policy_rho},
                                             {"max_tie_share", cr.max_tie_share}}}};
  out["carry_token_factor"] = r.carry_token_factor;
  if (opt.streams) {
    out["streams"] = r.stream_names;
    out["eval_tokens"] = r.eval_tokens;
    out["scored_fraction"] = r.split_tokens > 0 ? double(r.eval_tokens) / double(r.split_tokens) : 0.0;
  }
  out["seconds"] = r.seconds;
  {
    std::ofstream f(dir + "/results.json");
    if (!f) throw std::runtime_error("cannot write " + dir + "/results.json");
    f << out.dump(1) << '\n';
  }

  std::ofstream md(dir + "/report.md");
  if (!md) throw std::runtime_error("cannot write " + dir + "/report.md");
  md << "# Does adaptive test-time training beat uniform at equal compute?\n\n"
     << "Produced by `ponder` " << provenance.value("version", "") << " (commit " << provenance.value("commit", "?")
     << ", " << provenance.value("build_type", "") << " build) on " << provenance.value("machine", "") << " with "
     << provenance.value("threads", 0) << " thread(s). Data: " << provenance.value("data", "") << " (sha256 "
     << provenance.value("data_sha256", "") << "). Every number below comes from this run; results.json holds them "
     << "all, per seed and per window.\n\n"
     << "Setup: " << setup_text(r, opt) << " Inner steps in `" << out["options"]["mode"].get<std::string>()
     << "` mode. Heuristics and `random` spend K=" << opt.low << " or K=" << opt.high << " per unit and are calibrated "
     << "on " << opt.calib_windows << " validation windows to the inner FLOPs per token of " << base_name << " ("
     << fmt("%.4g", r.budget_inner_per_token) << ").\n\n" << degenerate_md(degenerate) << "## Answer\n\n"
     << answer.str() << "\n\n## Results\n\n"
     << table.str() << "\nFLOPs are counted by the engine, not estimated: base forward + inner TTT steps actually run "
     << "+ policy overhead (features, probes).\n\n## Paired tests against " << base_name << " (same budget)\n\n"
     << "Per-window differences of bits per byte (negative = better than " << base_name << "); n = "
     << (opt.streams ? int64_t(r.stream_names.size()) : opt.seeds * opt.windows_per_seed)
     << (opt.streams ? " streams (each stream's difference averaged over the seeds, so a stream counts once)"
                     : " windows") << ".\n\n" << tests.str() << "\n" << frontier_markdown(r, opt.streams)
     << (learned.str().empty() ? std::string() : "\n## Learned policies\n\n" + learned.str() +
                                                      "\nTraining curves per iteration are in results.json.\n")
     << "\n## Success criteria (docs/method.md §6.4)\n\n" << crit.str() << "\n## Oracle\n\n"
     << (oracle ? "Greedy oracle: " + oracle->detail + ", bpb " + fmt("%.4f", seed_mean(*oracle, bpb_of)) + " at " +
                      fmt("%.4g", seed_mean(*oracle, total_of)) + " FLOPs/token (labels used: an upper bound, not a policy).\n\n"
                : std::string())
     << oracle_md.str() << agree.str() << "\n## Measured cost of inner steps\n\n" << costs.str()
     << "\n## Figures\n\n![Pareto](pareto.png)\n\n![Distance to the uniform frontier](forest.png)\n\n"
     << "![K histogram](k_hist.png)\n\n"
     << "[Per-token view of a held-out passage](tokens.html) under `" << best_method << "`.\n";
  return table.str();
}

}  // namespace ponder::cli
