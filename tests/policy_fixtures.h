// Fixtures shared by the policy and learner tests: a small hybrid model, random token sequences and the
// causality check every policy must pass.
#pragma once
#include <doctest/doctest.h>

#include <utility>

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

// Runs `p` on a random 32-token sequence, then again with every input after token 17 and every target from
// token 17 on changed (inside unit 4 of 4-token units): decisions for units 0..4 and the losses of tokens
// 0..16 must not move. Returns the unperturbed episode.
inline policy::Episode check_policy_causal(const ttt::Model& model, policy::Policy& p) {
  auto [x, y] = random_sequence(2, 32);
  policy::Episode a = policy::run_policy(model, x, y, p, {}, 7);
  auto xv = x.to_ints(), yv = y.to_ints();
  for (size_t i = 18; i < xv.size(); ++i) xv[i] = (xv[i] + 5) % 32;
  for (size_t i = 17; i < yv.size(); ++i) yv[i] = (yv[i] + 5) % 32;
  policy::Episode b = policy::run_policy(model, Tensor::from_ints(xv, {1, 32}), Tensor::from_ints(yv, {1, 32}), p, {}, 7);
  for (int64_t u = 0; u <= 4; ++u) CHECK(a.units[size_t(u)].k == b.units[size_t(u)].k);
  for (size_t t = 0; t < 17; ++t) CHECK(a.token_loss[t] == doctest::Approx(b.token_loss[t]).epsilon(1e-12));
  return a;
}

}  // namespace ponder::test
