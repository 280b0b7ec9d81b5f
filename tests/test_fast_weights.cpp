// Fast weights on a frozen base (ttt/fast_weights.h) and the chunk protocol that updates them
// (policy/adapt_rollout.h): identity at initialisation, a frozen base, causality, one update checked against a
// step computed by finite differences, the optimiser's snapshots, and exact cost accounting.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "autograd/grad_mode.h"
#include "model_fixtures.h"
#include "policy/adapt_rollout.h"
#include "policy/calibrate.h"
#include "ttt/fast_weights.h"

using namespace ponder;
using namespace ponder::ttt;
using ponder::test::random_ids;
using ponder::test::test_model;

namespace {

FastWeightsConfig lora_cfg() {
  FastWeightsConfig f;
  f.kind = "lora";
  f.rank = 2;
  f.targets = {"ffn.w2", "ffn.w1"};
  f.last_blocks = 1;
  f.init_std = 0.3;
  return f;
}

FastWeightsConfig head_cfg() {
  FastWeightsConfig f;
  f.kind = "head";
  f.head_hidden = 8;
  f.init_std = 0.3;
  return f;
}

std::vector<std::vector<double>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : ts) v.push_back(t.to_vector());
  return v;
}

// ids (1, N) → (input, target) of N − 1 predictions rounded down to whole chunks of `chunk` tokens.
std::pair<Tensor, Tensor> sequence(const Tensor& ids, int64_t chunk) {
  const int64_t n = (ids.shape()[1] - 1) / chunk * chunk;
  return {raw::contiguous(raw::slice(ids, 1, 0, n)), raw::contiguous(raw::slice(ids, 1, 1, n + 1))};
}

policy::AdaptConfig adapt_cfg(const FastWeightsConfig& f, double lr) {
  policy::AdaptConfig a;
  a.fast = f;
  a.optim.lr = lr;
  return a;
}

// The SGD step of size lr on loss() that central finite differences give, for every parameter (each left as it was).
std::vector<std::vector<double>> fd_sgd_step(const std::vector<Tensor>& params, const std::function<double()>& loss,
                                             double lr, double h = 1e-6) {
  std::vector<std::vector<double>> expect;
  for (const Tensor& p : params) {
    std::vector<double> v = p.to_vector(), next = v;
    for (size_t i = 0; i < v.size(); ++i) {
      auto at = [&](double x) {
        std::vector<double> w = v;
        w[i] = x;
        NoGradGuard ng;
        raw::copy_(p, Tensor::from_vector(w, p.shape(), DType::F64));
        return loss();
      };
      const double g = (at(v[i] + h) - at(v[i] - h)) / (2 * h);
      at(v[i]);
      next[i] = v[i] - lr * g;
    }
    expect.push_back(next);
  }
  return expect;
}

}  // namespace

TEST_CASE("fast weights start as the identity: K = 0 reads every chunk exactly as the frozen base does") {
  for (const auto& mixers : {std::vector<std::string>{"ttt", "ttt"}, std::vector<std::string>{"attention", "ttt"}})
    for (const FastWeightsConfig& f : {lora_cfg(), head_cfg()}) {
      CAPTURE(f.kind);
      CAPTURE(mixers[0]);
      Model base(test_model(mixers), 3);
      Generator gen(5);
      const Tensor ids = random_ids(gen, 1, 33, 32);
      const auto [in, tgt] = sequence(ids, 8);
      policy::RolloutOptions ro;
      ro.unit_batches = 2;  // chunks of 8 tokens (mini-batch 4)
      policy::AdaptRollouts rollouts(base, adapt_cfg(f, 0.5));
      policy::UniformPolicy skip(0);
      const policy::Episode ep = rollouts.policy(in, tgt, skip, ro, 0);
      NoGradGuard ng;
      ModelState st;
      std::vector<double> expect;
      for (int64_t c = 0; c < 4; ++c) {
        const Tensor logits = base.forward_chunk(raw::slice(in, 1, c * 8, c * 8 + 8), st);
        const auto l = cross_entropy_per_token(reshape(logits, {8, 32}), raw::reshape(raw::slice(tgt, 1, c * 8, c * 8 + 8), {8}));
        for (double x : l.to_vector()) expect.push_back(x);
      }
      REQUIRE(ep.token_loss.size() == expect.size());
      for (size_t i = 0; i < expect.size(); ++i) CHECK(ep.token_loss[i] == expect[i]);  // bit for bit
      CHECK(ep.inner == 0);
      FastWeights fw(base, f, 0);
      const Tensor zero_part = fw.parameters()[f.kind == "lora" ? 1 : 2];  // B of lora, w2 of the head
      for (double x : zero_part.to_vector()) CHECK(x == 0.0);
    }
}

