// The positive control's verdict and the oracle headroom it rests on, on hand-made comparison results whose answer
// is known: the headroom is taken over the best uniform schedule within the budget's FLOPs (not the budget's own),
// its interval comes from the paired streams, and the verdict fails when the interval reaches 0 or when the oracle
// does not spend more on text units than on noise units. Also: `--set` / `--seed` overrides, and the tokens view.
#include <doctest/doctest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "experiments/model/config.h"
#include "experiments/study/control.h"
#include "experiments/study/plots.h"
#include "experiments/study/report.h"
#include "test_util.h"

using namespace ponder;
using namespace ponder::cli;
using ponder::test::error_of;

namespace {

// A method whose one seed scores `bpb` on each stream, at `inner` inner FLOPs per token over a base of 100.
MethodResult method(const std::string& name, const std::string& kind, double inner, std::vector<double> bpb) {
  MethodResult m;
  m.name = name;
  m.kind = methods::parse_kind(kind);
  SeedResult s;
  s.base_per_token = 100;
  s.inner_per_token = inner;
  s.window_bpb = bpb;
  for (double b : bpb) s.bpb += b / double(bpb.size());
  m.seeds.push_back(s);
  return m;
}

std::vector<double> shifted(const std::vector<double>& v, double by) {
  std::vector<double> out = v;
  for (double& x : out) x += by;
  return out;
}

// Streams where uniform-1 beats uniform-2 (which costs more), and an oracle frontier whose μ = 0.05 point costs
// less than uniform-2 and beats uniform-1 by `gain` on every stream (± a small per-stream wobble).
CompareResult planted_result(double gain) {
  const std::vector<double> u1 = {3.0, 3.2, 2.9, 3.1, 3.05, 2.95, 3.15, 3.0};
  CompareResult r;
  r.methods.push_back(method("oracle", "oracle", 15, shifted(u1, -gain)));
  r.methods.push_back(method("uniform-0", "uniform", 0, shifted(u1, 0.9)));
  r.methods.push_back(method("uniform-1", "uniform", 10, u1));
  r.methods.push_back(method("uniform-2", "uniform", 20, shifted(u1, 0.01)));
  r.methods.push_back(method("entropy", "heuristic", 19, shifted(u1, 0.2)));
  FrontierPoint p0{0.0, 0, 30, 100, 2.5, shifted(u1, -gain - 0.01)};  // over budget: must not be chosen
  FrontierPoint p1{0.05, 0, 15, 100, 1.5, {}};
  for (size_t i = 0; i < u1.size(); ++i) p1.window_bpb.push_back(u1[i] - gain + (i % 2 ? 0.002 : -0.002));
  for (FrontierPoint* p : {&p0, &p1})
    for (double b : p->window_bpb) p->bpb += b / double(p->window_bpb.size());
  r.frontier = {p0, p1};
  // 4 text units (first token 'a') and 4 noise units ('.'): the oracle spends 2 on text, 1 on noise.
  r.oracle_units.k = {2, 1, 2, 1, 2, 1, 2, 1};
  r.oracle_units.first_token = {'a', '.', 'b', '.', 'c', '.', 'd', '.'};
  return r;
}

CompareOptions control_options() {
  CompareOptions o;
  o.budget_k = 2;
  o.streams = true;
  o.seeds = 1;
  return o;
}

}  // namespace

TEST_CASE("oracle headroom: over the best uniform within the budget's FLOPs, from the frontier point that fits") {
  const CompareResult r = planted_result(0.05);
  const Headroom h = oracle_headroom(r, r.methods[3]);  // budget: uniform-2
  CHECK(h.uniform == "uniform-1");                     // cheaper and better than uniform-2
  CHECK(h.mu == doctest::Approx(0.05));                // μ = 0 costs 130 > 120: not admissible
  CHECK(h.flops == doctest::Approx(115));
  CHECK(h.base_flops == doctest::Approx(120));
  CHECK(h.bpb == doctest::Approx(0.05));
  CHECK(h.n == 8);
  CHECK(h.lo > 0.045);
  CHECK(h.hi < 0.055);
  CHECK(h.lo <= h.bpb);
  CHECK(h.bpb <= h.hi);
}

