#include "experiments/study/adapt_models.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "experiments/study/adapt_report.h"
#include "experiments/study/result_util.h"
#include "stats/descriptive.h"

namespace ponder::cli {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;

double num(const Json& v) { return v.is_number() ? v.get<double>() : NAN; }
OJson out(double v) { return std::isfinite(v) ? OJson(v) : OJson(nullptr); }

// The row of `method` in a list of objects keyed by "method" (null when absent).
const Json* row_named(const Json& rows, const std::string& method) {
  for (const Json& r : rows)
    if (r.value("method", "") == method) return &r;
  return nullptr;
}

// Method names in model 1's order that every model reports in `key` of its adapt_summary (`key` a list of rows).
std::vector<std::string> common_methods(const std::vector<const Json*>& s, const std::string& key) {
  std::vector<std::string> names;
  for (const Json& r : (*s.front())[key]) {
    const std::string n = r.value("method", "");
    bool everywhere = true;
    for (const Json* m : s) everywhere = everywhere && row_named((*m)[key], n);
    if (everywhere) names.push_back(n);
  }
  return names;
}

// Per model, `field` of `method`'s row in adapt_summary.methods.
std::vector<double> per_model(const std::vector<const Json*>& s, const std::string& method, const std::string& field) {
  std::vector<double> v;
  for (const Json* m : s) v.push_back(num((*row_named((*m)["methods"], method))[field]));
  return v;
}

OJson method_rows(const std::vector<const Json*>& s, std::string& note) {
  const std::vector<std::string> names = common_methods(s, "methods");
  const bool has_gap = std::find(names.begin(), names.end(), "uniform-0") != names.end() &&
                       std::find(names.begin(), names.end(), "oracle") != names.end();
  std::vector<double> skip, oracle;
  if (has_gap) skip = per_model(s, "uniform-0", "bpb"), oracle = per_model(s, "oracle", "bpb");
  if (!has_gap) note = "the gap needs uniform-0 (SKIP) and oracle among adapt.methods";
  else if (!(stats::mean(skip) - stats::mean(oracle) > 1e-9)) note = "the oracle is no better than SKIP over these models";
  OJson rows = OJson::array();
  for (const std::string& n : names) {
    const std::vector<double> bpb = per_model(s, n, "bpb");
    OJson r = {{"method", n}, {"bpb", stats::mean(bpb)}, {"bpb_per_model", bpb},
               {"total_flops_per_token", stats::mean(per_model(s, n, "total_flops_per_token"))},
               {"seconds_per_token", stats::mean(per_model(s, n, "seconds_per_token"))},
               {"mean_k", stats::mean(per_model(s, n, "mean_k"))}, {"gap_recovered", nullptr}, {"gap_ci", {nullptr, nullptr}}};
    if (note.empty()) {
      const stats::Interval ci = gap_share_ci(skip, oracle, bpb);  // models resampled
      r["gap_recovered"] = out(ci.point);
      r["gap_ci"] = {out(ci.lo), out(ci.hi)};
    }
    rows.push_back(r);
  }
  return rows;
}

// Per stream (streams are named alike in every model: one test split), each method's mean bits/byte over models and
// its regret against the oracle's mean.
OJson stream_rows(const std::vector<const Json*>& s, const std::vector<std::string>& methods) {
  OJson rows = OJson::array();
  for (const Json& st : (*s.front())["per_stream"]) {
    const std::string name = st.value("stream", "");
    OJson bpb = OJson::object(), regret = OJson::object();
    for (const std::string& m : methods) {
      std::vector<double> v;
      for (const Json* model : s)
        for (const Json& r : (*model)["per_stream"])
          if (r.value("stream", "") == name && r["bpb"].contains(m)) v.push_back(num(r["bpb"][m]));
      bpb[m] = v.size() == s.size() ? out(stats::mean(v)) : OJson(nullptr);
    }
    const bool has_oracle = bpb.contains("oracle") && bpb["oracle"].is_number();
    for (const std::string& m : methods)
      regret[m] = has_oracle && bpb[m].is_number() ? out(bpb[m].get<double>() - bpb["oracle"].get<double>())
                                                   : OJson(nullptr);
    rows.push_back({{"stream", name}, {"bpb", bpb}, {"regret_vs_oracle", regret}});
  }
  return rows;
}

// Each K's measured cost multiple: the mean over models with its range (equal in every model when only the base's
// weights differ, since FLOPs follow shapes).
OJson cost_rows(const std::vector<nlohmann::json>& models) {
  OJson rows = OJson::array();
  if (!models.front().contains("cost_multiples")) return rows;
  for (const Json& c : models.front()["cost_multiples"]) {
    std::vector<double> v;
    for (const Json& m : models)
      for (const Json& d : m.value("cost_multiples", Json::array()))
        if (d.value("k", -1) == c.value("k", -2)) v.push_back(num(d["measured_multiple"]));
    rows.push_back({{"k", c["k"]}, {"measured_multiple", stats::mean(v)},
                    {"min", *std::min_element(v.begin(), v.end())}, {"max", *std::max_element(v.begin(), v.end())}});
  }
  return rows;
}

// Streams (times models) on which each uniform-K read worse than SKIP, summed over models.
OJson hurt_counts(const std::vector<const Json*>& s) {
  OJson hurt = OJson::object();
  for (const auto& [name, n] : (*s.front())["streams_worse_than_skip"].items()) {
    int total = 0;
    for (const Json* m : s) total += (*m)["streams_worse_than_skip"].value(name, 0);
    hurt[name] = total;
  }
  return hurt;
}

// Each model's difficulty bands (its own thirds by SKIP's chunk loss) averaged band by band over the models, for
// the methods every model has there with the same number of bands.
OJson difficulty_over_models(const std::vector<const Json*>& s) {
  const Json& first = (*s.front())["by_difficulty"];
  const size_t nb = first.value("bands", Json::array()).size();
  OJson d = {{"bands", OJson::array()}, {"methods", OJson::array()}};
  for (const Json* m : s)
    if ((*m)["by_difficulty"].value("bands", Json::array()).size() != nb || nb == 0) {
      d["note"] = "the models have different numbers of difficulty bands (or none): not pooled";
      return d;
    }
  for (size_t b = 0; b < nb; ++b) {
    double lo = INFINITY, hi = -INFINITY;
    int64_t chunks = 0;
    for (const Json* m : s) {
      const Json& band = (*m)["by_difficulty"]["bands"][b];
      lo = std::min(lo, num(band["skip_loss_lo"])), hi = std::max(hi, num(band["skip_loss_hi"]));
      chunks += band.value("chunks", int64_t(0));
    }
    d["bands"].push_back({{"skip_loss_lo_min", lo}, {"skip_loss_hi_max", hi}, {"chunks", chunks}});
  }
  std::vector<const Json*> lists;
  for (const Json* m : s) lists.push_back(&(*m)["by_difficulty"]);
  for (const std::string& name : common_methods(lists, "methods")) {
    OJson row = {{"method", name}};
    for (const char* field : {"mean_k", "delta_nats_vs_skip", "share_worse_than_skip"}) {
      std::vector<double> band_means;
      for (size_t b = 0; b < nb; ++b) {
        std::vector<double> v;
        for (const Json* l : lists) v.push_back(num((*row_named((*l)["methods"], name))[field][b]));
        band_means.push_back(stats::mean(v));
      }
      row[field] = band_means;
    }
    d["methods"].push_back(row);
  }
  return d;
}

std::string methods_markdown(const OJson& summary, const OJson& costs) {
  std::ostringstream md;
  if (!costs.empty()) {
    md << "Each K's cost, measured by the engine's counters as a multiple of a chunk's scoring forward (mean over "
          "models, range in brackets), beside the multiples often assumed (SKIP 1×, UPDATE_1 3×, UPDATE_2 5×, "
          "UPDATE_4 12×):";
    for (size_t i = 0; i < costs.size(); ++i)
      md << (i ? "; " : " ") << "K = " << costs[i]["k"].get<int>() << ": "
         << fmt("%.3f", num(costs[i]["measured_multiple"])) << "× [" << fmt("%.3f", num(costs[i]["min"])) << ", "
         << fmt("%.3f", num(costs[i]["max"])) << "]";
    md << ".\n\n";
  }
  md << "| method | bits/byte (mean over models) | per model | total FLOPs/token | seconds/token | mean K | share of "
        "the SKIP→oracle gap [95% CI over models] |\n|---|---|---|---|---|---|---|\n";
  for (const auto& r : summary["methods"]) {
    std::string per;
    for (const auto& v : r["bpb_per_model"]) per += (per.empty() ? "" : ", ") + fmt("%.4f", num(v));
    md << "| " << r["method"].get<std::string>() << " | " << fmt("%.4f", num(r["bpb"])) << " | " << per << " | "
       << fmt("%.3g", num(r["total_flops_per_token"])) << " | " << fmt("%.3g", num(r["seconds_per_token"])) << " | "
       << fmt("%.2f", num(r["mean_k"])) << " | "
       << (r["gap_recovered"].is_number() ? fmt("%.2f", num(r["gap_recovered"])) + " [" +
                                                fmt("%.2f", num(r["gap_ci"][0])) + ", " + fmt("%.2f", num(r["gap_ci"][1])) + "]"
                                          : std::string("—"))
       << " |\n";
  }
  md << "\n";
  if (summary.contains("gap_note")) md << "The gap share is not reported: " << summary["gap_note"].get<std::string>() << ".\n\n";
  return md.str();
}

// Per stream, every method's mean bits/byte over models, then each method's mean regret against the oracle; long
// lists of streams (addresses) show their first `shown` rows here and all of them in results.json.
std::string streams_markdown(const OJson& summary, size_t models, size_t shown = 16) {
  const OJson& streams = summary["per_stream"];
  if (streams.empty()) return "";
  std::vector<std::string> names;
  for (const auto& m : summary["methods"]) names.push_back(m["method"].get<std::string>());
  std::ostringstream md;
  md << "Per stream (bits/byte, mean over the " << models << " models; the last row: each method's regret against "
     << "the oracle, mean over streams):\n\n| stream |";
  for (const std::string& n : names) md << " " << n << " |";
  md << "\n|---|";
  for (size_t i = 0; i < names.size(); ++i) md << "---|";
  md << "\n";
  std::vector<double> regret(names.size(), 0);
  size_t counted = 0;
  for (size_t i = 0; i < streams.size(); ++i) {
    const OJson& st = streams[i];
    if (i < shown) md << "| " << st["stream"].get<std::string>() << " |";
    for (size_t c = 0; c < names.size(); ++c) {
      if (i < shown) md << " " << fmt("%.4f", num(st["bpb"][names[c]])) << " |";
      regret[c] += num(st["regret_vs_oracle"][names[c]]);
    }
    if (i < shown) md << "\n";
    ++counted;
  }
  if (streams.size() > shown) {
    md << "| (" << streams.size() - shown << " more streams: results.json) |";
    for (size_t c = 0; c < names.size(); ++c) md << " |";
    md << "\n";
  }
  md << "| **regret vs oracle** |";
  for (double r : regret) md << " " << fmt("%+.4f", r / double(counted)) << " |";
  md << "\n\n";
  for (const auto& [name, n] : summary["streams_worse_than_skip"].items())
    md << "- " << name << " read worse than never updating on " << n.get<int>() << " of " << streams.size() * models
       << " (stream, model) pairs.\n";
  return md.str() + "\n";
}

std::string difficulty_markdown_over_models(const OJson& d, size_t models) {
  if (d.contains("note") || d["methods"].empty()) return d.contains("note") ? "Difficulty bands: " + d["note"].get<std::string>() + ".\n\n" : "";
  const OJson* oracle = nullptr;
  for (const auto& m : d["methods"])
    if (m["method"] == "oracle") oracle = &m;
  std::ostringstream md;
  md << "Spending by difficulty, over the " << models << " models: each model's chunks in thirds by its frozen base's "
        "(SKIP's) loss, each cell the mean over models of that band's mean K, mean chunk loss minus SKIP's (nats/token)"
        " and share of chunks read worse than SKIP (docs/method.md §7.4). A band's edges in the header are the lowest "
        "and highest over the models, so neighbouring bands overlap.\n\n| method |";
  for (size_t b = 0; b < d["bands"].size(); ++b) {
    const OJson& band = d["bands"][b];
    md << " SKIP loss " << fmt("%.2f", num(band["skip_loss_lo_min"])) << "–" << fmt("%.2f", num(band["skip_loss_hi_max"]))
       << " (" << band["chunks"].get<int64_t>() << " chunks" << (oracle ? ", oracle K " + fmt("%.2f", num((*oracle)["mean_k"][b])) : "")
       << ") |";
  }
  md << "\n|---|";
  for (size_t b = 0; b < d["bands"].size(); ++b) md << "---|";
  md << "\n";
  for (const auto& m : d["methods"]) {
    md << "| " << m["method"].get<std::string>() << " |";
    for (size_t b = 0; b < d["bands"].size(); ++b)
      md << " K " << fmt("%.2f", num(m["mean_k"][b])) << ", Δ " << fmt("%+.4f", num(m["delta_nats_vs_skip"][b]))
         << ", worse " << fmt("%.0f", 100 * num(m["share_worse_than_skip"][b])) << " % |";
    md << "\n";
  }
  return md.str() + "\n";
}

std::string adapt_models_markdown(const OJson& summary, const OJson& costs, size_t models) {
  return "## Fast weights on the frozen bases, over " + std::to_string(models) + " models\n\n"
         "Each model's own fast-weight section is in model-<i>/report.md; here their numbers are averaged over the "
         "models (bits/byte of each model over its scored tokens; the gap share from the means, its interval from "
         "resampling models).\n\n" +
         methods_markdown(summary, costs) + streams_markdown(summary, models) +
         difficulty_markdown_over_models(summary["by_difficulty"], models);
}

}  // namespace

AdaptOverModels adapt_over_models(const std::vector<nlohmann::json>& models) {
  if (models.empty()) throw std::invalid_argument("adapt over models: no model");
  std::vector<const Json*> s;
  for (size_t i = 0; i < models.size(); ++i) {
    if (!models[i].contains("adapt_summary"))
      throw std::invalid_argument("adapt over models: model " + std::to_string(i + 1) +
                                  "'s results.json has no adapt_summary (not a `ponder adapt` run?)");
    s.push_back(&models[i]["adapt_summary"]);
  }
  AdaptOverModels r;
  std::string note;
  r.summary["models"] = models.size();
  r.summary["methods"] = method_rows(s, note);
  if (!note.empty()) r.summary["gap_note"] = note;
  std::vector<std::string> names;
  for (const auto& m : r.summary["methods"]) names.push_back(m["method"].get<std::string>());
  r.summary["per_stream"] = stream_rows(s, names);
  r.summary["streams_worse_than_skip"] = hurt_counts(s);
  r.summary["by_difficulty"] = difficulty_over_models(s);
  r.cost_multiples = cost_rows(models);
  r.markdown = adapt_models_markdown(r.summary, r.cost_multiples, models.size());
  return r;
}

}  // namespace ponder::cli
