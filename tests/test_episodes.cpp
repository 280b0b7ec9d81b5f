// Episodes side by side (policy/episodes.h): for every kind of policy, windows run on several threads give the
// episodes, sums and FLOP counts they give one at a time, bit for bit; the learners' episode collection likewise.
#include <doctest/doctest.h>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>

#include "policy/episodes.h"
#include "policy/policy_net.h"
#include "rl/learn_util.h"
#include "rl/ttt_env.h"
#include "tests/policy_fixtures.h"

using namespace ponder;
using namespace ponder::policy;

namespace {

std::shared_ptr<PolicyNet> net(const std::string& kind, int64_t out, uint64_t seed) {
  return std::shared_ptr<PolicyNet>(make_policy_net(kind, feature_count(), 16, out, seed));
}

// Every kind of policy, the stateful ones (a generator, an LSTM's state, a gate's threshold, a budget) included.
std::vector<std::unique_ptr<Policy>> stateful_policies() {
  const FeatureNeeds needs{true, true, true, false};
  std::vector<std::unique_ptr<Policy>> p;
  p.push_back(std::make_unique<UniformPolicy>(2));
  p.push_back(std::make_unique<RandomPolicy>(0, 4, 0.4));
  p.push_back(std::make_unique<ThresholdPolicy>(Score::Entropy, std::vector<double>{2.0}, std::vector<int>{1, 4}, 1));
  p.push_back(std::make_unique<EmaGatePolicy>(Score::Loss, 3.0, 0, 4, 0.3, 0.1));
  p.push_back(std::make_unique<HardBudgetPolicy>(std::make_unique<RandomPolicy>(1, 4, 0.7), 1.5,
                                                 std::vector<int>{0, 1, 2, 4}));
  p.push_back(std::make_unique<LearnedPolicy>("learned-lstm", net("lstm", 4, 5), std::vector<int>{0, 1, 2, 4},
                                              FeatureNorm{}, needs));
  p.push_back(std::make_unique<HaltingPolicy>("pondernet", net("lstm", 4, 6), FeatureNorm{}, needs));
  // Greedy on a fresh net's near-uniform outputs: the argmax turns on the last digits of the LSTM's state, so a
  // state shared between threads shows here even where sampling would hide it.
  auto greedy = std::make_unique<LearnedPolicy>("greedy-lstm", net("lstm", 4, 7), std::vector<int>{0, 1, 2, 4},
                                                FeatureNorm{}, needs);
  greedy->set_mode(ActMode::Greedy);
  p.push_back(std::move(greedy));
  return p;
}

// Windows of different lengths (in units of 4 tokens), so that the longest-first order differs from window order.
std::vector<Window> uneven_windows() {
  std::vector<Window> w;
  const int64_t tokens[] = {16, 64, 32, 96, 8, 48, 24};
  for (size_t i = 0; i < std::size(tokens); ++i) w.push_back(test::random_sequence(40 + i, tokens[i]));
  return w;
}

void check_same(const std::vector<Episode>& a, const std::vector<Episode>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].token_loss == b[i].token_loss);  // bits, not approximately
    CHECK(a[i].base == b[i].base);
    CHECK(a[i].inner == b[i].inner);
    CHECK(a[i].overhead == b[i].overhead);
    REQUIRE(a[i].units.size() == b[i].units.size());
    for (size_t u = 0; u < a[i].units.size(); ++u) {
      CHECK(a[i].units[u].k == b[i].units[u].k);
      CHECK(a[i].units[u].features.vector() == b[i].units[u].features.vector());
    }
  }
}

// Decides K = 1, and throws at the first unit of a sequence whose seed is `bad`.
class ThrowsAt final : public Copyable<ThrowsAt> {
 public:
  explicit ThrowsAt(uint64_t bad) : bad_(bad) {}
  std::string name() const override { return "throws"; }
  void begin_sequence(uint64_t seed) override { seed_ = seed; }
  int decide(const UnitFeatures&) override {
    if (seed_ == bad_) throw std::runtime_error("planted failure in sequence " + std::to_string(seed_));
    return 1;
  }
 private:
  uint64_t bad_, seed_ = 0;
};

}  // namespace

TEST_CASE("windows side by side give every policy's episodes, sums and FLOP counts bit for bit as one at a time") {
  ttt::Model model(test::small_hybrid(), 11, DType::F32);
  const std::vector<Window> windows = uneven_windows();
  for (auto& p : stateful_policies()) {
    INFO(p->name());
    RolloutOptions one, three;
    one.jobs = 1;
    three.jobs = 3;
    std::vector<Episode> a, b;
    FlopScope fa;
    const CostSummary sa = run_windows(model, windows, *p, one, 9, &a);
    const FlopCounts ca = fa.counts();
    FlopScope fb;
    const CostSummary sb = run_windows(model, windows, *p, three, 9, &b);
    const FlopCounts cb = fb.counts();
    check_same(a, b);
    CHECK(sa.loss == sb.loss);
    CHECK(sa.inner_per_token == sb.inner_per_token);
    CHECK(sa.overhead_per_token == sb.overhead_per_token);
    CHECK(sa.mean_k == sb.mean_k);
    // the workers' counts reach the caller's scope: the same totals as on one thread, and not zero
    CHECK(ca.total() > 0);
    CHECK(cb.total() == ca.total());
    CHECK(cb.category(FlopCat::Matmul) == ca.category(FlopCat::Matmul));
  }
}

