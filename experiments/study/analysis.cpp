#include "experiments/study/analysis.h"

#include "experiments/study/result_util.h"
#include "stats/rliable.h"

namespace ponder::cli {
namespace {

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

// The uniform methods with K ≥ 1 that ran, by K.
std::vector<const MethodResult*> uniform_steps(const CompareResult& r) {
  std::vector<const MethodResult*> out;
  for (const MethodResult& m : r.methods)
    if (m.kind == methods::MethodKind::Uniform && m.name != "uniform-0") out.push_back(&m);
  return out;
}

double tie_share(const OracleUnits& u) {
  if (u.tied.empty()) return NAN;
  double n = 0;
  for (double t : u.tied) n += t;
  return n / double(u.tied.size());
}

// Criterion 1: some adaptive method within `quality` of uniform-4's bpb at `flops` fewer total FLOPs, by a one-sided
// non-inferiority test (Holm across methods); not testable when uniform-4 equals uniform-1 on every window or a
// cheaper uniform schedule clears the same bar.
void quality_criterion(const CompareResult& r, const CompareOptions& opt, CriteriaVerdicts& v) {
  const Criteria& cr = opt.criteria;
  const MethodResult *u4 = find(r, "uniform-4"), *u1 = find(r, "uniform-1");
  v.quality_detail = "uniform-4 was not run";
  if (!u4) return;
  if (u1 && same_windows(*u4, *u1)) {
    v.quality_detail = "uniform-4 gives the same bits/byte as uniform-1 on every window, so quality \"within 1 % of "
                       "uniform-4\" is met by spending fewer steps on anything";
    return;
  }
  const double b4 = seed_mean(*u4, bpb_of), f4 = seed_mean(*u4, total_of);
  std::vector<double> ps;
  std::vector<std::string> names;
  std::vector<std::pair<double, double>> quality_cost;
  for (const MethodResult& m : r.methods) {
    if (reads_labels(m) || m.kind == methods::MethodKind::Uniform) continue;
    // one-sided non-inferiority: H0 bpb(m) ≥ (1 + quality)·bpb(uniform-4), per window
    const stats::TTest t = stats::paired_t_test(paired_differences(m, *u4, opt.streams, 1 + cr.quality));
    ps.push_back(std::isfinite(t.p_value) ? (t.mean < 0 ? t.p_value / 2 : 1 - t.p_value / 2) : 1.0);
    names.push_back(m.name);
    quality_cost.push_back({seed_mean(m, bpb_of) / b4 - 1, 1 - seed_mean(m, total_of) / f4});
  }
  v.quality_detail = "no adaptive method was run";
  if (ps.empty()) return;
  std::string cheaper;  // a cheaper uniform schedule that clears the bar makes the criterion uninformative
  for (const MethodResult& m : r.methods) {
    if (m.kind != methods::MethodKind::Uniform || m.name == "uniform-4") continue;
    const double dq = seed_mean(m, bpb_of) / b4 - 1, dc = 1 - seed_mean(m, total_of) / f4;
    if (dq <= cr.quality && dc >= cr.flops && cheaper.empty())
      cheaper = m.name + " clears the same bar (bpb " + fmt("%+.2f%%", 100 * dq) + ", FLOPs " +
                fmt("%+.1f%%", -100 * dc) + "), so the bar says nothing about adaptive allocation; the paired tests "
                "at equal FLOPs decide that";
  }
  const std::vector<double> holm = stats::holm(ps);
  std::string d;
  bool any = false;
  for (size_t i = 0; i < names.size(); ++i) {
    const bool ok = quality_cost[i].first <= cr.quality && quality_cost[i].second >= cr.flops && holm[i] < cr.alpha;
    any = any || ok;
    d += names[i] + ": bpb " + fmt("%+.2f%%", 100 * quality_cost[i].first) + ", FLOPs " +
         fmt("%+.1f%%", -100 * quality_cost[i].second) + ", non-inferiority Holm p " + fmt("%.3g", holm[i]) +
         (ok ? " (meets it)" : "") + "; ";
  }
  v.quality = !cheaper.empty() ? Verdict::NotTestable : any ? Verdict::Met : Verdict::NotMet;
  v.quality_detail = cheaper.empty() ? d : cheaper + ". " + d;
}

}  // namespace

std::vector<Comparison> paired_comparisons(const CompareResult& r, const MethodResult& base, bool streams) {
  std::vector<Comparison> cmp;
  for (const MethodResult& m : r.methods) {
    if (m.name == base.name || m.kind == methods::MethodKind::Oracle || m.kind == methods::MethodKind::Uniform) continue;
    Comparison c;
    c.method = m.name;
    const std::vector<double> a = all_windows(m), b = all_windows(base), d = paired_differences(m, base, streams);
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
  std::vector<int> family;
  for (const Comparison& c : cmp) {
    ps.push_back(std::isfinite(c.t_p) ? c.t_p : 1.0);
    family.push_back(test_family(*find(r, c.method)));
  }
  const std::vector<double> holm = stats::within_families(ps, family, stats::holm),
                            bonf = stats::within_families(ps, family, stats::bonferroni);
  for (size_t i = 0; i < cmp.size(); ++i) {
    cmp[i].holm = holm[i];
    cmp[i].bonferroni = bonf[i];
  }
  return cmp;
}

// The frontier runs on seed 0's windows (or the streams), so its best point within the baseline's FLOPs is
// paired window by window with the baseline's seed 0: the interval resamples those windows.
bool headroom_short_of_budget(const CompareResult& r, const Headroom& h) {
  if (!(h.base_flops > 0) || !(h.flops < 0.9 * h.base_flops)) return false;
  for (const FrontierPoint& p : r.frontier)
    if (p.base_per_token + p.inner_per_token > h.base_flops) return true;
  return false;
}

Headroom oracle_headroom(const CompareResult& r, const MethodResult& base) {
  Headroom h;
  h.base_flops = base.seeds.front().total_per_token();
  const MethodResult* u = &base;
  for (const MethodResult& m : r.methods)
    if (m.kind == methods::MethodKind::Uniform && !m.seeds.empty() && m.seeds.front().total_per_token() <= h.base_flops * (1 + 1e-9) &&
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

OracleAnalysis analyse_oracle(const CompareResult& r) {
  OracleAnalysis a;
  const OracleUnits ou = r.oracle_units.distinct();
  a.score_corr = {{"loss", spearman_finite(ou.k, ou.loss)}, {"entropy", spearman_finite(ou.k, ou.entropy)},
                  {"ttt-loss", spearman_finite(ou.k, ou.ttt_loss)}, {"gradnorm", spearman_finite(ou.k, ou.grad_norm)}};
  for (const auto& [name, s] : a.score_corr)
    if (std::isfinite(s.rho) && !(a.best_corr >= s.rho)) a.best_corr = s.rho;
  a.tie_share = tie_share(ou);
  const MethodResult* oracle = find(r, "oracle");
  if (!oracle) return a;
  const std::vector<double> ok(oracle->unit_k.begin(), oracle->unit_k.end());
  for (const MethodResult& m : r.methods) {
    if (m.kind == methods::MethodKind::Oracle || m.kind == methods::MethodKind::Uniform) continue;
    if (m.unit_tokens != oracle->unit_tokens) {  // decisions about different spans of text: not comparable
      a.policy_rho.push_back({m.name, NAN});
      continue;
    }
    const double rho = spearman_finite(std::vector<double>(m.unit_k.begin(), m.unit_k.end()), ok).rho;
    a.policy_rho.push_back({m.name, rho});
    if (std::isfinite(rho) && !reads_labels(m) && !(a.best_policy_rho >= rho)) a.best_policy_rho = rho;
  }
  return a;
}

bool same_windows(const MethodResult& a, const MethodResult& b) {
  const std::vector<double> x = all_windows(a), y = all_windows(b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::abs(x[i] - y[i]) > 1e-12) return false;
  return true;
}

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

DegeneracyChecks degeneracy_checks(const CompareResult& r) {
  return {uniform_steps(r).size() >= 2, std::isfinite(tie_share(r.oracle_units))};
}

// Criteria 2 and 3 correlate with the oracle's K, so they are not testable when ties decided most of it.
CriteriaVerdicts evaluate_criteria(const CompareResult& r, const CompareOptions& opt, const OracleAnalysis& oa) {
  CriteriaVerdicts v;
  quality_criterion(r, opt, v);
  const Criteria& cr = opt.criteria;
  const bool ties = !std::isfinite(oa.tie_share) || oa.tie_share > cr.max_tie_share;
  v.tie_text = std::isfinite(oa.tie_share) ? fmt("%.0f %%", 100 * oa.tie_share) + " of the oracle's decisions were ties"
                                           : "no oracle decisions";
  auto verdict = [ties](double x, double bar) {
    return ties ? Verdict::NotTestable : std::isfinite(x) && x > bar ? Verdict::Met : Verdict::NotMet;
  };
  v.difficulty = verdict(oa.best_corr, cr.difficulty_corr);
  v.policy = verdict(oa.best_policy_rho, cr.policy_rho);
  return v;
}

}  // namespace ponder::cli
