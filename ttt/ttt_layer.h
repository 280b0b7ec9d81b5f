// The TTT layer (TTT-Linear / TTT-MLP) as the official JAX implementation defines it (docs/ttt.md §1):
// projections (shared Q/K with two causal convs on the Mamba backbone, separate on the Transformer
// backbone), RoPE with in-mini-batch positions, the per-token learnable inner learning rate η, the
// inner model f(x) = x + LN(f_res(x)) trained on XV − XK, post-norm, GELU gate, output projection.
// The scan over units runs either the dual form (closed-form inner gradients) or the iterative
// path (inner gradients from the engine), under a step schedule.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/nn.h"
#include "ttt/inner.h"
#include "ttt/schedule.h"

namespace ponder::ttt {

struct TTTConfig {
  int64_t d = 128;          // width
  int64_t heads = 2;        // H; head dim f = d / H
  int64_t mini_batch = 16;  // b: tokens per unit
  bool mlp = false;         // TTT-MLP (hidden 4f) instead of TTT-Linear
  bool shared_qk = true;    // Mamba backbone: one Q/K projection followed by two causal convs
  bool gate = true;         // GELU output gate
  int64_t conv_width = 4;
  double base_lr = 1.0;     // ttt_base_lr: 1.0 linear, 0.1 MLP
  double rope_theta = 10000;
  double init_std = 0.02;
  // η's token factor tok[i] for position i of a unit: "official" relu(1/(i+1) + token_idx[i]), which is 0 for good
  // once an offset falls below −1/(i+1) (a dead carry: the last row scales every carried update); "softplus"
  // softplus(softplus⁻¹(1/(i+1)) + token_idx[i]), equal at initialisation and positive for every offset.
  bool softplus_token_factor = false;
  int64_t head_dim() const { return d / heads; }
  int64_t hidden() const { return mlp ? 4 * head_dim() : head_dim(); }
};

enum class InnerPath { Dual, Iterative };
enum class StepMode { Carry, Prefix };

// Options of one forward pass through a TTT layer, and what it reports.
struct TTTRun {
  InnerPath path = InnerPath::Dual;
  StepMode mode = StepMode::Carry;
  StepSchedule* schedule = nullptr;  // null: one step per unit (official TTT)
  double lr_mult = 1.0;              // ttt_lr_mult (TTT-MLP warm-up)
  int64_t remat_group = 0;           // units per rematerialised group; 0 = store everything
  // Prefix mode with one step gives the dual form's outputs and state exactly, so it runs (and is charged as) the
  // carry computation, the cheapest that computes it; set this to run prefix mode's per-position path even at K = 1
  // (tests compare the two).
  bool prefix_path_at_one = false;
  std::vector<UnitCost>* costs = nullptr;
  // Keep the chunk's keys, values and η in the layer's state (TTTLayerState::chunk_*), so that carry mode's further
  // steps can be taken after the chunk is scored (TTTLayer::extra_steps; the two-stage rollout of policy/rollout.h).
  bool keep_chunk = false;
  InnerState* final_state = nullptr;  // receives the state after the last unit (B, H, …)
  // When set, sees the main activations of the pass in forward order, by name ("xq", "eta", "unit3.out",
  // …; the model prefixes "block<l>.ttt."): how a non-finite loss is traced to where it began.
  std::function<void(const std::string&, const Tensor&)> watch;
};

// Whether a chunk whose units all get one dual step runs as one scan op (the default) or as one dual op per unit,
// the layer's loop (`ponder bench train --variants dual-loop`): the same bits and FLOPs either way.
void set_scan_op(bool on);
bool scan_op_enabled();

// What the layer carries from one chunk of a sequence to the next.
struct TTTLayerState {
  InnerState inner;  // undefined until the first chunk: starts from the learned W0
  Tensor conv_hist;  // (B, w−1, d): last inputs of the Q/K convs
  int64_t units = 0;  // units already processed
  Tensor last_xk, last_xv;  // (B, H, b, f): views of the last unit processed (for probes)
  // The last chunk's projections when TTTRun::keep_chunk was set (undefined otherwise): views, no copies.
  Tensor chunk_xk, chunk_xv;  // (B, H, N, f)
  Tensor chunk_eta;           // (B, H, n, b, b)
};

// Inner-loop statistics of the last processed unit under the weights now carried: what a policy
// may know before deciding the next unit. The gradient norm costs one inner gradient.
struct Probe {
  double loss = 0;       // mean over rows of ℓ_j(W)
  double grad_norm = 0;  // ‖∇_W Σ_j ℓ_j(W)‖ over all inner weights, averaged over (batch, head)
};

class TTTLayer : public Module {
 public:
  TTTLayer() = default;
  TTTLayer(const TTTConfig& cfg, int layer_index, Generator& gen, DType dtype = DType::F32);
  // u: (B, N, d) with N a multiple of the mini-batch size → (B, N, d).
  Tensor forward(const Tensor& u, const TTTRun& run) const;
  // The same computation for a sequence that arrives in chunks (each a multiple of the mini-batch
  // size): a chunk continues from `state` and advances it. Chunked and whole-sequence outputs agree.
  Tensor forward_chunk(const Tensor& u, TTTLayerState& state, const TTTRun& run) const;
  std::vector<Tensor> parameters() const override;
  // Names of parameters(), in the same order ("wq", "W1", "post_gamma", …).
  std::vector<std::string> parameter_names() const;
  // The defined parameter fields with their names, in parameters() order: the one list both derive from, and what
  // lets a caller put another tensor in a parameter's place (Model::with_parameters).
  std::vector<std::pair<std::string, Tensor*>> named_refs();
  const TTTConfig& config() const { return cfg_; }
  Probe probe(const TTTLayerState& state, bool with_grad) const;
  // The learned W0 (b1, W2, b2) for a batch of B sequences: where every sequence's inner state starts.
  InnerState initial_state(int64_t B) const;
  // The same statistics over every row of the kept chunk (TTTRun::keep_chunk) under the weights `w`: the chunk's
  // reconstruction loss before its first step (w the weights it started from) or after it (w = state.inner).
  Probe probe_chunk(const InnerState& w, const TTTLayerState& state, bool with_grad) const;
  // Carry mode's further steps on the kept chunk, taken after it was scored: `steps` passes over its mini-batches in
  // order, each one carry step (the rule every step after a unit's first follows, docs/ttt.md §3.2). The chunk's
  // outputs are not touched; state.inner moves. With a chunk of one mini-batch this is exactly the carry branch of a
  // unit run with 1 + steps steps.
  void extra_steps(TTTLayerState& state, int steps, const TTTRun& run, UnitCost& cost) const;
  // tok (b) on `device`, differentiable in token_idx (see TTTConfig::softplus_token_factor).
  Tensor token_factor(DType dtype, Device device) const;
  // tok[b−1], the factor of η's last row that every carried update is scaled by: 0 means the state handed to
  // later units never moves, so every K ≥ 1 gives the same outputs.
  double carry_factor() const;

