// Fast weights on a frozen base: a small set of parameters added to a trained model and updated at test time by
// gradient steps on the text already read (dynamic evaluation; large-chunk TTT), while the base's own parameters
// never change. Two kinds, chosen in the config (docs/method.md §7):
//
//   lora   low-rank adapters W + A·B (A: d_in × r, B: r × d_out) on named projections of the base, e.g. "ffn.w2" on
//          the last blocks. B starts at 0, so the adapted model equals the base until the first update; an update
//          back-propagates through the frozen base above the adapted projections.
//   head   a residual SwiGLU head on the base's last hidden state, h + w2·(silu(n·w1) ⊙ n·w3), n = RMSNorm(h),
//          before the final norm and the tied logits (the fast-weight head of large-chunk TTT). w2 starts at 0.
//          The base's hidden state of a chunk does not depend on the head, so it is computed once per chunk and
//          update steps run the head and the logits only.
//
// A FastWeights reads a stream chunk by chunk: read() scores a new chunk with the fast weights as they are and
// advances the base's state; reread() recomputes that chunk's logits with the fast weights as they are now, under
// the caller's grad mode, which is what an update step differentiates. The base's state carried to the next chunk is
// the one read() produced (the scoring pass), as in dynamic evaluation. With `replay` R > 0 an update's loss also
// covers the R chunks read before the last one (their targets all known by then), so a step on a short chunk does
// not forget what the chunks before it taught: the mean next-token loss over every token of the R + 1 chunks.
#pragma once
#include <string>
#include <vector>

#include "ttt/model.h"

namespace ponder::ttt {

struct FastWeightsConfig {
  std::string kind = "lora";                 // "lora" | "head"
  int64_t rank = 8;                          // lora: r
  std::vector<std::string> targets = {"ffn.w2"};  // lora: parameter names inside a block ("ffn.w2", "attn.wo", …)
  int64_t last_blocks = 1;                   // lora: adapt the targets of the last N blocks (0: every block)
  int64_t head_hidden = 64;                  // head: SwiGLU width
  double init_std = 0.02;                    // A (lora) and w1, w3 (head); B and w2 start at 0
  int64_t replay = 0;                        // earlier chunks an update's loss covers too (0 … 64)
  void validate(int64_t layers) const;       // throws naming the key
};

// The inner optimiser of fast weights (adapt.optimizer and friends): SGD, SGD with heavy-ball momentum, or Adam;
// optional clipping of the gradient's global norm and normalisation to unit norm (lr is then the step length).
// More inner steps are only worth buying if they are stable, which is what these knobs are for.
struct FastOptimConfig {
  std::string optimizer = "sgd";  // "sgd" | "momentum" | "adam"
  double lr = 0.01;
  double momentum = 0.9;          // momentum
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam
  double clip = 0;                // max global gradient norm; 0: no clipping
  bool normalize = false;         // step along g / ‖g‖
  void validate() const;          // throws naming the key
};

class FastOptimizer {
 public:
  FastOptimizer(std::vector<Tensor> params, const FastOptimConfig& cfg);
  // p ← p − lr·direction(grads), in place (under no-grad; the engine's counters see its FLOPs).
  void step(const std::vector<Tensor>& grads);
  // Parameters and buffers, for trying an update and going back (the oracle).
  struct State {
    std::vector<Tensor> values, m, v;
    int64_t t = 0;
  };
  State save() const;
  void restore(const State& s);
 private:
  std::vector<Tensor> params_, m_, v_;
  FastOptimConfig cfg_;
  int64_t t_ = 0;
};

class FastWeights {
 public:
  FastWeights(const Model& base, const FastWeightsConfig& cfg, uint64_t seed);
  // The trainable tensors (leaves requiring grad), what an inner optimiser steps.
  const std::vector<Tensor>& parameters() const { return params_; }
  // Their names ("block1.ffn.w2.A", "head.w1", …), in the same order.
  const std::vector<std::string>& names() const { return names_; }
  // Back to the initial values (the adapted model equals the base again): a new stream starts here.
  void reset();
  // Logits (1, n, V) of the chunk ids (1, n) with the current fast weights, without a graph; advances `state`.
  // `targets` (1, n), the chunk's next tokens, are kept for replay (needed when config().replay > 0).
  Tensor read(const Tensor& ids, ModelState& state, const Tensor& targets = Tensor());
  // Logits of a chunk with the current fast weights, advancing `state` (pass a copy to leave the stream's alone) and
  // remembering nothing: the oracle's look at later chunks. No graph.
  Tensor peek(const Tensor& ids, ModelState& state) const;
  // The last read chunk's logits again with the fast weights as they are now (same base state before the chunk).
  Tensor reread() const;
  // What update() and reread() work on: the last chunk read. Saved and put back around a look ahead that reads
  // (and updates on) later chunks, so the stream continues from the chunk it was at.
  struct Read {
    Tensor ids, hidden, targets;  // hidden: the head's frozen input; targets: undefined if not given
    ModelState before;            // lora: the base state before the chunk
  };
  struct LastRead {
    Read last;
    std::vector<Read> replayed;  // up to `replay` chunks read before `last`, oldest first
  };
  LastRead last_read() const { return {last_, replayed_}; }
  void set_last_read(const LastRead& r) {
    last_ = r.last;
    replayed_ = r.replayed;
  }
  // One update: the mean next-token loss of the last read chunk's first `len` predictions (targets (1, n)), and of
  // every prediction of the replayed chunks, under the current fast weights; its gradient in the fast weights, and
  // an optimiser step. Returns the loss.
  double update(const Tensor& targets, int64_t len, FastOptimizer& opt);
  const Model& base() const { return base_; }
  const FastWeightsConfig& config() const { return cfg_; }

 private:
  Model adapted() const;  // lora: the base with W + A·B in the targets' places
  Tensor head_logits(const Tensor& hidden) const;
  Tensor logits_of(const Read& r) const;  // a read chunk's logits with the fast weights as they are now

  const Model& base_;
  FastWeightsConfig cfg_;
  std::vector<Tensor> params_, initial_;
  std::vector<std::string> names_;
  std::vector<std::string> labels_;  // lora: the adapted parameter of each (A, B) pair …
  std::vector<Tensor> adapted_;      // … and its frozen value W, so a pass builds W + A·B without a search
  Read last_;                        // the last chunk read
  std::vector<Read> replayed_;       // the `replay` chunks before it
};

}  // namespace ponder::ttt
