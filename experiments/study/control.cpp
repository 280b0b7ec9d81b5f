#include "experiments/study/control.h"

#include <cmath>
#include <sstream>


#include "experiments/study/result_util.h"
#include "methods/registry.h"
#include "util/files.h"

namespace ponder::cli {
namespace {

using nlohmann::ordered_json;

// The oracle's mean K on noise units (first input byte '.') and on the others.
void k_by_kind(const OracleUnits& u, ControlVerdict& v) {
  double text = 0, noise = 0;
  for (size_t i = 0; i < u.k.size() && i < u.first_token.size(); ++i) {
    const bool is_noise = u.first_token[i] == double('.');
    (is_noise ? noise : text) += u.k[i];
    ++(is_noise ? v.n_noise : v.n_text);
  }
  v.k_text = v.n_text ? text / double(v.n_text) : NAN;
  v.k_noise = v.n_noise ? noise / double(v.n_noise) : NAN;
}

}  // namespace

ControlVerdict judge_control(const CompareResult& r, const CompareOptions& opt) {
  ControlVerdict v;
  const std::string budget = "uniform-" + std::to_string(opt.budget_k);
  const MethodResult* budget_run = find(r, budget);
  if (!budget_run || budget_run->seeds.empty()) {
    v.failed.push_back("the budget's schedule " + budget + " did not run (add it to compare.methods)");
    return v;
  }
  v.headroom = oracle_headroom(r, *budget_run);
  v.baseline = v.headroom.uniform;
  const MethodResult* base = find(r, v.baseline);
  k_by_kind(r.oracle_units, v);
  const double floor = v.floor = opt.criteria.control_headroom;
  if (!(v.headroom.lo > floor)) {
    v.failed.push_back("the oracle's headroom over " + v.baseline + " at equal FLOPs is not above " +
                       fmt("%.4g", floor) + " bits/byte (compare.criteria_control_headroom; 95% CI [" +
                       fmt("%+.4f", v.headroom.lo) + ", " + fmt("%+.4f", v.headroom.hi) + "])");
    // A frontier point far under the budget compares a cheaper oracle with the budget's schedule: say so, since the
    // cause is then the μ search, not the oracle (the sweep's μ were too coarse for the per-chunk gains).
    const double reached = v.headroom.flops / v.headroom.base_flops;
    if (headroom_short_of_budget(r, v.headroom))
      v.failed.push_back("the oracle frontier's best point within the budget spends only " + fmt("%.0f", 100 * reached) +
                         " % of it, so the headroom is measured against a cheaper oracle: the μ search did not reach "
                         "the budget (raise compare.oracle_bisect, or add smaller compare.frontier_mus)");
  }
  if (!(v.k_text > v.k_noise))
    v.failed.push_back("the oracle does not spend more steps on text units (mean K " + fmt("%.2f", v.k_text) +
                       ") than on noise units (" + fmt("%.2f", v.k_noise) + ")");
  v.passed = v.failed.empty();
  const double base_flops = seed_mean(*base, total_of);
  for (const MethodResult& m : r.methods) {
    if (m.kind == methods::MethodKind::Oracle || m.name == base->name || m.seeds.size() != base->seeds.size()) continue;
    ControlVerdict::Method cm{m.name};
    cm.delta = stats::mean(paired_differences(m, *base, opt.streams));
    cm.flops_ratio = seed_mean(m, total_of) / base_flops;
    cm.recovered = -cm.delta / v.headroom.bpb;
    v.methods.push_back(cm);
  }
  return v;
}

ordered_json control_json(const ControlVerdict& v) {
  const Headroom& h = v.headroom;
  ordered_json methods = ordered_json::array();
  for (const auto& m : v.methods)
    methods.push_back({{"method", m.name}, {"delta_bpb", m.delta}, {"flops_ratio", m.flops_ratio},
                       {"headroom_recovered", m.recovered}});
  return {{"passed", v.passed},
          {"headroom", h.bpb},  // the same as oracle_headroom.bpb / ci95: the short form other tools read
          {"ci", {h.lo, h.hi}},
          {"failed", v.failed},
          {"baseline", v.baseline},
          {"min_headroom", v.floor},
          {"oracle_headroom", {{"bpb", h.bpb}, {"ci95", {h.lo, h.hi}}, {"n_paired", h.n}, {"mu", h.mu},
                               {"total_flops_per_token", h.flops}, {"budget_total_flops_per_token", h.base_flops}}},
          {"oracle_mean_k", {{"text_units", v.k_text}, {"noise_units", v.k_noise}, {"n_text", v.n_text},
                             {"n_noise", v.n_noise}}},
          {"methods", methods}};
}

ControlVerdict control_from_json(const nlohmann::json& j) {
  auto num = [](const nlohmann::json& x) { return x.is_number() ? x.get<double>() : NAN; };  // NaN is stored as null
  ControlVerdict v;
  v.passed = j.at("passed").get<bool>();
  v.failed = j.at("failed").get<std::vector<std::string>>();
  v.baseline = j.at("baseline").get<std::string>();
  v.floor = j.value("min_headroom", 0.0);
  const nlohmann::json& h = j.at("oracle_headroom");
  v.headroom = {v.baseline, num(h.at("bpb")), num(h.at("ci95")[0]), num(h.at("ci95")[1]), h.at("n_paired").get<int64_t>(),
                num(h.at("mu")), num(h.at("total_flops_per_token")), num(h.at("budget_total_flops_per_token")), {}};
  const nlohmann::json& k = j.at("oracle_mean_k");
  v.k_text = num(k.at("text_units"));
  v.k_noise = num(k.at("noise_units"));
  v.n_text = k.at("n_text").get<int64_t>();
  v.n_noise = k.at("n_noise").get<int64_t>();
  for (const nlohmann::json& m : j.at("methods"))
    v.methods.push_back({m.at("method").get<std::string>(), num(m.at("delta_bpb")), num(m.at("flops_ratio")),
                         num(m.at("headroom_recovered"))});
  return v;
}

std::string control_status(const std::string& dir, const std::string& commit) {
  const std::string results = dir + "/results.json";
  const std::optional<std::string> text = util::read_file(results);
  const nlohmann::json j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  const std::string how = " Run `ponder control` (results in results/control/) to check that this build finds the "
                          "effect planted in generated data; without it, a null result here says nothing about allocation.";
  if (!j.is_object() || !j.contains("positive_control"))
    return "**Positive control: not run in this build.**" + how + "\n\n";
  const std::string ran = j.value("commit", "unknown");
  if (ran != commit || commit.find("dirty") != std::string::npos)
    return "**Positive control: not run in this build** (" + results + " is from commit " + ran + ", this is " + commit +
           ")." + how + "\n\n";
  const bool passed = j["positive_control"].value("passed", false);
  return std::string(passed ? "**Positive control: passed in this build**" : "**Positive control: FAILED in this build**") +
         " (" + results + "): the pipeline " + (passed ? "finds" : "does not find") +
         " the effect planted in generated data (report: " + dir + "/report.md).\n\n";
}

namespace {

// A heuristic or learned policy, by the method registry. A name it no longer knows (a control's results.json written
// by an older build, read back by control_from_json) is not counted rather than failing the report.
bool adaptive(const std::string& name) {
  try {
    const methods::MethodFamily f = methods::parse_method(name).family;
    return f == methods::MethodFamily::Heuristic || f == methods::MethodFamily::Learned;
  } catch (const std::invalid_argument&) {
    return false;
  }
}

// What the control says about the adaptive policies it ran. The pass is a check of the pipeline (the oracle finds the
// planted headroom), not of a policy: a policy shows it can find such an effect only by recovering part of it itself.
std::string policy_recovery(const ControlVerdict& v) {
  std::string ran, found;
  const ControlVerdict::Method* best = nullptr;
  for (const auto& m : v.methods) {
    if (!adaptive(m.name)) continue;
    ran += (ran.empty() ? "`" : ", `") + m.name + "`";
    if (m.recovered > 0) found += (found.empty() ? "`" : ", `") + m.name + "` (" + fmt("%+.2f", m.recovered) + ")";
    if (!best || m.recovered > best->recovered) best = &m;
  }
  if (!best)
    return " It ran no adaptive policy, so it says nothing about whether any policy can find such an effect.";
  if (found.empty())
    return " Of the adaptive policies it ran (" + ran + "), none recovered any of the planted headroom (best `" +
           best->name + "`, " + fmt("%+.2f", best->recovered) + "): the control shows that the pipeline can measure an "
           "allocation effect, not that these policies find one, so a null of theirs below is about them, not about "
           "allocation; policies it did not run are not checked by it.";
  return " Adaptive policies that recovered part of the planted headroom (point estimates): " + found +
         "; of the others it ran, none did; policies it did not run are not checked by it.";
}

}  // namespace

std::string control_markdown(const ControlVerdict& v, const std::string& report_path) {
  std::ostringstream md;
  const Headroom& h = v.headroom;
  md << "## Positive control\n\n"
     << (v.passed ? "**Passed in this build**" : "**FAILED in this build**")
     << ": on generated documents where inner steps provably pay on text lines and not on noise lines "
        "(data/planted.h), the pipeline finds an oracle headroom over "
     << v.baseline << " of " << fmt("%+.4f", h.bpb) << " bits/byte at no more than its FLOPs (95% CI ["
     << fmt("%+.4f", h.lo) << ", " << fmt("%+.4f", h.hi) << "], paired over " << h.n
     << " streams; the pass mark is a lower bound above " << fmt("%.4g", v.floor)
     << "), and the oracle spends mean K " << fmt("%.2f", v.k_text) << " on text units against "
     << fmt("%.2f", v.k_noise) << " on noise units.";
  for (const std::string& f : v.failed) md << " Not met: " << f << ".";
  md << " Without a passing control, a null result below says nothing about allocation." << policy_recovery(v)
     << " Full report: "
     << report_path << ".\n\n| method | Δbpb vs " << v.baseline
     << " (paired) | FLOPs vs it | share of the oracle's headroom recovered |\n|---|---|---|---|\n";
  for (const auto& m : v.methods)
    md << "| " << m.name << " | " << fmt("%+.4f", m.delta) << " | " << fmt("%.3f", m.flops_ratio) << "× | "
       << fmt("%+.2f", m.recovered) << " |\n";
  return md.str() + "\n";
}

}  // namespace ponder::cli
