// Rollouts of the fast-weight path: a trained base model stays frozen and fast weights (ttt/fast_weights.h) are
// updated at test time, chunk by chunk, under a policy. The protocol, causal by construction, for each chunk c:
//
//   1. score c with the fast weights as they are (these losses are the result; the base's state advances);
//   2. the policy picks K from what has been read, chunk c included (its loss, entropy, earlier K);
//   3. K optimiser steps on c's next-token loss; the updated fast weights carry to chunk c + 1.
//
// A unit is a chunk: RolloutOptions::unit_batches mini-batches of the base. Costs from the engine's counters: `base`
// is the scoring forward, `inner` the update steps (forward again, backward through whatever lies above the fast
// weights, the optimiser), `overhead` the features the policy reads. Fast weights and optimiser state start afresh
// for every sequence (a stream: a document, or a repository's adaptation files then its evaluation files).
#pragma once
#include "policy/rollout.h"
#include "ttt/fast_weights.h"

namespace ponder::policy {

struct AdaptConfig {
  ttt::FastWeightsConfig fast;
  ttt::FastOptimConfig optim;
  uint64_t seed = 0;  // initialisation of the fast weights (A of lora, w1/w3 of the head)
};

class AdaptRollouts final : public Rollouts {
 public:
  AdaptRollouts(const ttt::Model& base, const AdaptConfig& cfg);
  Episode policy(const Tensor& input, const Tensor& target, Policy& p, const RolloutOptions& opt,
                 uint64_t seed) const override;
  // Per chunk, every K in `options` is tried from the same fast weights; the objective is the mean loss of the next
  // `lookahead` chunks read with the updated weights plus μ·(the K steps' FLOPs / the chunk's scoring FLOPs). The
  // last chunk has nothing after it, so every K ties there and the smallest is taken.
  Episode oracle(const Tensor& input, const Tensor& target, const std::vector<int>& options, double mu, int lookahead,
                 const RolloutOptions& opt) const override;
  bool layer_steps() const override { return false; }
  const ttt::Model& model() const override { return base_; }
  const AdaptConfig& config() const { return cfg_; }

 private:
  const ttt::Model& base_;
  AdaptConfig cfg_;
};

}  // namespace ponder::policy
