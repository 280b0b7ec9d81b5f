// The language model: token embedding → blocks → final RMSNorm → tied head (docs/ttt.md §1.1).
// Block (pre-norm): [h += conv(RMSNorm(h))] ; h += mixer(RMSNorm(h)) ; h += SwiGLU(RMSNorm(h)),
// where the mixer is a TTT layer or causal attention, chosen per layer (hybrids allowed).
#pragma once
#include <string>
#include <vector>

#include "ttt/ttt_layer.h"

namespace ponder::ttt {

struct ModelConfig {
  int64_t vocab = 256;
  int64_t d = 128;
  int64_t layers = 2;
  int64_t heads = 2;
  int64_t mini_batch = 16;       // TTT unit size
  std::string inner = "linear";  // TTT inner model: "linear" or "mlp"
  std::string backbone = "transformer";  // "mamba": shared Q/K + convs; "transformer": separate Q/K/V
  bool gate = true;              // GELU output gate of TTT layers
  bool pre_conv = false;         // the extra conv residual sub-block of the official *-TTT configs
  std::vector<std::string> mixers;  // per layer "ttt" or "attention"; empty = all "ttt"
  int64_t swiglu_hidden = 0;     // 0: ceil(8d/3 / 32)·32
  int64_t conv_width = 4;
  double rope_theta = 10000;
  double rms_eps = 1e-6;
  double init_std = 0.02;
  double base_lr = 0;            // 0: 1.0 for linear, 0.1 for mlp
  bool tie_embeddings = true;
  std::string token_factor = "official";  // "official" (relu, can die) or "softplus" (cannot): TTTConfig
  int64_t attn_window = 0;       // attention layers: keys within this many positions (sliding window); 0 = all

