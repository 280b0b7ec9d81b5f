#include "experiments/study/replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "tensor/rng.h"

namespace ponder::cli {
namespace replay {
namespace {

struct Schedule {
  std::vector<std::vector<int>> k, first;  // per segment, per unit
};

[[noreturn]] void refuse(const std::string& file, const std::string& why) {
  throw std::invalid_argument("replay: " + file + ": " + why);
}

// The values of per_unit.<field> of one file cut by its segments into units of `unit` tokens (the last padded),
// with each unit's first token. `steps`: each value must be a whole step count.
struct Units {
  std::vector<std::vector<double>> value;
  std::vector<std::vector<int>> first;
};

Units units_of(const nlohmann::json& j, int64_t unit, const std::string& field, bool steps, const std::string& file) {
  const std::vector<double> v = j.at("per_unit").at(field).get<std::vector<double>>();
  Units s;
  size_t at = 0;
  for (const nlohmann::json& seg : j.at("segments")) {
    if (seg.at("unit_tokens").get<int64_t>() != unit)
      refuse(file, "its units are " + seg.at("unit_tokens").dump() + " tokens, this comparison's " + std::to_string(unit));
    const std::vector<int> tokens = seg.at("tokens").get<std::vector<int>>();
    const int64_t units = (int64_t(tokens.size()) - 1 + unit - 1) / unit;
    s.value.emplace_back();
    s.first.emplace_back();
    for (int64_t u = 0; u < units; ++u, ++at) {
      if (at >= v.size()) refuse(file, "per_unit." + field + " has fewer units than its segments");
      const bool ok = steps ? v[at] >= 0 && v[at] <= 1000 && v[at] == std::floor(v[at]) : std::isfinite(v[at]);
      if (!ok)
        refuse(file, "per_unit." + field + "[" + std::to_string(at) + "] is " + nlohmann::json(v[at]).dump() + ", not " +
                         (steps ? "a step count" : "a finite score"));
      s.value.back().push_back(v[at]);
      s.first.back().push_back(tokens[size_t(u * unit)]);
    }
  }
  if (at != v.size())
    refuse(file, "per_unit." + field + " has " + std::to_string(v.size()) + " units, its segments " + std::to_string(at));
  return s;
}

// One file's per-unit values (read_units) after the checks that it is a streams-mode file of `ponder oracle`.
Units read_units(const std::string& file, int64_t unit, const std::string& field, bool steps) {
  std::ifstream in(file);
  if (!in) refuse(file, "cannot be read");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    refuse(file, std::string("not JSON (") + e.what() + ")");
  }
  if (!j.contains("segments") || !j.contains("per_unit"))
    refuse(file, "no segments and per_unit: not an oracle.json of `ponder oracle` in streams mode");
  try {
    return units_of(j, unit, field, steps, file);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    refuse(file, std::string("not an oracle.json of `ponder oracle` (") + e.what() + ")");
  }
}

// One oracle.json: its segments cut into units of `unit` tokens (the last padded), each unit's K and first token.
Schedule read_schedule(const std::string& file, int64_t unit) {
  Units u = read_units(file, unit, "k", true);
  Schedule s;
  s.first = std::move(u.first);
  for (const std::vector<double>& seg : u.value) s.k.emplace_back(seg.begin(), seg.end());
  return s;
}

// The placement null: each segment's K permuted among its units (the first tokens stay: they name the units), so
// the same steps are spent on the same text at exactly the same FLOPs, in random places.
void shuffle_within_segments(Schedule& s, uint64_t seed) {
  Generator gen(seed);
  for (std::vector<int>& k : s.k) {
    const std::vector<int> before = k;
    const std::vector<int64_t> perm = gen.permutation(int64_t(k.size()));
    for (size_t u = 0; u < k.size(); ++u) k[u] = before[size_t(perm[u])];
  }
}

// Each segment's K placed in the order of per-unit scores: the unit with the highest score gets the largest K of its
// segment, and so on down (ties in score by unit order), so the segment spends exactly the same steps.
void order_within_segments(Schedule& s, const Units& order) {
  for (size_t w = 0; w < s.k.size(); ++w) {
    std::vector<int> k = s.k[w];
    std::sort(k.begin(), k.end(), std::greater<int>());
    std::vector<size_t> by(k.size());
    for (size_t u = 0; u < by.size(); ++u) by[u] = u;
    std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) { return order.value[w][a] > order.value[w][b]; });
    for (size_t r = 0; r < by.size(); ++r) s.k[w][by[r]] = k[r];
  }
}

}  // namespace
}  // namespace replay

