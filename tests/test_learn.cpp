// Learned allocation: policy nets (causal, step == forward), the PonderNet halting distribution against the
// plain reference, and the learners on a synthetic problem whose right allocation is known.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <set>

#include "autograd/gradcheck.h"
#include "rl/halting.h"
#include "rl/pondernet.h"
#include "rl/ppo_pid.h"
#include "rl/reinforce.h"
#include "rl/synthetic.h"
#include "rl/ttt_env.h"
#include "tests/policy_fixtures.h"

using namespace ponder;
using namespace ponder::policy;
using namespace ponder::rl;

namespace {

const FeatureNeeds kNeeds{true, true, true, false};

// Average loss and cost per unit and the mean K on hard / easy units over every context, sampled policy.
struct Outcome {
  double loss = 0, cost = 0, k_hard = 0, k_easy = 0;
};
Outcome evaluate(SyntheticEnv& env, Policy& p, int64_t contexts, int64_t reps = 4) {
  Outcome o;
  double units = 0, hard = 0, easy = 0;
  for (int64_t c = 0; c < contexts; ++c)
    for (int64_t r = 0; r < reps; ++r) {
      // noise-free losses, so the comparison measures the allocation only
      Trajectory t = env.run(p, c, 5000 + uint64_t(c * reps + r));
      for (int64_t u = 0; u < t.size(); ++u) {
        const bool h = env.hard(c, u);
        o.loss += env.loss(h, t.k[size_t(u)]);
        o.cost += t.cost[size_t(u)];
        (h ? o.k_hard : o.k_easy) += t.k[size_t(u)];
        (h ? hard : easy) += 1;
        units += 1;
      }
    }
  o.loss /= units;
  o.cost /= units;
  o.k_hard /= hard;
  o.k_easy /= easy;
  return o;
}

std::shared_ptr<PolicyNet> net(const std::string& kind, int64_t in, int64_t out, uint64_t seed) {
  return std::shared_ptr<PolicyNet>(make_policy_net(kind, in, 32, out, seed));
}

}  // namespace

TEST_CASE("policy nets are causal over units and step() equals forward()") {
  for (const char* kind : {"mlp", "lstm"}) {
    INFO(kind);
    auto n = net(kind, 5, 3, 1);
    Generator g(3);
    Tensor x = g.normal({2, 6, 5}, 0, 1, DType::F32);
    Tensor y = n->forward(x);  // (2, 6, 3)
    // change inputs from unit 4 on: outputs of units 0..3 must not move
    Tensor x2 = raw::contiguous(x);
    {
      std::vector<double> v = x2.to_vector();
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 4; t < 6; ++t)
          for (int64_t f = 0; f < 5; ++f) v[size_t((b * 6 + t) * 5 + f)] += 3.0;
      x2 = Tensor::from_vector(v, {2, 6, 5}, DType::F32);
    }
    Tensor y2 = n->forward(x2);
    const std::vector<double> a = y.to_vector(), b = y2.to_vector();
    for (int64_t bt = 0; bt < 2; ++bt)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t o = 0; o < 3; ++o) CHECK(a[size_t((bt * 6 + t) * 3 + o)] == b[size_t((bt * 6 + t) * 3 + o)]);
    bool later_moved = false;
    for (int64_t t = 4; t < 6; ++t) later_moved |= a[size_t(t * 3)] != b[size_t(t * 3)];
    CHECK(later_moved);  // the perturbation is visible where it may be
    // step() over sequence 0, unit by unit, gives forward()'s rows
    n->reset();
    const std::vector<double> xv = x.to_vector();
    for (int64_t t = 0; t < 6; ++t) {
      std::vector<double> row(xv.begin() + t * 5, xv.begin() + (t + 1) * 5);
      const std::vector<double> out = n->step(row);
      for (int64_t o = 0; o < 3; ++o) CHECK(out[size_t(o)] == doctest::Approx(a[size_t(t * 3 + o)]).epsilon(1e-5));
    }
  }
}

TEST_CASE("halting_log_probs: PonderNet's p_n with λ_N = 1, and its gradients") {
  Generator g(11);
  Tensor z = g.normal({3, 5}, 0, 2, DType::F64);
  const std::vector<double> zv = z.to_vector(), lp = halting_log_probs(z).to_vector();
  for (int64_t u = 0; u < 3; ++u) {
    std::vector<double> lam;
    for (int64_t n = 0; n < 5; ++n) lam.push_back(1 / (1 + std::exp(-zv[size_t(u * 5 + n)])));
    const std::vector<double> ref = pondernet_halting_distribution(lam);
    double total = 0;
    for (int64_t n = 0; n < 5; ++n) {
      CHECK(std::exp(lp[size_t(u * 5 + n)]) == doctest::Approx(ref[size_t(n)]).epsilon(1e-12));
      total += std::exp(lp[size_t(u * 5 + n)]);
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-12));
  }
  auto f = [](const std::vector<Tensor>& in) { return halting_log_probs(in[0]); };
  const CheckResult g1 = gradcheck(f, {z}, {true}), g2 = gradgradcheck(f, {z}, {true});
  CHECK_MESSAGE(g1.ok, g1.message);
  CHECK_MESSAGE(g2.ok, g2.message);
  CHECK(g1.checked > 0);
}