TEST_CASE("the base's parameters never change while fast weights are updated") {
  for (const FastWeightsConfig& f : {lora_cfg(), head_cfg()}) {
    Model base(test_model({"ttt", "attention"}), 4);
    const auto before = values(base.parameters());
    Generator gen(6);
    const auto [in, tgt] = sequence(random_ids(gen, 1, 41, 32), 8);
    policy::RolloutOptions ro;
    ro.unit_batches = 2;
    policy::AdaptRollouts rollouts(base, adapt_cfg(f, 0.5));
    policy::UniformPolicy four(4);
    const policy::Episode ep = rollouts.policy(in, tgt, four, ro, 0);
    CHECK(ep.inner > 0);
    rollouts.oracle(in, tgt, {0, 1, 2, 4}, 0.0, 1, ro);
    CHECK(values(base.parameters()) == before);
    // and the updates did move the predictions: chunk 2 onwards differs from the frozen base
    policy::UniformPolicy skip(0);
    const policy::Episode frozen = rollouts.policy(in, tgt, skip, ro, 0);
    double moved = 0;
    for (size_t i = 8; i < ep.token_loss.size(); ++i) moved += std::abs(ep.token_loss[i] - frozen.token_loss[i]);
    CHECK(moved > 1e-6);
  }
}

TEST_CASE("the chunk protocol is causal: tokens after chunk c never move the losses of chunks <= c") {
  FastWeightsConfig replaying = head_cfg();
  replaying.replay = 2;
  for (const FastWeightsConfig& f : {lora_cfg(), head_cfg(), replaying}) {
    Model base(test_model({"ttt", "ttt"}), 7);
    Generator gen(8);
    const auto [in, tgt] = sequence(random_ids(gen, 1, 49, 32), 8);
    std::vector<int64_t> changed = in.to_ints();
    std::vector<int64_t> changed_t = tgt.to_ints();
    for (size_t t = 24; t < changed.size(); ++t) changed[t] = (changed[t] + 7) % 32;  // chunks 3..5
    for (size_t t = 23; t < changed_t.size(); ++t) changed_t[t] = changed[t + 1 < changed.size() ? t + 1 : t];
    const Tensor in2 = Tensor::from_ints(changed, in.shape()), tgt2 = Tensor::from_ints(changed_t, tgt.shape());
    policy::RolloutOptions ro;
    ro.unit_batches = 2;
    policy::AdaptRollouts rollouts(base, adapt_cfg(f, 0.5));
    policy::ThresholdPolicy by_loss(policy::Score::Loss, {3.4}, {0, 2}, 0);  // K depends on what was read
    const policy::Episode a = rollouts.policy(in, tgt, by_loss, ro, 1), b = rollouts.policy(in2, tgt2, by_loss, ro, 1);
    // chunk 2's target at its last position is token 24, which changed: compare predictions 0..22 exactly
    for (size_t i = 0; i < 23; ++i) CHECK(a.token_loss[i] == b.token_loss[i]);
    for (size_t u = 0; u < 2; ++u) CHECK(a.units[u].k == b.units[u].k);
    double later = 0;
    for (size_t i = 24; i < a.token_loss.size(); ++i) later += std::abs(a.token_loss[i] - b.token_loss[i]);
    CHECK(later > 1e-6);  // the test can fail: the changed tokens do reach the later losses
  }
}

