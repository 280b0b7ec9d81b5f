// The model every test builds when it needs one that runs in milliseconds, and random token ids for it.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "tensor/rng.h"
#include "ttt/model.h"

namespace ponder::test {

// Vocabulary 32, width 16, 2 heads, mini-batch 4, one layer per entry of `mixers` (ttt | attention), normal
// initialisation with std 0.2 (large enough that every path moves the outputs).
inline ttt::ModelConfig test_model(std::vector<std::string> mixers, std::string backbone = "transformer",
                                   bool pre_conv = false, std::string inner = "linear") {
  ttt::ModelConfig c;
  c.vocab = 32;
  c.d = 16;
  c.layers = int64_t(mixers.size());
  c.heads = 2;
  c.mini_batch = 4;
  c.mixers = std::move(mixers);
  c.backbone = std::move(backbone);
  c.pre_conv = pre_conv;
  c.inner = std::move(inner);
  c.init_std = 0.2;
  return c;
}

// Host int64 ids (B, N) drawn uniformly from [0, V).
inline Tensor random_ids(Generator& gen, int64_t B, int64_t N, int64_t V) {
  std::vector<int64_t> v;
  for (double u : gen.uniform({B, N}, 0, 1, DType::F64).to_vector()) v.push_back(std::min(V - 1, int64_t(u * double(V))));
  return Tensor::from_ints(v, {B, N});
}

}  // namespace ponder::test