TEST_CASE("a greedy halting policy halts at the mode of PonderNet's p_n") {
  auto n = net("mlp", 3, 5, 9);
  Generator g(4);
  {
    NoGradGuard ng;  // large random weights, so the mode is not always the first step
    for (const Tensor& w : n->parameters()) copy_(w, g.normal(w.shape(), 0, 2, w.dtype()));
  }
  HaltingPolicy pol("pondernet", n, {}, {});
  pol.set_mode(ActMode::Greedy);
  std::set<int> seen;
  for (int trial = 0; trial < 40; ++trial) {
    const std::vector<double> x = {3 * g.uniform01() - 1.5, 3 * g.uniform01() - 1.5, 3 * g.uniform01() - 1.5};
    const std::vector<double> z = n->step(x);  // the MLP is stateless: same logits as act() sees
    std::vector<double> lam;
    for (double v : z) lam.push_back(1 / (1 + std::exp(-v)));
    const std::vector<double> p = pondernet_halting_distribution(lam);
    const int k = pol.act(x);
    CHECK(k == int(std::max_element(p.begin(), p.end()) - p.begin()) + 1);
    seen.insert(k);
  }
  CHECK(seen.size() >= 2);
}

TEST_CASE("learned and halting policies are causal on the language model") {
  ttt::Model model(test::small_hybrid(), 1, DType::F64);
  const int64_t F = feature_count();
  std::vector<std::unique_ptr<Policy>> ps;
  for (const char* kind : {"mlp", "lstm"})
    ps.push_back(std::make_unique<LearnedPolicy>(std::string("learned-") + kind, net(kind, F, 4, 5),
                                                 std::vector<int>{0, 1, 2, 4}, FeatureNorm{}, kNeeds));
  // No option 0: it decides at carry mode's After stage, from the unit's own signals.
  ps.push_back(std::make_unique<LearnedPolicy>("learned-after", net("mlp", F, 3, 7), std::vector<int>{1, 2, 4},
                                               FeatureNorm{}, kNeeds));
  CHECK((ps.back()->posthoc() && !ps.front()->posthoc()));
  ps.push_back(std::make_unique<HaltingPolicy>("pondernet", net("mlp", F, 4, 6), FeatureNorm{}, kNeeds));
  for (auto& p : ps) {
    INFO(p->name());
    CHECK(test::check_policy_causal(model, *p).overhead > 0);  // the net's forward is counted as overhead
  }
}

TEST_CASE("trial losses of the TTT environment are the oracle's per-K objective") {
  ttt::Model model(test::small_hybrid(), 3, DType::F64);
  auto [x, y] = test::random_sequence(4, 24);
  TTTEnv env(model, {{x, y}}, {});
  UniformPolicy one(1);
  Trajectory t = env.run_trials(one, 0, 0, {0, 1, 2});
  REQUIRE(t.trial_loss.size() == 6);
  // unit 0 starts from the initial state whatever was chosen: the oracle with mu = 0 picks its argmin
  Episode oracle = run_oracle(model, x, y, {0, 1, 2}, 0.0, 1, {});
  const auto& row = t.trial_loss[0];
  const int best = int(std::min_element(row.begin(), row.end()) - row.begin());
  CHECK(oracle.units[0].k == std::vector<int>{0, 1, 2}[size_t(best)]);
  // and the episode itself (K = 1 everywhere) is unchanged by the trials
  Trajectory plain = env.run(one, 0, 0);
  CHECK(plain.reward == t.reward);
}

TEST_CASE("REINFORCE learns to put its steps on the hard units and beats uniform at equal budget") {
  SyntheticEnv env({});
  LearnedPolicy pol("learned-reinforce", net("mlp", SyntheticEnv::kFeatures, 4, 1), {0, 1, 2, 4}, {}, {});
  ReinforceConfig cfg;
  cfg.gamma = 0;  // delay 0: a unit's steps pay off in its own reward
  cfg.penalty = 0.5;
  cfg.k_target = 2;
  cfg.iterations = 250;
  cfg.contexts_per_iter = 8;
  auto log = train_reinforce(pol, env, cfg);
  UniformPolicy uniform(2);
  const Outcome u = evaluate(env, uniform, 64), l = evaluate(env, pol, 64);
  MESSAGE("REINFORCE: loss " << l.loss << " (uniform-2 " << u.loss << "), cost " << l.cost << ", K hard " << l.k_hard
                              << ", K easy " << l.k_easy);
  CHECK(l.k_hard > l.k_easy + 1.5);
  CHECK(l.cost <= 2.0 * 1.05);
  CHECK(l.loss < u.loss - 0.05);
}