TEST_CASE("one UPDATE_1 is the SGD step computed by central finite differences (float64)") {
  for (const FastWeightsConfig& f : {lora_cfg(), head_cfg()}) {
    CAPTURE(f.kind);
    Model base(test_model({"ttt", "attention"}), 9, DType::F64);
    Generator gen(10);
    const Tensor ids = random_ids(gen, 1, 9, 32);
    const Tensor in = raw::contiguous(raw::slice(ids, 1, 0, 8)), tgt = raw::contiguous(raw::slice(ids, 1, 1, 9));
    FastWeights fw(base, f, 11);
    {  // move every fast weight off 0 so that each one's gradient is non-zero (B = 0 zeroes the gradient of A)
      NoGradGuard ng;
      Generator g2(12);
      for (const Tensor& p : fw.parameters()) raw::copy_(p, add(p, g2.normal(p.shape(), 0, 0.1, DType::F64)));
    }
    ModelState st;
    fw.read(in, st);
    auto loss_now = [&] {
      NoGradGuard ng;
      const Tensor logits = fw.reread();
      return cross_entropy(reshape(logits, {8, 32}), raw::reshape(tgt, {8})).item();
    };
    const double lr = 0.3;
    const std::vector<std::vector<double>> expect = fd_sgd_step(fw.parameters(), loss_now, lr);
    FastOptimConfig oc;
    oc.lr = lr;
    FastOptimizer sgd(fw.parameters(), oc);
    fw.update(tgt, 8, sgd);
    const auto got = values(fw.parameters());
    for (size_t j = 0; j < got.size(); ++j)
      for (size_t i = 0; i < got[j].size(); ++i) CHECK(got[j][i] == doctest::Approx(expect[j][i]).epsilon(1e-7));
  }
}

TEST_CASE("with replay, one UPDATE_1 is the SGD step on the mean loss over the chunk and the replayed ones") {
  for (FastWeightsConfig f : {lora_cfg(), head_cfg()}) {
    CAPTURE(f.kind);
    f.replay = 2;
    Model base(test_model({"ttt", "attention"}), 21, DType::F64);
    Generator gen(22);
    const Tensor ids = random_ids(gen, 1, 25, 32);  // three chunks of 8
    auto in = [&](int64_t c) { return raw::contiguous(raw::slice(ids, 1, c * 8, c * 8 + 8)); };
    auto tg = [&](int64_t c) { return raw::contiguous(raw::slice(ids, 1, c * 8 + 1, c * 8 + 9)); };
    FastWeights fw(base, f, 23);
    {  // every fast weight off 0, so each one's gradient is non-zero
      NoGradGuard ng;
      Generator g2(24);
      for (const Tensor& p : fw.parameters()) raw::copy_(p, add(p, g2.normal(p.shape(), 0, 0.1, DType::F64)));
    }
    ModelState st;
    for (int64_t c = 0; c < 3; ++c) fw.read(in(c), st, tg(c));
    REQUIRE(fw.last_read().replayed.size() == 2);
    // The loss by hand: every chunk's logits from its own state before it, with the fast weights as they are.
    auto loss_now = [&] {
      NoGradGuard ng;
      ModelState s;
      double sum = 0;
      for (int64_t c = 0; c < 3; ++c) {
        const Tensor logits = fw.peek(in(c), s);  // no update since the reads: the same states as theirs
        sum += 8 * cross_entropy(reshape(logits, {8, 32}), raw::reshape(tg(c), {8})).item();
      }
      return sum / 24;
    };
    const double lr = 0.3;
    const std::vector<std::vector<double>> expect = fd_sgd_step(fw.parameters(), loss_now, lr);
    FastOptimConfig oc;
    oc.lr = lr;
    FastOptimizer sgd(fw.parameters(), oc);
    const double loss = fw.update(tg(2), 8, sgd);
    const auto got = values(fw.parameters());
    for (size_t j = 0; j < got.size(); ++j)
      for (size_t i = 0; i < got[j].size(); ++i) CHECK(got[j][i] == doctest::Approx(expect[j][i]).epsilon(1e-7));
    CHECK(std::isfinite(loss));
    fw.reset();  // a new stream replays nothing from the last one
    CHECK(fw.last_read().replayed.empty());
    CHECK_THROWS_WITH_AS(fw.read(in(0), st), doctest::Contains("replay needs each chunk's targets"), std::invalid_argument);
  }
}

