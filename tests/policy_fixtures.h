// Fixtures shared by the policy and learner tests: a small hybrid model, random token sequences and the
// causality check every policy must pass.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "model_fixtures.h"
#include "policy/rollout.h"
#include "ttt/model.h"

namespace ponder::test {

// Two layers (TTT, attention), vocabulary 32, mini-batch 4: every rollout path in a few milliseconds.
inline ttt::ModelConfig small_hybrid() { return test_model({"ttt", "attention"}); }

// Input and next-token target (1, N) of a random sequence over the 32-token vocabulary.
inline std::pair<Tensor, Tensor> random_sequence(uint64_t seed, int64_t N) {
  Generator g(seed);
  std::vector<int64_t> v;
  for (int64_t i = 0; i <= N; ++i) v.push_back(int64_t(g.uniform01() * 32));
  Tensor all = Tensor::from_ints(v, {1, N + 1});
  return {raw::contiguous(raw::slice(all, 1, 0, N)), raw::contiguous(raw::slice(all, 1, 1, N + 1))};
}

// What changed when every token after position t + 1 of a sequence did: the loss at a position ≤ t (it predicts
// token ≤ t + 1), a unit's K when the unit and its last target lie at or before t + 1, or whether a unit is stepped
// at all when its first token does (the Before stage reads completed units only).
struct Causality {
  int losses = 0, ks = 0, stepped = 0;
  bool clean() const { return losses == 0 && ks == 0 && stepped == 0; }
};

// Runs `p` on a random 32-token sequence (4-token units) and on copies changed after each of several positions t
// (unit starts, middles and ends), and counts what moved that may not. `seen` is told each sequence before it runs
// (a deliberately leaky test policy reads it).
inline Causality policy_causality(const ttt::Model& model, policy::Policy& p, const policy::RolloutOptions& opt = {},
                                  const std::function<void(const std::vector<int64_t>&)>& seen = {},
                                  policy::Episode* unperturbed = nullptr) {
  const int64_t N = 32, b = model.config().mini_batch * opt.unit_batches;
  auto [x, y] = random_sequence(2, N);
  auto run = [&](const Tensor& in, const Tensor& tgt) {
    if (seen) seen(in.to_ints());
    return policy::run_policy(model, in, tgt, p, opt, 7);
  };
  const policy::Episode a = run(x, y);
  if (unperturbed) *unperturbed = a;
  Causality c;
  for (int64_t t : {3, 4, 6, 8, 12, 15, 17, 22}) {
    std::vector<int64_t> xv = x.to_ints(), yv = y.to_ints();
    for (int64_t i = t + 2; i < N; ++i) xv[size_t(i)] = (xv[size_t(i)] + 5) % 32;
    for (int64_t i = t + 1; i < N; ++i) yv[size_t(i)] = (yv[size_t(i)] + 5) % 32;
    const policy::Episode e = run(Tensor::from_ints(xv, {1, N}), Tensor::from_ints(yv, {1, N}));
    for (int64_t i = 0; i <= t; ++i) c.losses += std::abs(a.token_loss[size_t(i)] - e.token_loss[size_t(i)]) > 1e-12;
    for (size_t u = 0; u < a.units.size(); ++u) {
      const int64_t first = int64_t(u) * b, last_target = first + b;  // x index of the unit's first token, last target
      if (last_target <= t + 1) c.ks += a.units[u].k != e.units[u].k;
      if (first <= t + 1) c.stepped += (a.units[u].k > 0) != (e.units[u].k > 0);
    }
  }
  return c;
}

// The check every policy must pass, in carry mode's two stages and in prefix mode; returns the unperturbed episode.
inline policy::Episode check_policy_causal(const ttt::Model& model, policy::Policy& p) {
  policy::Episode ep;
  const Causality carry = policy_causality(model, p, {}, {}, &ep);
  CHECK(carry.losses == 0);
  CHECK(carry.ks == 0);
  CHECK(carry.stepped == 0);
  policy::RolloutOptions prefix;
  prefix.mode = ttt::StepMode::Prefix;
  CHECK(policy_causality(model, p, prefix).clean());
  return ep;
}

}  // namespace ponder::test