TEST_CASE("oracle headroom: short of the budget only when a frontier point spends more and the one read is far under") {
  CompareResult r = planted_result(0.05);
  CHECK_FALSE(headroom_short_of_budget(r, oracle_headroom(r, r.methods[3])));  // 115 of 120: close enough
  r.frontier[1].inner_per_token = 0;  // the point that fits now spends 100 of 120: the search stopped short
  CHECK(headroom_short_of_budget(r, oracle_headroom(r, r.methods[3])));
  const ControlVerdict v = judge_control(planted_result(-0.05), control_options());
  CHECK(std::none_of(v.failed.begin(), v.failed.end(), [](const std::string& f) { return f.find("μ search") != std::string::npos; }));
  r.frontier.erase(r.frontier.begin());  // no point spends more than the budget: the oracle just wants less
  CHECK_FALSE(headroom_short_of_budget(r, oracle_headroom(r, r.methods[3])));
}

TEST_CASE("positive control: a failure read far under the budget names the μ search") {
  CompareResult r = planted_result(-0.05);
  r.frontier[1].inner_per_token = 0;
  const ControlVerdict v = judge_control(r, control_options());
  CHECK_FALSE(v.passed);
  CHECK(std::any_of(v.failed.begin(), v.failed.end(), [](const std::string& f) {
    return f.find("spends only 83 % of it") != std::string::npos && f.find("compare.oracle_bisect") != std::string::npos;
  }));
}

TEST_CASE("positive control: passes on a clear planted effect and reports each method against the baseline") {
  const ControlVerdict v = judge_control(planted_result(0.05), control_options());
  CHECK(v.passed);
  CHECK(v.failed.empty());
  CHECK(v.baseline == "uniform-1");
  CHECK(v.k_text == doctest::Approx(2.0));
  CHECK(v.k_noise == doctest::Approx(1.0));
  CHECK(v.n_text == 4);
  CHECK(v.n_noise == 4);
  bool saw_entropy = false;
  for (const auto& m : v.methods) {
    CHECK(m.name != "oracle");
    CHECK(m.name != "uniform-1");
    if (m.name != "entropy") continue;
    saw_entropy = true;
    CHECK(m.delta == doctest::Approx(0.2));
    CHECK(m.flops_ratio == doctest::Approx(119.0 / 110.0));
    CHECK(m.recovered == doctest::Approx(-0.2 / 0.05));
  }
  CHECK(saw_entropy);
  const auto j = control_json(v);
  CHECK(j["passed"].get<bool>());
  CHECK(j["oracle_headroom"]["ci95"][0].get<double>() > 0);
  CHECK(control_markdown(v, "x/report.md").find("**Passed in this build**") != std::string::npos);
}

