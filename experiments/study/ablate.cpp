#include "experiments/study/ablate.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "experiments/study/plots.h"
#include "experiments/study/result_util.h"
#include "util/files.h"

namespace ponder::cli {
namespace {

using nlohmann::ordered_json;

std::string num(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

std::string options_text(const std::vector<int>& o, const char* sep) {
  std::string s;
  for (size_t i = 0; i < o.size(); ++i) s += (i ? sep : "") + std::to_string(o[i]);
  return s;
}

// The default learned-reinforce when `changed` is false, else the same method with one override.
std::string cell_method(bool changed, const std::string& override_text) {
  return changed ? "learned-reinforce[" + override_text + "]" : "learned-reinforce";
}

struct CellStats {
  stats::Interval bpb, delta;
  double t_p = NAN, holm = NAN, inner = 0, overhead = 0, mean_k = 0;
};

// (windows × seeds) matrix of per-window bpb differences method − baseline.
stats::ScoreMatrix differences(const MethodResult& m, const MethodResult& base) {
  stats::ScoreMatrix d = windows_by_seed(m);
  const stats::ScoreMatrix b = windows_by_seed(base);
  for (size_t w = 0; w < d.size(); ++w)
    for (size_t s = 0; s < d[w].size(); ++s) d[w][s] -= b[w][s];
  return d;
}

void plot_group(const AblationGroup& g, const std::map<std::string, CellStats>& st, const std::string& base_name,
                const std::string& dir) {
  const std::string stem = dir + "/ablation_" + g.name;
  {
    std::ofstream f(stem + ".dat");
    if (!f) throw std::runtime_error("cannot write " + stem + ".dat");
    f << "# index  label  delta_bpb  ci_lo  ci_hi\n";
    for (size_t i = 0; i < g.cells.size(); ++i) {
      const CellStats& c = st.at(g.cells[i].method);
      f << i << " \"" << g.cells[i].label << "\" " << c.delta.point << ' ' << c.delta.lo << ' ' << c.delta.hi << '\n';
    }
  }
  std::ofstream gp(stem + ".gp");
  gp << "set terminal pngcairo size 640,400\nset output '" << stem << ".png'\n"
     << "set title \"" << g.title << "\"\nset ylabel 'Δ bits/byte vs " << base_name << " (95% CI)'\n"
     << "set xrange [-0.5:" << double(g.cells.size()) - 0.5 << "]\nset grid ytics\nunset key\n"
     << "plot 0 with lines lt 0, '" << stem << ".dat' using 1:3:4:5:xtic(2) with yerrorbars pt 7 ps 1.2\n";
  gp.close();
  run_gnuplot(stem + ".gp");
}

}  // namespace

std::vector<AblationGroup> ablation_groups(const methods::LearnOptions& learn, int64_t mini_batch, int64_t seq_len) {
  std::vector<AblationGroup> g;
  AblationGroup gamma{"gamma", "Discount γ (temporal credit)", {}};
  for (double x : {0.0, 0.5, 0.9, 0.99})
    gamma.cells.push_back({"γ = " + num(x), cell_method(x != learn.reinforce.gamma, "gamma=" + num(x))});
  g.push_back(gamma);
  AblationGroup lambda{"lambda", "Compute penalty λ", {}};
  for (double x : {0.0, 0.01, 0.05, 0.1})
    lambda.cells.push_back({"λ = " + num(x), cell_method(x != learn.reinforce.penalty, "lambda=" + num(x))});
  g.push_back(lambda);
  AblationGroup options{"options", "Step options", {}};
  std::vector<std::vector<int>> sets = {learn.options, {1, 2, 4, 8}, {1, 4}, {1, 2, 4, 8, 16}};
  std::set<std::vector<int>> seen;
  for (const auto& o : sets)
    if (seen.insert(o).second)
      options.cells.push_back({"{" + options_text(o, ",") + "}",
                               cell_method(o != learn.options, "options=" + options_text(o, "/"))});
  g.push_back(options);
  AblationGroup net{"net", "Policy network", {}};
  for (const char* k : {"mlp", "lstm"})
    net.cells.push_back({std::string(k) == "lstm" ? "causal LSTM" : "MLP", cell_method(learn.net != k, std::string("net=") + k)});
  g.push_back(net);
  AblationGroup unit{"unit", "Decision unit", {}};
  const int64_t base_unit = learn.unit_tokens > 0 ? learn.unit_tokens : mini_batch;
  for (int64_t u : {mini_batch, 4 * mini_batch})
    if (seq_len % u == 0)
      unit.cells.push_back({u == mini_batch ? "mini-batch (" + std::to_string(u) + " tokens)"
                                            : "chunk (" + std::to_string(u) + " tokens)",
                            cell_method(u != base_unit, "unit=" + std::to_string(u))});
  g.push_back(unit);
  return g;
}

std::vector<AblationGroup> select_groups(const std::vector<AblationGroup>& all, const std::string& names) {
  if (names.empty()) return all;
  std::vector<AblationGroup> out;
  std::stringstream in(names);
  for (std::string n; std::getline(in, n, ',');) {
    auto it = std::find_if(all.begin(), all.end(), [&](const AblationGroup& g) { return g.name == n; });
    if (it == all.end()) throw std::invalid_argument("ablate: unknown group '" + n + "' (gamma, lambda, options, net, unit)");
    out.push_back(*it);
  }
  return out;
}

std::vector<std::string> ablation_methods(const std::vector<AblationGroup>& groups, int64_t budget_k) {
  std::vector<std::string> m = {"uniform-" + std::to_string(budget_k)};
  for (const AblationGroup& g : groups)
    for (const AblationCell& c : g.cells)
      if (std::find(m.begin(), m.end(), c.method) == m.end()) m.push_back(c.method);
  return m;
}

std::string write_ablation_outputs(const CompareResult& r, const std::vector<AblationGroup>& groups,
                                   const CompareOptions& opt, const ordered_json& provenance, const std::string& dir) {
  const std::string base_name = "uniform-" + std::to_string(opt.budget_k);
  const MethodResult* base = find(r, base_name);
  if (!base) throw std::invalid_argument("ablate: the comparison has no " + base_name);
  stats::BootstrapOptions bo;
  bo.seed = 2024;
  // Statistics per distinct method; Holm across all of them (one family of tests against the baseline).
  std::map<std::string, CellStats> st;
  std::vector<std::string> names;
  std::vector<double> ps;
  for (const MethodResult& m : r.methods) {
    if (m.name == base_name) continue;
    CellStats c;
    c.bpb = stats::stratified_bootstrap_ci(windows_by_seed(m), stats::aggregate_mean, bo);
    const stats::ScoreMatrix d = differences(m, *base);
    c.delta = stats::stratified_bootstrap_ci(d, stats::aggregate_mean, bo);
    c.t_p = stats::paired_t_test(window_differences(m, *base)).p_value;
    c.inner = seed_mean(m, inner_of);
    c.overhead = seed_mean(m, overhead_of);
    c.mean_k = seed_mean(m, k_of);
    st[m.name] = c;
    names.push_back(m.name);
    ps.push_back(std::isfinite(c.t_p) ? c.t_p : 1.0);
  }
  const std::vector<double> holm = stats::holm(ps);
  for (size_t i = 0; i < names.size(); ++i) st[names[i]].holm = holm[i];

  const double base_inner = seed_mean(*base, inner_of);
  std::ostringstream md;
  md << "# Ablations of learned-reinforce\n\n"
     << "Produced by `ponder ablate` " << provenance.value("version", "") << " (commit "
     << provenance.value("commit", "?") << ") on " << provenance.value("machine", "") << " with "
     << provenance.value("threads", 0) << " thread(s). Every cell is a learned-reinforce policy trained on the "
     << "same validation windows and evaluated on the same " << opt.seeds << " seeds × " << windows_label(opt.windows_per_seed)
     << " held-out windows as " << base_name << " (bpb " << fmt("%.4f", seed_mean(*base, bpb_of)) << ", inner " << fmt("%.4g", base_inner) << " FLOPs/token), so Δ is paired by window; CIs are stratified "
     << "bootstrap 95% intervals over windows within seeds; Holm corrects the paired t-tests of all "
     << names.size() << " distinct cells together. Negative Δ = better than " << base_name << ".\n";
  ordered_json groups_json = ordered_json::array();
  for (const AblationGroup& g : groups) {
    md << "\n## " << g.title << "\n\n| setting | bpb [95% CI] | Δ vs " << base_name
       << " [95% CI] | Holm p | inner FLOPs/token | overhead | mean K |\n|---|---|---|---|---|---|---|\n";
    ordered_json cells = ordered_json::array();
    for (const AblationCell& c : g.cells) {
      const CellStats& s = st.at(c.method);
      md << "| " << c.label << " | " << fmt("%.4f", s.bpb.point) << " [" << fmt("%.4f", s.bpb.lo) << ", "
         << fmt("%.4f", s.bpb.hi) << "] | " << fmt("%+.4f", s.delta.point) << " [" << fmt("%+.4f", s.delta.lo) << ", "
         << fmt("%+.4f", s.delta.hi) << "] | " << fmt("%.3g", s.holm) << " | " << fmt("%.4g", s.inner) << " | "
         << fmt("%.3g", s.overhead) << " | " << fmt("%.2f", s.mean_k) << " |\n";
      cells.push_back({{"label", c.label}, {"method", c.method}, {"bpb", s.bpb.point},
                       {"bpb_ci95", {s.bpb.lo, s.bpb.hi}}, {"delta_bpb", s.delta.point},
                       {"delta_ci95", {s.delta.lo, s.delta.hi}}, {"paired_t_p", s.t_p}, {"holm_p", s.holm},
                       {"inner_flops_per_token", s.inner}, {"overhead_flops_per_token", s.overhead},
                       {"mean_k", s.mean_k}});
    }
    md << "\n![" << g.title << "](ablation_" << g.name << ".png)\n";
    groups_json.push_back({{"group", g.name}, {"title", g.title}, {"cells", cells}});
  }
  md << "\nEach cell's training settings and curve are in results.json (the comparison run of these cells) and "
        "report.md.\n";
  ordered_json out = provenance;
  out["baseline"] = base_name;
  out["seeds"] = opt.seeds;
  out["windows_per_seed"] = opt.windows_per_seed;
  out["groups"] = groups_json;
  util::write_atomically(dir + "/ablation.json", out.dump(1) + "\n");
  util::write_atomically(dir + "/ablation.md", md.str());
  for (const AblationGroup& g : groups) plot_group(g, st, base_name, dir);  // the figures after the numbers
  return md.str();
}

}  // namespace ponder::cli
