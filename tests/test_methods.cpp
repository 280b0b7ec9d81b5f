// The method registry (methods/registry.h): every name parses once into a typed spec with its family, kind and
// learner overrides, bad names and bad overrides are refused by name at parse time, and the schedules the registry
// builds itself decide as their names say.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "methods/learned.h"
#include "methods/registry.h"

using namespace ponder;
using namespace ponder::methods;
using policy::Policy;
using policy::Score;
using policy::UnitFeatures;

TEST_CASE("method registry: every form parses to its family and canonical name, bad names are refused by name") {
  const MethodSpec u = parse_method("uniform-02");
  CHECK((u.family == MethodFamily::Uniform && u.k == 2 && u.name == "uniform-2"));
  const MethodSpec e = parse_method("every-4/3");
  CHECK((e.family == MethodFamily::Every && e.k == 4 && e.every == 3 && e.name == "every-4/3"));
  CHECK(parse_method("random").family == MethodFamily::Random);
  CHECK(parse_method("oracle").family == MethodFamily::Oracle);
  const MethodSpec h = parse_method("ttt-loss");
  CHECK((h.family == MethodFamily::Heuristic && h.score == Score::TTTLoss));
  const MethodSpec l = parse_method("learned-reinforce[gamma=0.5]");
  CHECK((l.family == MethodFamily::Learned && l.learner == Learner::Reinforce && l.name == "learned-reinforce[gamma=0.5]"));
  CHECK(kind_name(l.kind()) == std::string("reinforce"));
  CHECK(kind_name(parse_method("pondernet").kind()) == std::string("pondernet"));
  CHECK(kind_name(parse_method("learned-ppo-pid").kind()) == std::string("ppo-pid"));
  CHECK(kind_name(e.kind()) == std::string("every"));
  const MethodSpec g = parse_method("gate-ttt-loss");
  CHECK((g.family == MethodFamily::Heuristic && g.ema_gate && g.score == Score::TTTLoss && g.name == "gate-ttt-loss"));
  CHECK((kind_name(g.kind()) == std::string("gate") && kind_name(h.kind()) == std::string("heuristic") && !h.ema_gate));
  CHECK(fast_weight_refusal(g).find("inner loss") != std::string::npos);
  const MethodSpec el = parse_method("easy-loss"), eg = parse_method("gate-easy-ttt-loss");
  CHECK((el.family == MethodFamily::Heuristic && el.score == Score::EasyLoss && el.name == "easy-loss" && !el.ema_gate));
  CHECK((eg.ema_gate && eg.score == Score::EasyTTTLoss && kind_name(eg.kind()) == std::string("gate")));
  CHECK((fast_weight_refusal(el).empty() && !fast_weight_refusal(eg).empty()));
  CHECK_THROWS_WITH_AS(parse_method("easy-random"), doctest::Contains("unknown method 'easy-random'"), std::invalid_argument);
  CHECK(fast_weight_refusal(parse_method("gate-loss")).empty());
  CHECK(fast_weight_refusal(parse_method("pondernet")).empty());  // its trials run on fast weights too
  // The recon scores exist only at carry mode's After stage: refused wherever a unit's K is decided before it runs.
  policy::RolloutOptions carry, one_stage, prefix;
  one_stage.two_stage = false;
  prefix.mode = ttt::StepMode::Prefix;
  for (const char* name : {"recon", "gate-recon", "easy-recon-drop"}) {
    INFO(name);
    const MethodSpec r = parse_method(name);
    CHECK(posthoc_refusal(r, carry).empty());
    CHECK(posthoc_refusal(r, one_stage).find("would leak") != std::string::npos);
    CHECK(posthoc_refusal(r, prefix).find("compare.mode: carry") != std::string::npos);
    CHECK(!fast_weight_refusal(r).empty());
  }
  CHECK(posthoc_refusal(parse_method("loss"), prefix).empty());
  const MethodSpec rp = parse_method("replay:a/oracle.json+b.json");
  CHECK((rp.family == MethodFamily::Replay && kind_name(rp.kind()) == std::string("replay") && rp.name == "replay:a/oracle.json+b.json"));
  CHECK(rp.files == std::vector<std::string>{"a/oracle.json", "b.json"});
  for (const char* bad : {"replay:", "replay:a+", "replay:+a", "replay:a++b"})
    CHECK_THROWS_WITH_AS(parse_method(bad), doctest::Contains("expected replay:FILE[+FILE...]"), std::invalid_argument);
  const MethodSpec fr = parse_method("front-04");
  CHECK((fr.family == MethodFamily::Front && fr.k == 4 && fr.name == "front-4" && kind_name(fr.kind()) == std::string("front")));
  for (const char* bad : {"uniform-", "uniform--1", "uniform-4294967296", "uniform-1x", "every-1/0", "every-1", "front-",
                          "front-x",
                          "every-a/2", "fixed-1/2", "learned-reinforce[gamma=1", "reinforce", "", "Oracle", "gate-",
                          "gate-oracle", "gate-loss2"})
  {
    std::string quoted = "'";  // appended, not "'" + …: GCC 12 warns falsely (-Wrestrict) on that when inlined
    quoted += bad;
    quoted += "'";
    CHECK_THROWS_WITH_AS(parse_method(bad), doctest::Contains(quoted.c_str()), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_method("fixed-1/2"), doctest::Contains("every-K/N"));
  CHECK_THROWS_WITH(parse_methods({"uniform-1", "uniform-01"}), doctest::Contains("listed twice"));
  // the schedules the registry builds itself decide as their names say; fitted families are refused there
  UnitFeatures f;
  f.unit = 3;
  CHECK(schedule_policy(u)->decide(f) == 2);
  CHECK(schedule_policy(e)->decide(f) == 4);
  CHECK(schedule_policy(e)->name() == e.name);
  CHECK_THROWS_WITH_AS(schedule_policy(h), doctest::Contains("fitted"), std::invalid_argument);
}

TEST_CASE("front-K spends the whole budget as early as it can: K per unit, rounded down to the options, then none") {
  CHECK_THROWS_WITH(schedule_policy(parse_method("front-2")), doctest::Contains("step options"));
  const std::unique_ptr<Policy> front = schedule_policy(parse_method("front-4"), 1.0, {0, 1, 2, 4});
  for (int pass = 0; pass < 2; ++pass) {  // a new sequence restarts the budget
    front->begin_sequence(uint64_t(pass));
    std::vector<int> ks;
    for (int64_t u = 0; u < 7; ++u) {
      UnitFeatures f;
      f.unit = u;
      f.n_units = 7;
      ks.push_back(front->decide(f));
    }
    CHECK(ks == std::vector<int>{4, 2, 1, 0, 0, 0, 0});  // 7 steps: 4, then the largest option within what is left
  }
}

TEST_CASE("a method's kind is named as results.json names it, and a results file's kind parses back") {
  for (const char* name : {"uniform-1", "every-2/3", "front-2", "random", "loss", "gate-entropy", "learned-reinforce",
                           "learned-ppo-pid", "pondernet", "oracle", "replay:a.json"}) {
    const MethodKind k = parse_method(name).kind();
    CHECK(parse_kind(kind_name(k)) == k);
  }
  CHECK(std::string(kind_name(MethodKind::PpoPid)) == "ppo-pid");
  CHECK((reads_labels(MethodKind::Oracle) && reads_labels(MethodKind::Replay) && !reads_labels(MethodKind::Gate)));
  CHECK_THROWS_WITH_AS(parse_kind("fixed"), "unknown method kind 'fixed'", std::invalid_argument);
}

TEST_CASE("a learned method's bracketed overrides are typed when its name is parsed, and applied to learn:") {
  const MethodSpec m = parse_method("learned-ppo-pid[gamma=0.5,options=1/2/8,net=lstm,iters=7,probe=1]");
  CHECK((m.learner == Learner::PpoPid && m.overrides.gamma == 0.5 && !m.overrides.lambda));
  CHECK((m.overrides.options == std::vector<int>{1, 2, 8} && m.overrides.net == std::string("lstm")));
  LearnOptions base;
  base.hidden = 9;
  const LearnOptions lo = learned_options(m, base);
  CHECK((lo.ppo.gamma == 0.5 && lo.reinforce.gamma == 0.5 && lo.options == std::vector<int>{1, 2, 8}));
  CHECK((lo.net == "lstm" && lo.hidden == 9 && lo.probe && lo.ppo.iterations == 7 && lo.pondernet.iterations == 7));
  CHECK(learned_options(parse_method("pondernet"), base).net == "mlp");  // no brackets: learn: as it is
  // a malformed override is refused by parse_method, before any config is checked
  CHECK_THROWS_WITH_AS(parse_method("learned-reinforce[depth=2]"), doctest::Contains("unknown override 'depth'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_method("pondernet[gamma=x]"), doctest::Contains("gamma needs a number, got 'x'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_method("learned-reinforce[options=4]"), doctest::Contains("at least two step counts"),
                       std::invalid_argument);
  // a value is checked against the settings it lands on
  CHECK_THROWS_WITH_AS(learned_options(parse_method("learned-reinforce[net=gru]"), base),
                       doctest::Contains("net must be mlp or lstm, got 'gru'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(learned_options(parse_method("uniform-1"), base), doctest::Contains("not a learned method"),
                       std::invalid_argument);
}