TEST_CASE("positive control: says whether the adaptive policies it ran recovered any of the planted headroom") {
  CompareResult r = planted_result(0.05);
  const std::string none = control_markdown(judge_control(r, control_options()), "x");
  CHECK(none.find("Of the adaptive policies it ran (`entropy`), none recovered any of the planted headroom (best "
                  "`entropy`, -4.00)") != std::string::npos);
  r.methods.push_back(method("learned-reinforce", "reinforce", 18, shifted(r.methods[2].seeds[0].window_bpb, -0.02)));
  r.methods.push_back(method("random", "random", 20, shifted(r.methods[2].seeds[0].window_bpb, -0.03)));
  const std::string some = control_markdown(judge_control(r, control_options()), "x");
  INFO(some);
  CHECK(some.find("recovered part of the planted headroom (point estimates): `learned-reinforce` (+0.40); of the "
                  "others it ran, none did") != std::string::npos);  // random is no adaptive policy: not listed
  CHECK(some.find("`random` (") == std::string::npos);
  ControlVerdict old = judge_control(r, control_options());
  old.methods.push_back({"fixed-2/3", 0.0, 1.0, 0.5});  // a name this build no longer parses: not counted, no error
  std::string old_md;
  CHECK_NOTHROW(old_md = control_markdown(old, "x"));
  CHECK(old_md.find("`fixed-2/3` (+0.50)") == std::string::npos);  // it recovered half, but is not a known policy
  CHECK(old_md.find("| fixed-2/3 | +0.0000 |") != std::string::npos);  // still in the table
  r.methods.erase(r.methods.begin() + 4, r.methods.end());  // entropy and after: only schedules and the oracle
  CHECK(control_markdown(judge_control(r, control_options()), "x").find("It ran no adaptive policy") != std::string::npos);
}

TEST_CASE("positive control: fails when the oracle's headroom interval reaches 0, or when it spends on noise") {
  CHECK(control_options().criteria.control_headroom == doctest::Approx(0.01));  // the floor the subcases test against
  SUBCASE("no headroom") {
    const ControlVerdict v = judge_control(planted_result(0.0), control_options());
    CHECK_FALSE(v.passed);
    REQUIRE(v.failed.size() == 1);
    CHECK(v.failed[0].find("not above 0") != std::string::npos);
    CHECK(control_markdown(v, "x").find("**FAILED in this build**") != std::string::npos);
  }
  SUBCASE("a real but small headroom: below the floor it fails, without a floor it passes") {
    const ControlVerdict v = judge_control(planted_result(0.004), control_options());
    CHECK(v.headroom.lo > 0);
    CHECK_FALSE(v.passed);
    REQUIRE(v.failed.size() == 1);
    CHECK(v.failed[0].find("not above 0.01 bits/byte") != std::string::npos);
    CompareOptions no_floor = control_options();
    no_floor.criteria.control_headroom = 0;
    CHECK(judge_control(planted_result(0.004), no_floor).passed);
  }
  SUBCASE("K on noise units") {
    CompareResult r = planted_result(0.05);
    r.oracle_units.k = {1, 2, 1, 2, 1, 2, 1, 2};
    const ControlVerdict v = judge_control(r, control_options());
    CHECK_FALSE(v.passed);
    REQUIRE(v.failed.size() == 1);
    CHECK(v.failed[0].find("text units") != std::string::npos);
  }
  SUBCASE("the budget's schedule did not run") {
    CompareResult r = planted_result(0.05);
    r.methods.erase(r.methods.begin() + 3);
    const ControlVerdict v = judge_control(r, control_options());
    CHECK_FALSE(v.passed);
    REQUIRE(v.failed.size() == 1);
    CHECK(v.failed[0].find("uniform-2 did not run") != std::string::npos);
  }
}