TEST_CASE("a clone decides as its original from begin_sequence on, and runs independently of it") {
  ttt::Model model(test::small_hybrid(), 12, DType::F32);
  auto [x, y] = test::random_sequence(5, 64);
  for (auto& p : stateful_policies()) {
    INFO(p->name());
    std::unique_ptr<Policy> c = p->clone();
    CHECK(c->name() == p->name());
    const Episode a = run_policy(model, x, y, *p, {}, 3);
    const Episode b = run_policy(model, x, y, *c, {}, 3);
    check_same({a}, {b});
  }
}

TEST_CASE("oracle episodes side by side are the same as one at a time") {
  ttt::Model model(test::small_hybrid(), 13, DType::F32);
  const std::vector<Window> windows = uneven_windows();
  const LayerRollouts ro(model);
  RolloutOptions opt;
  auto oracle = [&](int jobs) {
    return run_episodes(windows, opt, {}, jobs, [&](size_t i, const RolloutOptions& o, int) {
      return ro.oracle(windows[i].first, windows[i].second, {0, 1, 2}, 0.0, 1, o);
    });
  };
  const std::vector<Episode> a = oracle(1), b = oracle(3);
  REQUIRE(a.size() == windows.size());
  std::set<int> ks;  // the oracle chose among its options, so the comparison is not of constant decisions
  for (const Episode& e : a)
    for (const UnitRecord& r : e.units) ks.insert(r.k);
  CHECK(ks.size() > 1);
  check_same(a, b);  // episodes, costs and decisions, bit for bit
}

TEST_CASE("side_by_side runs tasks at once on several threads, and passes the first failure on") {
  // Two tasks that each wait for the other to start can finish only if they run at the same time.
  std::atomic<int> started{0};
  std::atomic<int> met{0};
  side_by_side({0, 1}, 2, [&](size_t, int) {
    ++started;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (started < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (started == 2) ++met;
  });
  CHECK(met == 2);

  ttt::Model model(test::small_hybrid(), 14, DType::F32);
  const std::vector<Window> windows = uneven_windows();
  ThrowsAt bad(100 + 3);  // run_windows seeds sequence i with seed + i: window 3 fails
  RolloutOptions three;
  three.jobs = 3;
  CHECK_THROWS_WITH(run_windows(model, windows, bad, three, 100), "planted failure in sequence 103");
  ThrowsAt fine(7);  // and the next call runs as usual
  CHECK(run_windows(model, windows, fine, three, 100).mean_k == 1);
}

TEST_CASE("side_by_side's workers take the calling thread's grad mode, and have their own back after") {
  // Two tasks that wait for each other run on two threads, so one of them is a worker, not the caller.
  auto modes_seen = [] {
    std::atomic<int> started{0};
    std::vector<int> mode(2, -1), worker(2, -1);
    side_by_side({0, 1}, 2, [&](size_t i, int w) {
      ++started;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (started < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      mode[i] = GradMode::enabled() ? 1 : 0;
      worker[i] = w;
    });
    REQUIRE(std::set<int>(worker.begin(), worker.end()) == std::set<int>{0, 1});
    return mode;
  };
  {
    NoGradGuard off;  // an evaluation's: without it on a worker, a carried state keeps every chunk's graph
    CHECK(modes_seen() == std::vector<int>{0, 0});
  }
  CHECK(modes_seen() == std::vector<int>{1, 1});
  std::vector<int> after(2, -1);  // the pool's threads are back to their own setting (on)
#pragma omp parallel num_threads(2)
  after[size_t(omp_get_thread_num())] = GradMode::enabled() ? 1 : 0;
  CHECK(after == std::vector<int>{1, 1});
}

TEST_CASE("progress of windows side by side rises to the whole set's tokens and never goes back") {
  ttt::Model model(test::small_hybrid(), 15, DType::F32);
  const std::vector<Window> windows = {test::random_sequence(1, 512), test::random_sequence(2, 256),
                                       test::random_sequence(3, 1024)};
  UniformPolicy one(1);
  RolloutOptions three;
  three.jobs = 3;
  std::vector<double> seen;
  run_windows(LayerRollouts(model), windows, one, three, 0, nullptr, [&](double f) { seen.push_back(f); });
  // inside windows every 64 units (3 + 1 + 0 reports), and each window's end
  REQUIRE(seen.size() == 7);
  for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
  CHECK(seen.back() == doctest::Approx(1.0));
}

TEST_CASE("the learners' episodes side by side are the ones collected one at a time") {
  ttt::Model model(test::small_hybrid(), 16, DType::F32);
  const std::vector<Window> windows = uneven_windows();
  for (int lstm = 0; lstm < 2; ++lstm) {
    LearnedPolicy p("learned", net(lstm ? "lstm" : "mlp", 4, 8), {0, 1, 2, 4}, FeatureNorm{}, {true, true, true, false});
    RolloutOptions one, three;
    one.jobs = 1;
    three.jobs = 3;
    rl::TTTEnv env1(model, windows, one), env3(model, windows, three);
    CHECK(env1.jobs() == 1);
    CHECK(env3.jobs() == 3);
    for (const std::vector<int>& trials : {std::vector<int>{}, std::vector<int>{0, 2}}) {
      const auto a = rl::collect(env1, p, 1, 3, 2, 4, trials), b = rl::collect(env3, p, 1, 3, 2, 4, trials);
      REQUIRE(a.size() == 6);
      REQUIRE(b.size() == 6);
      for (size_t i = 0; i < a.size(); ++i) {
        CHECK(a[i].k == b[i].k);
        CHECK(a[i].reward == b[i].reward);
        CHECK(a[i].cost == b[i].cost);
        CHECK(a[i].x == b[i].x);
        CHECK(a[i].trial_loss == b[i].trial_loss);
      }
    }
  }
}