TEST_CASE("the inner optimiser: normalised steps have length lr, and save/restore returns exactly") {
  Model base(test_model({"ttt"}), 13, DType::F64);
  Generator gen(14);
  const Tensor ids = random_ids(gen, 1, 9, 32);
  const Tensor in = raw::contiguous(raw::slice(ids, 1, 0, 8)), tgt = raw::contiguous(raw::slice(ids, 1, 1, 9));
  for (const std::string opt : {"sgd", "momentum", "adam"}) {
    CAPTURE(opt);
    FastWeights fw(base, head_cfg(), 0);
    ModelState st;
    fw.read(in, st);
    FastOptimConfig oc;
    oc.optimizer = opt;
    oc.lr = 0.05;
    oc.normalize = opt == "sgd";
    FastOptimizer o(fw.parameters(), oc);
    fw.update(tgt, 8, o);
    const auto saved_values = values(fw.parameters());
    const FastOptimizer::State saved = o.save();
    if (opt == "sgd") {  // from w2 = 0 the first step moves only w2, by exactly lr
      const std::vector<double> w2 = fw.parameters()[2].to_vector();
      double sq = 0;
      for (double x : w2) sq += x * x;
      CHECK(std::sqrt(sq) == doctest::Approx(0.05).epsilon(1e-9));
    }
    fw.update(tgt, 8, o);
    fw.update(tgt, 8, o);
    CHECK(values(fw.parameters()) != saved_values);
    o.restore(saved);
    CHECK(values(fw.parameters()) == saved_values);
    fw.update(tgt, 8, o);  // and continuing from the restored state repeats the same step
    const auto once = values(fw.parameters());
    o.restore(saved);
    fw.update(tgt, 8, o);
    CHECK(values(fw.parameters()) == once);
  }
  FastOptimConfig bad;
  bad.optimizer = "rmsprop";
  CHECK_THROWS_WITH(bad.validate(), doctest::Contains("optimizer must be sgd, momentum or adam"));
}

TEST_CASE("costs: SKIP spends nothing on updates, each step costs the same, the oracle charges only its choice") {
  Model base(test_model({"ttt", "ttt"}), 15);
  Generator gen(16);
  const auto [in, tgt] = sequence(random_ids(gen, 1, 33, 32), 8);
  policy::RolloutOptions ro;
  ro.unit_batches = 2;
  policy::AdaptRollouts rollouts(base, adapt_cfg(lora_cfg(), 0.5));
  std::vector<double> inner;
  for (int k : {0, 1, 2, 4}) {
    policy::UniformPolicy p(k);
    const policy::Episode ep = rollouts.policy(in, tgt, p, ro, 0);
    inner.push_back(double(ep.inner));
    CHECK(ep.base > 0);
  }
  CHECK(inner[0] == 0);
  CHECK(inner[2] == doctest::Approx(2 * inner[1]).epsilon(1e-3));
  CHECK(inner[3] == doctest::Approx(4 * inner[1]).epsilon(1e-3));
  // a μ that makes any step too dear: the oracle skips everywhere and costs what uniform-0 costs
  const policy::Episode o = rollouts.oracle(in, tgt, {0, 1, 2, 4}, 1e9, 1, ro);
  policy::UniformPolicy skip(0);
  const policy::Episode s = rollouts.policy(in, tgt, skip, ro, 0);
  CHECK(o.inner == 0);
  CHECK(o.token_loss == s.token_loss);
  // μ = 0 on the last chunk: nothing follows it, so every K ties and the smallest is taken
  const policy::Episode g = rollouts.oracle(in, tgt, {0, 1, 2, 4}, 0.0, 1, ro);
  CHECK(g.units.back().k == 0);
  CHECK(g.units.back().tied);
}

namespace {
// Replays a list of K, one per chunk.
class Replay final : public policy::Policy {
 public:
  explicit Replay(std::vector<int> ks) : ks_(std::move(ks)) {}
  std::string name() const override { return "replay"; }
  int decide(const policy::UnitFeatures&) override { return ks_.at(next_++); }
  std::unique_ptr<policy::Policy> clone() const override { return std::make_unique<Replay>(*this); }
 private:
  std::vector<int> ks_;
  size_t next_ = 0;
};
}  // namespace