  Tensor wq, wk, wv, wo, wg;           // (d, d); wk without shared_qk, wg with gate
  Tensor conv_q_w, conv_q_b;           // (d, w), (d): shared_qk only
  Tensor conv_k_w, conv_k_b;
  Tensor lr_w;                         // (d, H): θ_lr
  Tensor lr_b;                         // (H)
  Tensor token_idx;                    // (b): learnable offsets of the 1/(i+1) token factor
  Tensor ln_gamma, ln_beta;            // (H, f): the inner LayerNorm
  Tensor W1, b1, W2, b2;               // (H, f, h), (H, 1, h), (H, h, f), (H, 1, f): inner init W0
  Tensor post_gamma, post_beta;        // (d)

 private:
  InnerNorm inner_norm() const;  // the inner LayerNorm's γ, β shaped (1, H, 1, f)
  // Runs units [u0, u1) from `state`; xq, xk, xv (B, H, (u1−u0)·b, f) and eta (B, H, u1−u0, b, b)
  // hold just those units. Returns the outputs (B, H, (u1−u0)·b, f). `decided` receives the step
  // counts, or supplies them when replaying a rematerialised group.
  Tensor scan(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
              const Tensor& gamma, const Tensor& beta, int64_t u0, int64_t u1, const TTTRun& run,
              std::vector<int>& decided, bool replay) const;
  // scan() when every unit gets one dual step: one scan op (dual_scan: ttt_linear_scan or ttt_mlp_scan) for all.
  Tensor scan_plain(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                    const Tensor& gamma, const Tensor& beta, int64_t u0, std::vector<UnitCost>* costs) const;
  Tensor unit_step(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                   const Tensor& gamma, const Tensor& beta, int steps, const TTTRun& run, UnitCost& cost) const;
  // A chunk's inputs to the inner loop: xq, xk, xv (B, H, N, f), RoPE applied to xq and xk, and η (B, H, N/b, b, b).
  struct Projected {
    Tensor xq, xk, xv, eta;
  };
  // Projections, RoPE and η of a chunk u (B, N, d); with shared_qk, advances the Q/K convs' history in `st`.
  Projected project(const Tensor& u, TTTLayerState& st, const TTTRun& run) const;
  // The scan of the chunk's n units from u_base in checkpointed groups of run.remat_group units: the outputs of
  // scan() over all n, with only the states at group boundaries stored for backward.
  Tensor scan_rematerialised(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                             const Tensor& eta, int64_t u_base, int64_t n, const TTTRun& run) const;

  std::vector<std::pair<const char*, Tensor*>> fields();  // every field, defined or not

  TTTConfig cfg_;
  int layer_ = 0;
};

}  // namespace ponder::ttt
