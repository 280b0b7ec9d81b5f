#include "experiments/study/adapt_report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "experiments/study/result_util.h"
#include "stats/rliable.h"

namespace ponder::cli {
namespace {

// The method called `name` if it was scored on at least one seed.
const MethodResult* find_scored(const CompareResult& r, const std::string& name) {
  for (const MethodResult& m : r.methods)
    if (m.name == name && !m.seeds.empty()) return &m;
  return nullptr;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// Per stream: SKIP, the uniform schedules and the oracle side by side, then how often updating hurt.
std::string per_stream_markdown(const AdaptSummary& s) {
  std::vector<size_t> cols;
  for (size_t i = 0; i < s.rows.size(); ++i)
    if (s.rows[i].name.rfind("uniform-", 0) == 0 || s.rows[i].name == "oracle") cols.push_back(i);
  if (s.streams.empty() || cols.empty()) return "";
  std::ostringstream md;
  md << "Per stream (bits/byte; a failure-mode view: where updates pay, and where they hurt):\n\n| stream |";
  for (size_t c : cols) md << " " << s.rows[c].name << " |";
  md << "\n|---|";
  for (size_t c = 0; c < cols.size(); ++c) md << "---|";
  md << "\n";
  for (const AdaptStreamRow& st : s.streams) {
    md << "| " << st.name << " |";
    for (size_t c : cols) md << " " << (c < st.bpb.size() ? fmt("%.4f", st.bpb[c]) : std::string("—")) << " |";
    md << "\n";
  }
  md << "\n";
  for (const auto& [name, n] : s.hurt)
    md << "- " << name << " scored worse than never updating on " << n << " of " << s.streams.size() << " streams.\n";
  md << "\n";
  return md.str();
}

}  // namespace

stats::Interval gap_share_ci(const std::vector<double>& skip, const std::vector<double>& oracle,
                             const std::vector<double>& m) {
  const auto mean_at = [](const std::vector<double>& v, const std::vector<double>& rows) {
    double s = 0;
    for (double i : rows) s += v[size_t(i)];
    return s / double(rows.size());
  };
  stats::ScoreMatrix idx;  // one column of indices: resampling its rows resamples the observations, paired
  for (size_t i = 0; i < m.size(); ++i) idx.push_back({double(i)});
  return stats::stratified_bootstrap_ci(
      idx,
      [&](const stats::ScoreMatrix& rs) {
        std::vector<double> rows;
        for (const auto& x : rs) rows.push_back(x[0]);
        const double s = mean_at(skip, rows);
        return (s - mean_at(m, rows)) / (s - mean_at(oracle, rows));
      },
      {});
}

AdaptSummary summarize_adapt(const CompareResult& r) {
  AdaptSummary s;
  const MethodResult* skip = find_scored(r, "uniform-0");
  const MethodResult* oracle = find_scored(r, "oracle");
  if (!skip || !oracle) s.gap_note = "the gap needs uniform-0 (SKIP) and oracle among adapt.methods";
  if (skip && oracle) {
    s.skip_bpb = skip->seeds.front().bpb;
    s.oracle_bpb = oracle->seeds.front().bpb;
    if (!(s.skip_bpb - s.oracle_bpb > 1e-9))
      s.gap_note = "the oracle is no better than SKIP on these streams: there is no gap to recover";
  }
  for (const MethodResult& m : r.methods) {
    if (m.seeds.empty()) continue;
    const SeedResult& first = m.seeds.front();
    AdaptMethodRow row{m.name, first.bpb, first.total_per_token(), first.seconds_per_token, first.mean_k};
    if (s.gap_note.empty()) {
      const stats::Interval ci =
          gap_share_ci(skip->seeds.front().window_bpb, oracle->seeds.front().window_bpb, first.window_bpb);
      row.gap = ci.point;
      row.gap_lo = ci.lo;
      row.gap_hi = ci.hi;
    }
    s.rows.push_back(row);
  }
  for (size_t i = 0; i < r.stream_names.size(); ++i) {
    AdaptStreamRow row{r.stream_names[i], {}};
    for (const MethodResult& m : r.methods)
      if (!m.seeds.empty()) row.bpb.push_back(i < m.seeds.front().window_bpb.size() ? m.seeds.front().window_bpb[i] : NAN);
    s.streams.push_back(row);
  }
  for (const MethodResult& m : r.methods)
    if (skip && m.kind == methods::MethodKind::Uniform && m.name != "uniform-0" && !m.seeds.empty()) {
      int worse = 0;
      const std::vector<double>& a = skip->seeds.front().window_bpb;
      const std::vector<double>& b = m.seeds.front().window_bpb;
      for (size_t i = 0; i < a.size() && i < b.size(); ++i) worse += b[i] > a[i];
      s.hurt.push_back({m.name, worse});
    }
  s.difficulty = spend_by_difficulty(r);
  return s;
}

nlohmann::ordered_json adapt_json(const AdaptSummary& s, const AdaptSection& a) {
  const ttt::FastWeightsConfig& f = a.rollouts.fast;
  const ttt::FastOptimConfig& o = a.rollouts.optim;
  nlohmann::ordered_json j;
  j["adapt"] = {{"fast", f.kind}, {"rank", f.rank}, {"targets", f.targets}, {"last_blocks", f.last_blocks},
                {"head_hidden", f.head_hidden}, {"chunk", a.chunk}, {"optimizer", o.optimizer}, {"lr", o.lr},
                {"momentum", o.momentum}, {"clip", o.clip}, {"normalize", o.normalize}, {"budget_k", a.budget_k},
                {"split", a.split}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  auto num = [](double v) -> nlohmann::ordered_json { return std::isfinite(v) ? nlohmann::ordered_json(v) : nullptr; };
  for (const AdaptMethodRow& row : s.rows)
    rows.push_back({{"method", row.name}, {"bpb", row.bpb}, {"total_flops_per_token", row.total_per_token},
                    {"seconds_per_token", row.seconds_per_token}, {"mean_k", row.mean_k},
                    {"gap_recovered", num(row.gap)}, {"gap_ci", {num(row.gap_lo), num(row.gap_hi)}}});
  nlohmann::ordered_json streams = nlohmann::ordered_json::array();
  for (const AdaptStreamRow& st : s.streams) {
    nlohmann::ordered_json by = nlohmann::ordered_json::object();
    for (size_t i = 0; i < st.bpb.size() && i < s.rows.size(); ++i) by[s.rows[i].name] = num(st.bpb[i]);
    streams.push_back({{"stream", st.name}, {"bpb", by}});
  }
  nlohmann::ordered_json hurt = nlohmann::ordered_json::object();
  for (const auto& [name, n] : s.hurt) hurt[name] = n;
  j["adapt_summary"] = {{"skip_bpb", num(s.skip_bpb)}, {"oracle_bpb", num(s.oracle_bpb)}, {"methods", rows},
                        {"per_stream", streams}, {"streams_worse_than_skip", hurt}};
  if (!s.gap_note.empty()) j["adapt_summary"]["gap_note"] = s.gap_note;
  j["adapt_summary"]["by_difficulty"] = difficulty_json(s.difficulty);
  return j;
}

std::string adapt_markdown(const AdaptSummary& s, const AdaptSection& a, bool per_stream) {
  const ttt::FastWeightsConfig& f = a.rollouts.fast;
  const ttt::FastOptimConfig& o = a.rollouts.optim;
  std::ostringstream md;
  md << "## Fast weights on the frozen base\n\n"
     << (a.split == "valid" ? "**Validation streams** (adapt.split valid): for choosing the protocol's settings; the "
                              "result is a run on the test split.\n\n" : "")
     << "Fast weights: `" << f.kind << "`"
     << (f.kind == "lora" ? " rank " + std::to_string(f.rank) + " on " + join_names(f.targets) + " of " +
                                (f.last_blocks == 0 ? std::string("every block")
                                                    : "the last " + std::to_string(f.last_blocks) + " block(s)")
                          : " SwiGLU head of width " + std::to_string(f.head_hidden))
     << "; inner optimiser " << o.optimizer << " lr " << o.lr << (o.normalize ? ", normalised steps" : "")
     << (o.clip > 0 ? ", clipped at " + fmt("%g", o.clip) : "") << "; chunks of " << a.chunk
     << " tokens, each scored, then updated on K ∈ {0, 1, 2, 4} times; the budget is uniform-" << a.budget_k
     << "'s FLOPs. Fast weights start afresh for every stream.\n\n"
     << "| method | bits/byte | total FLOPs/token | seconds/token | mean K | share of the SKIP→oracle gap [95% CI] |\n"
     << "|---|---|---|---|---|---|\n";
  for (const AdaptMethodRow& r : s.rows)
    md << "| " << r.name << " | " << fmt("%.4f", r.bpb) << " | " << fmt("%.3g", r.total_per_token) << " | "
       << fmt("%.3g", r.seconds_per_token) << " | " << fmt("%.2f", r.mean_k) << " | "
       << (std::isfinite(r.gap) ? fmt("%.2f", r.gap) + " [" + fmt("%.2f", r.gap_lo) + ", " + fmt("%.2f", r.gap_hi) + "]"
                                : std::string("—"))
       << " |\n";
  md << "\n";
  if (!s.gap_note.empty()) md << "The gap share is not reported: " << s.gap_note << ".\n\n";
  if (per_stream) md << per_stream_markdown(s) << difficulty_markdown(s.difficulty);
  md << "Seconds are wall-clock of one process on this machine, all methods in one run: compare their ratios, not "
        "their values across machines.\n\n";
  return md.str();
}

}  // namespace ponder::cli