TEST_CASE("REINFORCE with γ > 0 finds a delayed payoff that γ = 0 cannot credit") {
  SyntheticConfig sc;
  sc.delay = 1;
  sc.skip_penalty = 0;
  SyntheticEnv env(sc);
  auto train = [&](double gamma) {
    LearnedPolicy pol("r", net("mlp", SyntheticEnv::kFeatures, 4, 1), {0, 1, 2, 4}, {}, {});
    ReinforceConfig cfg;
    cfg.gamma = gamma;
    cfg.penalty = 0.5;
    cfg.iterations = 150;
    cfg.contexts_per_iter = 8;
    train_reinforce(pol, env, cfg);
    return evaluate(env, pol, 64);
  };
  const Outcome credit = train(0.9), myopic = train(0.0);
  MESSAGE("delayed payoff: gamma 0.9 K hard " << credit.k_hard << " easy " << credit.k_easy << "; gamma 0 K hard "
                                              << myopic.k_hard << " easy " << myopic.k_easy);
  CHECK(credit.k_hard > credit.k_easy + 1.0);
  CHECK(credit.k_hard - credit.k_easy > myopic.k_hard - myopic.k_easy + 0.5);
}

TEST_CASE("PPO-PID learns the allocation and holds its mean cost within 5% of the budget") {
  SyntheticEnv env({});
  LearnedPolicy pol("learned-ppo-pid", net("mlp", SyntheticEnv::kFeatures, 4, 2), {0, 1, 2, 4}, {}, {});
  PpoPidConfig cfg;
  cfg.budget = 2.0;
  cfg.iterations = 80;
  auto log = train_ppo_pid(pol, env, cfg);
  UniformPolicy uniform(2);
  const Outcome u = evaluate(env, uniform, 64), l = evaluate(env, pol, 64);
  MESSAGE("PPO-PID: loss " << l.loss << " (uniform-2 " << u.loss << "), cost " << l.cost << " (budget 2), lambda "
                           << log.back().lambda << ", K hard " << l.k_hard << ", K easy " << l.k_easy);
  CHECK(l.k_hard > l.k_easy + 1.5);
  CHECK(std::abs(l.cost - 2.0) <= 0.05 * 2.0);
  CHECK(l.loss < u.loss - 0.05);
}

TEST_CASE("learners are deterministic by seed, and value clipping trains too") {
  SyntheticEnv env({});
  auto run = [&](double clip_value) {
    LearnedPolicy pol("p", net("mlp", SyntheticEnv::kFeatures, 4, 2), {0, 1, 2, 4}, {}, {});
    PpoPidConfig cfg;
    cfg.budget = 2.0;
    cfg.iterations = 5;
    cfg.clip_value = clip_value;
    return train_ppo_pid(pol, env, cfg);
  };
  const auto a = run(0), b = run(0), c = run(0.2);
  REQUIRE(a.size() == 5);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].objective == b[i].objective);
    CHECK(a[i].value_loss == b[i].value_loss);
    CHECK(a[i].lambda == b[i].lambda);
    CHECK(a[i].mean_k == b[i].mean_k);
  }
  // the clipped value loss is never below the unclipped one on the same first batch (same policy so far)
  CHECK(c[0].value_loss >= a[0].value_loss - 1e-12);
  for (const auto& it : c) CHECK(std::isfinite(it.value_loss));
}

TEST_CASE("PonderNet halts later on hard units") {
  SyntheticEnv env({});
  HaltingPolicy pol("pondernet", net("mlp", SyntheticEnv::kFeatures, 4, 3), {}, {});
  PonderNetConfig cfg;
  cfg.iterations = 100;
  train_pondernet(pol, env, cfg);
  const Outcome o = evaluate(env, pol, 64);
  MESSAGE("PonderNet: K hard " << o.k_hard << ", K easy " << o.k_easy << ", loss " << o.loss);
  CHECK(o.k_hard > o.k_easy + 1.0);
}

TEST_CASE("learners reject bad settings with a message") {
  SyntheticEnv env({});
  LearnedPolicy pol("r", net("mlp", SyntheticEnv::kFeatures, 4, 1), {0, 1, 2, 4}, {}, {});
  ReinforceConfig bad;
  bad.baseline = "median";
  CHECK_THROWS_WITH(train_reinforce(pol, env, bad), doctest::Contains("baseline"));
  bad = {};
  bad.samples = 1;
  CHECK_THROWS_WITH(train_reinforce(pol, env, bad), doctest::Contains("samples >= 2"));
  PpoPidConfig ppo;
  CHECK_THROWS_WITH(train_ppo_pid(pol, env, ppo), doctest::Contains("budget"));
  CHECK_THROWS_WITH(make_policy_net("gru", 4, 8, 2, 0), doctest::Contains("mlp or lstm"));
}