  int64_t ffn_hidden() const { return swiglu_hidden > 0 ? swiglu_hidden : (8 * d / 3 + 31) / 32 * 32; }
  std::string mixer(int64_t layer) const { return mixers.empty() ? "ttt" : mixers[size_t(layer)]; }
  TTTConfig ttt_config() const;
  void validate() const;  // throws naming the offending field
};

// Keys and values of the tokens seen so far (after RoPE), for chunked attention.
struct KVCache {
  Tensor k, v;        // (B, H, kept, f): keys and values of positions [len − kept, len)
  int64_t len = 0;    // positions seen so far
};

// Causal multi-head self-attention with RoPE on absolute positions.
struct Attention : Module {
  Tensor wq, wk, wv, wo;  // (d, d)
  int64_t heads = 0;
  double rope_theta = 10000;
  int64_t window = 0;  // a query sees the keys of its last `window` positions (itself included); 0 = all
  Attention() = default;
  Attention(int64_t d, int64_t heads, double rope_theta, double init_std, Generator& gen, DType dt,
            int64_t window = 0);
  Tensor forward(const Tensor& x) const;  // (B, N, d) → (B, N, d)
  // x (B, n, d) continues the sequence cached in `cache` and is appended to it.
  Tensor forward_chunk(const Tensor& x, KVCache& cache) const;
  std::vector<Tensor> parameters() const override;
};

struct SwiGLU : Module {
  Tensor w1, w3;  // (d, hidden)
  Tensor w2;      // (hidden, d)
  SwiGLU() = default;
  SwiGLU(int64_t d, int64_t hidden, double init_std, Generator& gen, DType dt);
  Tensor forward(const Tensor& x) const;  // w2(silu(x·w1) ⊙ x·w3)
  std::vector<Tensor> parameters() const override;
};

struct Block {
  RMSNorm conv_norm, seq_norm, ffn_norm;
  Tensor conv_w, conv_b;  // (d, w), (d): pre_conv only
  bool is_ttt = true;
  int ttt_index = -1;     // index among the model's TTT layers (what schedules see as `layer`)
  TTTLayer ttt;
  Attention attn;
  SwiGLU ffn;
  std::vector<Tensor> parameters() const;
  std::vector<std::string> parameter_names() const;  // same order: "seq_norm.weight", "ttt.W1", "ffn.w2", …
  // Both of the above, from one list: each parameter field with its name.
  std::vector<std::pair<std::string, Tensor*>> named_refs();
};

// Everything a model carries from one chunk of a sequence to the next.
struct ModelState {
  std::vector<TTTLayerState> ttt;    // per block (used by TTT blocks)
  std::vector<KVCache> kv;           // per block (used by attention blocks)
  std::vector<Tensor> pre_conv_hist; // per block: last inputs of the pre-conv
  int64_t tokens = 0;
};

// The same state cut from the graph that computed it: a later chunk reads its values but sends no gradient back
// into the chunks before (truncated backpropagation through time, train.carry_state).
ModelState detached(const ModelState& st);

class Model {
 public:
  Model(const ModelConfig& cfg, uint64_t seed, DType dtype = DType::F32);
  // ids (B, N) integers → logits (B, N, vocab). `run` applies to every TTT layer.
  Tensor forward(const Tensor& ids, const TTTRun& run = {}) const;
  // The same for a sequence fed in chunks (each a multiple of the mini-batch size), so a policy can
  // look at the logits of one unit before the next is computed. Continues from and advances `state`.
  Tensor forward_chunk(const Tensor& ids, ModelState& state, const TTTRun& run = {}) const;
  // forward_chunk in two halves: the residual stream after the last block (B, N, d), before the final norm, and
  // the logits (B, N, vocab) of such a hidden state. A fast-weight head sits between them (ttt/fast_weights.h).
  Tensor hidden_chunk(const Tensor& ids, ModelState& state, const TTTRun& run = {}) const;
  Tensor logits(const Tensor& hidden, const TTTRun& run = {}) const;
  // A copy sharing every parameter except those named in `replace` (labels as parameter_labels() gives them),
  // which are the given tensors instead: how low-rank fast weights W + A·B enter a frozen model. An unknown label or
  // a shape that differs is an std::invalid_argument naming it.
  Model with_parameters(const std::vector<std::pair<std::string, Tensor>>& replace) const;
  // Mean next-token cross-entropy of logits for ids[:, :-1] predicting ids[:, 1:] is the caller's
  // business; this gives per-token losses (B, N) for inputs (B, N) and targets (B, N).
  Tensor token_losses(const Tensor& inputs, const Tensor& targets, const TTTRun& run = {}) const;
  // The same for a chunk that continues the sequences of `state` (and advances it).
  Tensor token_losses(const Tensor& inputs, const Tensor& targets, ModelState& state, const TTTRun& run) const;
  // Probes of every TTT layer (see TTTLayer::probe), in layer order.
  std::vector<Probe> probe(const ModelState& state, bool with_grad) const;
  // Probes of every TTT layer over the whole chunk last run with TTTRun::keep_chunk (TTTLayer::probe_chunk): the
  // chunk's keys and values from `state`, the inner weights from `weights` (the state before the chunk, for its
  // reconstruction loss before the first step; `state` itself for after it).
  std::vector<Probe> probe_chunk(const ModelState& weights, const ModelState& state, bool with_grad) const;
  // Carry mode's further steps on the chunk last run with TTTRun::keep_chunk, in every TTT layer
  // (TTTLayer::extra_steps): what the chunk's scored outputs never see. Appends one UnitCost per layer.
  void extra_steps(ModelState& state, int steps, const TTTRun& run, std::vector<UnitCost>* costs) const;
  std::vector<Tensor> parameters() const;
  // Named parameters in a fixed order (checkpoints).
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // What each of named_parameters() is, in the same order ("block1.ttt.W1", "final_norm.weight", …).
  std::vector<std::string> parameter_labels() const;
  int64_t num_parameters() const;
  // Moves every parameter to `device` in place (move_to_device_ in autograd/nn.h), so an optimiser made
  // before keeps working on them. Parameters are created on the CPU (the initialisation is the same on
  // every device); inputs may live anywhere: token ids and targets are copied to the model's device, and
  // the constants made inside forward passes (masks, RoPE tables, η token factors) follow the input.
  Model& to(Device device);
  Device device() const { return emb_.weight.device(); }
  int num_ttt_layers() const { return n_ttt_; }
  // tok[b−1] of every TTT layer, in layer order (TTTLayer::carry_factor).
  std::vector<double> carry_factors() const;
  std::vector<const TTTLayer*> ttt_layers() const;
  const ModelConfig& config() const { return cfg_; }
  DType dtype() const { return dtype_; }

 private:
  ModelConfig cfg_;
  DType dtype_;
  Embedding emb_;
  Tensor head_;  // (d, vocab) when embeddings are not tied
  std::vector<Block> blocks_;
  RMSNorm final_norm_;
  int n_ttt_ = 0;
};

}  // namespace ponder::ttt