TEST_CASE("positive control: a verdict survives its results.json, and other reports state it for this build only") {
  const ControlVerdict v = judge_control(planted_result(0.05), control_options());
  const ControlVerdict back = control_from_json(nlohmann::json::parse(control_json(v).dump()));
  CHECK(control_json(back).dump() == control_json(v).dump());
  CHECK(back.passed);
  CHECK(back.headroom.lo == doctest::Approx(v.headroom.lo));

  const std::string dir = "test_control_status_dir";
  std::filesystem::remove_all(dir);
  CHECK(control_status(dir, "abc").find("not run in this build") != std::string::npos);
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json j = {{"commit", "abc"}, {"positive_control", control_json(v)}};
  std::ofstream(dir + "/results.json") << j.dump();
  CHECK(control_status(dir, "abc").find("passed in this build") != std::string::npos);
  CHECK(control_status(dir, "def").find("is from commit abc") != std::string::npos);
  CHECK(control_status(dir, "abc-dirty").find("not run in this build") != std::string::npos);
  j["positive_control"]["passed"] = false;
  std::ofstream(dir + "/results.json") << j.dump();
  CHECK(control_status(dir, "abc").find("FAILED in this build") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("--set overrides keep YAML types, --seed is train.seed, and malformed or unknown keys are refused") {
  const std::string base = "model:\n  d: 32\ntrain:\n  steps: 10\n  warmup: 2\n  lr: 0.003\n";
  const RunConfig c = parse_config(with_overrides(base, {"train.lr=1e-3", "train.seed=7", "compare.step_options=[0, 2]"}),
                                   "test");
  CHECK(c.train.lr == doctest::Approx(1e-3));
  CHECK(c.train.seed == 7);
  CHECK(c.train.steps == 10);
  CHECK(c.compare.step_options == std::vector<int>{0, 2});
  CHECK(error_of([&] { with_overrides(base, {"lr=1"}); }).find("expected section.key=value") != std::string::npos);
  CHECK(error_of([&] { with_overrides(base, {"train.lr"}); }).find("expected section.key=value") != std::string::npos);
  const std::string unknown =
      error_of([&] { parse_config(with_overrides(base, {"train.lrr=1"}), "test"); });
  CHECK(unknown.find("lrr") != std::string::npos);
}

TEST_CASE("tokens view: UTF-8 characters stay whole, markup is escaped, a stray byte shows as U+FFFD") {
  const std::string text = "What\xE2\x80\x99s <ok> \xFF\xC3\xA9";
  CHECK(utf8_char_length({0x41}, 0) == 1);
  CHECK(utf8_char_length({0xE2, 0x80, 0x99}, 0) == 3);
  CHECK(utf8_char_length({0xE2, 0x80}, 0) == 0);        // cut short
  CHECK(utf8_char_length({0xE2, 0x41, 0x99}, 0) == 0);  // not a continuation byte
  CHECK(utf8_char_length({0x80}, 0) == 0);              // a continuation byte cannot start a character
  CompareResult r;
  r.mini_batch = 4;
  for (unsigned char c : text) r.passage_tokens.push_back(int32_t(c));
  MethodResult m;
  m.name = "uniform-1";
  m.passage_k = std::vector<int>(8, 1);
  m.passage_loss = std::vector<double>(r.passage_tokens.size(), std::log(2.0));  // one bit per byte
  r.methods.push_back(m);
  m.name = "oracle";
  m.passage_k = std::vector<int>(8, 2);
  r.methods.push_back(m);
  const std::string path = "test_tokens_view.html";
  CHECK_THROWS_WITH_AS(write_tokens_html(r, {"oracle", "nope"}, path), doctest::Contains("'nope'"), std::invalid_argument);
  write_tokens_html(r, {"oracle", "uniform-1"}, path);
  std::ifstream in(path);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  CHECK(html.find(">\xE2\x80\x99</span>") != std::string::npos);  // the apostrophe, whole, in one span
  CHECK(html.find(">\xC3\xA9</span>") != std::string::npos);
  CHECK(html.find("&lt;") != std::string::npos);
  CHECK(html.find(">\xEF\xBF\xBD</span>") != std::string::npos);
  CHECK(html.find("\xFF") == std::string::npos);
  // side by side, each method's K, and the bits of a character summed over its bytes (the first byte has none)
  CHECK(html.find("<code>oracle</code>") < html.find("<code>uniform-1</code>"));
  CHECK(html.find("<code>uniform-1</code>") != std::string::npos);
  CHECK(html.find("K=2, 3.00 bits'") != std::string::npos);
  CHECK(html.find("unit 1, K=1, 3.00 bits' style='background:#cfe3f7'>\xE2\x80\x99</span>") != std::string::npos);
  CHECK(html.find("unit 0, K=1' style") != std::string::npos);  // 'W': nothing predicted it
}