TEST_CASE("the oracle's rollout look-ahead steps on later chunks, then leaves the stream exactly where it was") {
  Model base(test_model({"ttt", "attention"}), 21);
  Generator gen(22);
  const auto [in, tgt] = sequence(random_ids(gen, 1, 49, 32), 8);
  for (const FastWeightsConfig& f : {lora_cfg(), head_cfg()}) {
    policy::AdaptRollouts rollouts(base, adapt_cfg(f, 0.5));
    policy::RolloutOptions ro;
    ro.unit_batches = 1;
    auto measured = [](const policy::Episode& e) {
      uint64_t m = 0;
      for (const auto& u : e.units) m += u.measure_flops;
      return m;
    };
    const policy::Episode frozen = rollouts.oracle(in, tgt, {0, 1, 2}, 0.0, 3, ro);
    ro.oracle_lookahead_k = 1;
    const policy::Episode rolled = rollouts.oracle(in, tgt, {0, 1, 2}, 0.0, 3, ro);
    CHECK(measured(rolled) > measured(frozen));  // the look-ahead's own steps, charged to no method
    CHECK(rolled.inner == [&] {                  // …and not to the oracle either
      uint64_t s = 0;
      for (const auto& u : rolled.units) s += u.inner_flops;
      return s;
    }());
    for (const policy::Episode* o : {&frozen, &rolled}) {
      std::vector<int> ks;
      for (const auto& u : o->units) ks.push_back(u.k);
      Replay replay(ks);
      policy::RolloutOptions plain;
      plain.unit_batches = 1;
      CHECK(rollouts.policy(in, tgt, replay, plain, 0).token_loss == o->token_loss);
    }
    // One chunk of look-ahead has no chunk after it to step on: the same objective as frozen weights.
    ro.oracle_lookahead_k = 2;
    const policy::Episode one = rollouts.oracle(in, tgt, {0, 1, 2}, 0.0, 1, ro);
    ro.oracle_lookahead_k = 0;
    CHECK(one.token_loss == rollouts.oracle(in, tgt, {0, 1, 2}, 0.0, 1, ro).token_loss);
  }
}

TEST_CASE("PonderNet's trials on fast weights: trial n at chunk u is the next chunk's loss after n steps on u, and "
          "trying leaves the episode as it was") {
  Model base(test_model({"ttt", "attention"}), 31);
  Generator gen(32);
  const auto [in, tgt] = sequence(random_ids(gen, 1, 25, 32), 8);  // 24 tokens: 6 chunks of one mini-batch
  for (const FastWeightsConfig& f : {lora_cfg(), head_cfg()}) {
    policy::AdaptRollouts rollouts(base, adapt_cfg(f, 0.5));
    policy::RolloutOptions ro;
    ro.unit_batches = 1;
    policy::UniformPolicy one(1);
    const policy::Episode plain = rollouts.policy(in, tgt, one, ro, 0);
    ro.trial_ks = {1, 2, 4};
    const policy::Episode tried = rollouts.policy(in, tgt, one, ro, 0);
    CHECK(tried.token_loss == plain.token_loss);
    CHECK(tried.inner == plain.inner);  // the trials' steps are charged to no method
    const size_t n = tried.units.size();
    REQUIRE(n == 6);
    for (size_t u = 0; u + 1 < n; ++u) {
      REQUIRE(tried.units[u].trial_loss.size() == 3);
      for (size_t i = 0; i < ro.trial_ks.size(); ++i) {
        std::vector<int> ks(n, 1);  // what uniform-1 did before u, trial_ks[i] steps at u
        ks[u] = ro.trial_ks[i];
        Replay replay(ks);
        policy::RolloutOptions no_trials;
        no_trials.unit_batches = 1;
        const policy::Episode real = rollouts.policy(in, tgt, replay, no_trials, 0);
        CHECK(tried.units[u].trial_loss[i] == doctest::Approx(real.units[u + 1].loss).epsilon(1e-12));
      }
      CHECK(tried.units[u].trial_loss[0] != tried.units[u].trial_loss[2]);  // the steps did move the next chunk
    }
    CHECK(tried.units.back().trial_loss == std::vector<double>(3, 0.0));  // nothing after the last chunk
  }
}

