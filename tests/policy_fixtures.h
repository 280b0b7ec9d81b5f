// Fixtures shared by the policy and learner tests: a small hybrid model and random token sequences.
#pragma once
#include <utility>

#include "ttt/model.h"

namespace ponder::test {

// Two layers (TTT, attention), vocabulary 32, mini-batch 4: every rollout path in a few milliseconds.
inline ttt::ModelConfig small_hybrid() {
  ttt::ModelConfig c;
  c.vocab = 32;
  c.d = 16;
  c.layers = 2;
  c.heads = 2;
  c.mini_batch = 4;
  c.mixers = {"ttt", "attention"};
  c.init_std = 0.2;
  return c;
}

// Input and next-token target (1, N) of a random sequence over the 32-token vocabulary.
inline std::pair<Tensor, Tensor> random_sequence(uint64_t seed, int64_t N) {
  Generator g(seed);
  std::vector<int64_t> v;
  for (int64_t i = 0; i <= N; ++i) v.push_back(int64_t(g.uniform01() * 32));
  Tensor all = Tensor::from_ints(v, {1, N + 1});
  return {raw::contiguous(raw::slice(all, 1, 0, N)), raw::contiguous(raw::slice(all, 1, 1, N + 1))};
}

}  // namespace ponder::test
