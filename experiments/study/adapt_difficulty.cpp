#include "experiments/study/adapt_difficulty.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "experiments/study/result_util.h"

namespace ponder::cli {
namespace {

const MethodResult* scored(const CompareResult& r, const std::string& name) {
  for (const MethodResult& m : r.methods)
    if (m.name == name && !m.unit_loss.empty()) return &m;
  return nullptr;
}

// Band of each chunk (-1: SKIP's loss is not finite, e.g. a chunk of padding only), equal counts by SKIP's loss.
std::vector<int> band_of(const std::vector<double>& skip, int bands, std::vector<DifficultyBand>& out) {
  std::vector<size_t> order;
  for (size_t i = 0; i < skip.size(); ++i)
    if (std::isfinite(skip[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return skip[a] < skip[b]; });
  std::vector<int> band(skip.size(), -1);
  const size_t n = order.size();
  for (int b = 0; b < bands && n > 0; ++b) {
    const size_t from = n * size_t(b) / size_t(bands), to = n * size_t(b + 1) / size_t(bands);
    if (from == to) continue;
    for (size_t i = from; i < to; ++i) band[order[i]] = int(out.size());
    out.push_back({skip[order[from]], skip[order[to - 1]], int64_t(to - from)});
  }
  return band;
}

DifficultyRow row_of(const MethodResult& m, const std::vector<double>& skip, const std::vector<int>& band, size_t bands) {
  DifficultyRow row{m.name, std::vector<double>(bands, 0), std::vector<double>(bands, 0), std::vector<double>(bands, 0)};
  std::vector<int64_t> n(bands, 0);
  for (size_t i = 0; i < band.size(); ++i) {
    if (band[i] < 0 || !std::isfinite(m.unit_loss[i])) continue;
    const size_t b = size_t(band[i]);
    row.mean_k[b] += m.unit_k[i];
    row.delta_nats[b] += m.unit_loss[i] - skip[i];
    row.worse[b] += m.unit_loss[i] > skip[i];
    ++n[b];
  }
  for (size_t b = 0; b < bands; ++b)
    for (std::vector<double>* v : {&row.mean_k, &row.delta_nats, &row.worse}) (*v)[b] = n[b] ? (*v)[b] / double(n[b]) : NAN;
  return row;
}

}  // namespace

DifficultySummary spend_by_difficulty(const CompareResult& r, int bands) {
  DifficultySummary d;
  const MethodResult* skip = scored(r, "uniform-0");
  if (!skip) {
    d.note = "the bands need uniform-0 (SKIP) among the methods, with its per-chunk losses";
    return d;
  }
  const std::vector<int> band = band_of(skip->unit_loss, bands, d.bands);
  std::vector<std::string> left_out;
  for (const MethodResult& m : r.methods) {
    if (m.seeds.empty()) continue;
    if (m.unit_loss.size() != band.size() || m.unit_k.size() != band.size()) {
      left_out.push_back(m.name);
      continue;
    }
    d.rows.push_back(row_of(m, skip->unit_loss, band, d.bands.size()));
  }
  if (!left_out.empty()) {
    d.note = "left out (their chunks do not align with SKIP's):";
    for (const std::string& n : left_out) d.note += " " + n;
  }
  return d;
}

nlohmann::ordered_json difficulty_json(const DifficultySummary& d) {
  auto num = [](double v) -> nlohmann::ordered_json { return std::isfinite(v) ? nlohmann::ordered_json(v) : nullptr; };
  auto nums = [&](const std::vector<double>& v) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (double x : v) a.push_back(num(x));
    return a;
  };
  nlohmann::ordered_json bands = nlohmann::ordered_json::array(), rows = nlohmann::ordered_json::array();
  for (const DifficultyBand& b : d.bands) bands.push_back({{"skip_loss_lo", b.lo}, {"skip_loss_hi", b.hi}, {"chunks", b.chunks}});
  for (const DifficultyRow& r : d.rows)
    rows.push_back({{"method", r.name}, {"mean_k", nums(r.mean_k)}, {"delta_nats_vs_skip", nums(r.delta_nats)},
                    {"share_worse_than_skip", nums(r.worse)}});
  nlohmann::ordered_json j = {{"bands", bands}, {"methods", rows}};
  if (!d.note.empty()) j["note"] = d.note;
  return j;
}

std::string difficulty_markdown(const DifficultySummary& d) {
  if (d.bands.empty()) return d.note.empty() ? "" : "Spending by difficulty: not reported: " + d.note + ".\n\n";
  const auto oracle = std::find_if(d.rows.begin(), d.rows.end(), [](const DifficultyRow& r) { return r.name == "oracle"; });
  std::ostringstream md;
  md << "Spending by difficulty: every chunk read (adaptation parts and every seed included) in " << d.bands.size()
     << " equal bands by the frozen base's (SKIP's) loss on it. Per band: mean K (the oracle's in the header: above it "
        "a method over-spends there), mean chunk loss minus SKIP's on the same chunks (nats/token; negative: the "
        "updates made so far pay there), and the share of chunks read worse than SKIP (earlier updates hurt them).\n\n"
     << "| method |";
  for (size_t b = 0; b < d.bands.size(); ++b)
    md << " SKIP loss " << fmt("%.2f", d.bands[b].lo) << "–" << fmt("%.2f", d.bands[b].hi) << " (" << d.bands[b].chunks
       << " chunks" << (oracle != d.rows.end() ? ", oracle K " + fmt("%.2f", oracle->mean_k[b]) : std::string()) << ") |";
  md << "\n|---|";
  for (size_t b = 0; b < d.bands.size(); ++b) md << "---|";
  md << "\n";
  for (const DifficultyRow& r : d.rows) {
    md << "| " << r.name << " |";
    for (size_t b = 0; b < d.bands.size(); ++b)
      md << " K " << fmt("%.2f", r.mean_k[b]) << ", Δ " << fmt("%+.4f", r.delta_nats[b]) << ", worse "
         << fmt("%.0f %%", 100 * r.worse[b]) << " |";
    md << "\n";
  }
  md << "\n";
  if (!d.note.empty()) md << "Note: " << d.note << ".\n\n";
  return md.str();
}

}  // namespace ponder::cli
