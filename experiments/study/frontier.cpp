#include "experiments/study/frontier.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "experiments/study/result_util.h"
#include "stats/stats.h"

namespace ponder::cli {

namespace {

// The uniform schedules on the Pareto curve, by increasing total FLOPs: each beats every cheaper one.
std::vector<const MethodResult*> uniform_curve(const CompareResult& r) {
  std::vector<const MethodResult*> u;
  for (const MethodResult& m : r.methods)
    if (m.kind == methods::MethodKind::Uniform && !m.seeds.empty()) u.push_back(&m);
  std::sort(u.begin(), u.end(), [](const MethodResult* a, const MethodResult* b) {
    return seed_mean(*a, total_of) < seed_mean(*b, total_of);
  });
  std::vector<const MethodResult*> curve;
  for (const MethodResult* m : u)
    if (curve.empty() || seed_mean(*m, bpb_of) < seed_mean(*curve.back(), bpb_of)) curve.push_back(m);
  return curve;
}

}  // namespace

FrontierDelta frontier_delta(const CompareResult& r, const MethodResult& m, bool streams) {
  FrontierDelta f;
  const std::vector<const MethodResult*> curve = uniform_curve(r);
  if (curve.empty() || m.seeds.empty()) return f;
  const double flops = seed_mean(m, total_of);
  size_t hi = 0;
  while (hi < curve.size() && seed_mean(*curve[hi], total_of) < flops) ++hi;
  const MethodResult* a = curve[hi == 0 ? 0 : hi - 1];
  const MethodResult* b = curve[std::min(hi, curve.size() - 1)];
  f.outside = hi == 0 ? flops < seed_mean(*a, total_of) * (1 - 1e-9) : hi == curve.size();
  const double fa = seed_mean(*a, total_of), fb = seed_mean(*b, total_of);
  f.weight = a == b || fb <= fa ? 0.0 : (flops - fa) / (fb - fa);
  f.lower = a->name;
  f.upper = b->name;
  const std::vector<double> x = document_bpb(m, streams), ya = document_bpb(*a, streams), yb = document_bpb(*b, streams);
  for (size_t i = 0; i < x.size() && i < ya.size() && i < yb.size(); ++i)
    f.d.push_back(x[i] - ((1 - f.weight) * ya[i] + f.weight * yb[i]));
  if (f.d.empty()) return f;
  stats::BootstrapOptions bo;
  bo.seed = 2024;
  f.ci = stats::hierarchical_bootstrap_ci({f.d}, bo);  // one group: the bootstrap over documents
  f.mean = f.ci.point;
  return f;
}

nlohmann::ordered_json frontier_delta_json(const FrontierDelta& f) {
  return {{"mean", f.mean}, {"ci", {f.ci.lo, f.ci.hi}}, {"between", {f.lower, f.upper}}, {"weight", f.weight},
          {"outside_uniform_range", f.outside}};
}

std::string frontier_verdict(const stats::Interval& ci) {
  if (uniform_in_effect(ci)) return "identical to the uniform frontier on every document: uniform in effect";
  if (ci.hi < 0) return "better than uniform at equal compute";
  if (ci.lo > 0) return "worse than uniform at equal compute";
  return "not distinguishable from uniform at equal compute";
}

std::string frontier_answer(const CompareResult& r, const std::string& best, bool streams) {
  std::ostringstream a;
  const MethodResult* bm = find(r, best);
  const FrontierDelta fb = bm ? frontier_delta(r, *bm, streams) : FrontierDelta{};
  if (std::isnan(fb.mean)) return "";
  a << " Against the uniform frontier at its own FLOPs (" << fb.lower << (fb.lower == fb.upper ? "" : "–" + fb.upper)
    << "): Δ = " << fmt("%+.4f", fb.mean) << " [" << fmt("%+.4f", fb.ci.lo) << ", " << fmt("%+.4f", fb.ci.hi)
    << "], " << frontier_verdict(fb.ci) << ".";
  std::string below;
  int policies = 0;
  for (const MethodResult& m : r.methods) {
    if (m.kind == methods::MethodKind::Oracle || test_family(m) != 0) continue;
    ++policies;
    const FrontierDelta f = frontier_delta(r, m, streams);
    if (f.ci.hi < 0) below += (below.empty() ? "`" : ", `") + m.name + "` " + fmt("%+.4f", f.mean);
  }
  if (below.empty())
    a << " No policy of the " << policies << " compared lies below the uniform frontier (95% CI under 0).";
  else
    a << " Below the uniform frontier (95% CI under 0): " << below << ".";
  return a.str();
}

std::string frontier_markdown(const CompareResult& r, bool streams) {
  std::ostringstream md;
  md << "## Distance to the uniform frontier\n\nEach method against the uniform schedules' Pareto curve (bits/byte "
        "against total FLOPs per token, overhead included) interpolated at the method's own FLOPs, paired by "
     << (streams ? "stream" : "window") << "; negative = better than uniform at equal compute. 95% bootstrap CI over "
     << (streams ? "streams" : "windows") << ".\n\n| method | Δ bpb vs frontier [95% CI] | between | FLOPs/token |\n"
     << "|---|---|---|---|\n";
  bool below_one = false;
  for (const MethodResult& m : r.methods) {
    if (m.kind == methods::MethodKind::Uniform || m.kind == methods::MethodKind::Oracle) continue;
    const FrontierDelta f = frontier_delta(r, m, streams);
    const bool from_zero = f.lower == "uniform-0" && f.upper != f.lower;
    below_one = below_one || from_zero;
    md << "| " << m.name << " | " << fmt("%+.4f", f.mean) << " [" << fmt("%+.4f", f.ci.lo) << ", "
       << fmt("%+.4f", f.ci.hi) << "] | " << f.lower << (f.lower == f.upper ? "" : " – " + f.upper)
       << (f.outside ? " (beyond the curve's end: compared with it)" : "") << (from_zero ? " (*)" : "") << " | "
       << fmt("%.4g", seed_mean(m, total_of)) << " |\n";
  }
  // Between no inner learning and one step on every unit the curve is a straight line, and a state that learns on
  // some units carries most of what it learns to the others, so any schedule spending a step on a share of the
  // units tends to lie below that line, placed well or not (a replay's within-segment shuffle did, by 0.26 bits/byte
  // on the planted models).
  if (below_one)
    md << "\n(*) Spends less than uniform-1: against the straight line from uniform-0, which any schedule that steps on "
          "a share of the units tends to beat wherever it places them; `every-1/N` at about the same FLOPs is the "
          "fairer reference there.\n";
  return md.str();
}

}  // namespace ponder::cli