int nearest_option(double mean, const std::vector<int>& options) {
  if (options.empty()) throw std::invalid_argument("replay: no step options to round a mean K to");
  int best = options.front();
  for (int o : options) {
    const double d = std::abs(o - mean), d_best = std::abs(best - mean);
    if (d < d_best - 1e-12 || (d <= d_best + 1e-12 && o < best)) best = o;
  }
  return best;
}

Replay load_replay(const methods::MethodSpec& m, int64_t unit, const std::vector<int>& options) {
  using namespace replay;
  std::vector<Schedule> all;
  for (const std::string& f : m.files) {
    all.push_back(read_schedule(f, unit));
    if (all.back().first != all.front().first)
      refuse(f, "its segments are not those of " + m.files.front() + " (other text or other cuts)");
  }
  Schedule out = all.front();
  if (all.size() > 1)
    for (size_t w = 0; w < out.k.size(); ++w)
      for (size_t u = 0; u < out.k[w].size(); ++u) {
        double sum = 0;
        for (const Schedule& s : all) sum += s.k[w][u];
        out.k[w][u] = nearest_option(sum / double(all.size()), options);
      }
  if (m.shuffle_seed >= 0) shuffle_within_segments(out, uint64_t(m.shuffle_seed));
  if (!m.order_file.empty()) {
    const Units order = read_units(m.order_file, unit, "score", false);
    if (order.first != out.first) refuse(m.order_file, "its segments are not those of " + m.files.front());
    order_within_segments(out, order);
  }
  Replay r;
  r.detail = all.size() == 1 ? "replays the oracle K of " + m.files.front()
                             : "the step option nearest the mean oracle K of " + std::to_string(all.size()) + " runs";
  if (m.shuffle_seed >= 0)
    r.detail += ", permuted within each segment (seed " + std::to_string(m.shuffle_seed) + "): the same steps in random places";
  if (!m.order_file.empty())
    r.detail += ", placed within each segment in the order of the scores of " + m.order_file + " (the same steps)";
  r.detail += " (labels chose them: a diagnostic, not a policy)";
  r.first = out.first;
  r.source = m.files.front();
  r.policy = std::make_unique<policy::ReplayPolicy>(m.name, std::move(out.k), std::move(out.first));
  return r;
}

void check_replay_text(const Replay& r, const std::vector<std::vector<int64_t>>& inputs, int64_t unit) {
  if (inputs.size() != r.first.size())
    replay::refuse(r.source, "it holds " + std::to_string(r.first.size()) + " segments, this comparison reads " +
                                 std::to_string(inputs.size()) + ": it was made on other segments (other streams.* settings?)");
  for (size_t w = 0; w < inputs.size(); ++w) {
    const std::vector<int>& first = r.first[w];
    if (first.size() * size_t(unit) != inputs[w].size())
      replay::refuse(r.source, "segment " + std::to_string(w) + " has " + std::to_string(first.size()) +
                                   " units, this comparison's " + std::to_string(inputs[w].size() / size_t(unit)) +
                                   ": it was made on other segments (or a method with a longer unit pads them)");
    for (size_t u = 0; u < first.size(); ++u)
      if (inputs[w][u * size_t(unit)] != first[u])
        replay::refuse(r.source, "unit " + std::to_string(u) + " of segment " + std::to_string(w) + " starts with token " +
                                     std::to_string(first[u]) + " where this comparison reads " +
                                     std::to_string(inputs[w][u * size_t(unit)]) + ": it was made on other segments");
  }
}

}  // namespace ponder::cli