TEST_CASE("fast weights and the protocol refuse what they cannot do, naming it") {
  Model base(test_model({"ttt", "attention"}), 17);
  FastWeightsConfig f = lora_cfg();
  f.targets = {"ffn.w9"};
  CHECK_THROWS_WITH(FastWeights(base, f, 0), doctest::Contains("no parameter block1.ffn.w9"));
  f = lora_cfg();
  f.last_blocks = 3;
  CHECK_THROWS_WITH(FastWeights(base, f, 0), doctest::Contains("last_blocks must be in [0, 2]"));
  f = lora_cfg();
  f.targets = {"seq_norm.weight"};
  CHECK_THROWS_WITH(FastWeights(base, f, 0), doctest::Contains("lora adapts matrices only"));
  CHECK_THROWS_WITH(base.with_parameters({{"block0.ffn.w2", Tensor::zeros({2, 2})}}), doctest::Contains("its replacement"));
  CHECK_THROWS_WITH(base.with_parameters({{"nope", Tensor::zeros({2, 2})}}), doctest::Contains("no parameter named 'nope'"));
  policy::RolloutOptions ro;
  ro.unit_batches = 2;
  policy::AdaptRollouts rollouts(base, adapt_cfg(lora_cfg(), 0.1));
  Generator gen(18);
  const Tensor ids = random_ids(gen, 1, 12, 32);
  policy::UniformPolicy one(1);
  CHECK_THROWS_WITH(rollouts.policy(ids, ids, one, ro, 0), doctest::Contains("a multiple of the chunk, 8 tokens"));
  policy::ThresholdPolicy probe(policy::Score::TTTLoss, {1.0}, {0, 2}, 0);
  const Tensor ok = random_ids(gen, 1, 16, 32);
  CHECK_THROWS_WITH(rollouts.policy(ok, ok, probe, ro, 0), doctest::Contains("inner loss"));
}

TEST_CASE("with_parameters replaces only what it names and shares the rest") {
  Model base(test_model({"ttt", "attention"}), 19);
  const std::vector<std::string> labels = base.parameter_labels();
  const std::vector<Tensor> params = base.parameters();
  const Tensor w = Tensor::zeros(params[5].shape());
  const Model m = base.with_parameters({{labels[5], w}});
  const std::vector<Tensor> mp = m.parameters();
  REQUIRE(mp.size() == params.size());
  for (size_t i = 0; i < mp.size(); ++i) CHECK(mp[i].impl() == (i == 5 ? w : params[i]).impl());
  CHECK(base.parameters()[5].impl() == params[5].impl());  // the original is untouched
}

TEST_CASE("fast-weight episodes side by side are the ones run one at a time, costs included") {
  Model base(test_model({"ttt", "attention"}), 31);
  Generator gen(32);
  std::vector<policy::Window> windows;
  for (int64_t n : {25, 57, 41, 17}) windows.push_back(sequence(random_ids(gen, 1, n, 32), 8));
  for (const FastWeightsConfig& f : {lora_cfg(), head_cfg()}) {
    policy::AdaptRollouts rollouts(base, adapt_cfg(f, 0.5));
    policy::RandomPolicy p(0, 2, 0.5);
    policy::RolloutOptions one, three;
    one.jobs = 1;
    three.jobs = 3;
    std::vector<policy::Episode> a, b;
    const policy::CostSummary sa = policy::run_windows(rollouts, windows, p, one, 5, &a);
    const policy::CostSummary sb = policy::run_windows(rollouts, windows, p, three, 5, &b);
    CHECK(sa.loss == sb.loss);
    CHECK(sa.inner_per_token == sb.inner_per_token);
    CHECK(sa.inner_per_token > 0);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].token_loss == b[i].token_loss);
      CHECK(a[i].inner == b[i].inner);
    }
  }
}
