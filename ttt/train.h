// Training the language model with the official outer recipe (docs/ttt.md §2.3): AdamW β (0.9, 0.95) with
// weight decay 0.1, linear warm-up then cosine decay to a floor, global-norm clipping 1.0, gradient
// accumulation over micro-batches, the TTT-MLP inner learning-rate warm-up (docs/ttt.md §1.5, §2.3), and optionally
// randomised step schedules, so a model is trained for the schedules it will be evaluated with.
// Everything a run depends on (parameters, moments, data position, schedule draws) is checkpointed, so a
// resumed run is bit-identical on CPU to an uninterrupted one with the same thread count.
#pragma once
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/optim.h"
#include "data/windows.h"
#include "ttt/checkpoint_io.h"
#include "ttt/eval.h"
#include "ttt/model.h"
#include "ttt/stream_eval.h"

namespace ponder::ttt {

struct TrainConfig {
  int64_t steps = 600;          // optimiser steps
  int64_t batch_size = 4;       // windows per micro-batch
  int64_t seq_len = 128;        // tokens per window; a multiple of the model's mini-batch
  int64_t grad_accum = 1;       // micro-batches per optimiser step
  // The grad_accum micro-batches of a step are consecutive windows of the same runs of text, read in order with the
  // model state (TTT inner weights, attention keys and values, conv histories) carried from one to the next and cut
  // from the graph between them (truncated backpropagation through time): the model learns to read grad_accum ·
  // seq_len tokens with one state, as it will on a long stream. false = every window from a fresh state (official).
  bool carry_state = false;
  double lr = 3e-3;             // peak learning rate
  double min_lr = 3e-4;         // floor the cosine decay ends at
  int64_t warmup = 60;          // steps of linear warm-up
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;       // global L2 norm; 0 = off
  uint64_t seed = 0;            // initialisation, window sampling and schedule draws
  // Randomised schedules: each TTT layer's units draw K uniformly from these; empty = one step per unit.
  std::vector<int> step_options;
  StepMode mode = StepMode::Carry;
  InnerPath path = InnerPath::Dual;
  int64_t remat_group = 0;      // units per rematerialised group; 0 = keep every activation
  double ttt_lr_mult_init = 0.1;  // TTT-MLP: ttt_lr_mult ramps from this to 1 (the official 0.01 → 0.1 base lr)
  int64_t ttt_lr_warmup = 0;      // steps of that ramp; 0 = 10 % of the steps
  int64_t log_every = 10;         // progress / log line every N steps
  int64_t eval_every = 100;       // validation every N steps (and at the end); 0 = only at the end
  int64_t checkpoint_every = 0;   // checkpoint every N steps (and at the end); 0 = only at the end
  // A frozen base under a trained head (the published anchor's TTT head, docs/method.md §7): every parameter of the
  // checkpoint at init_from is copied into this model's parameter of the same name (block l's i-th parameter, so the
  // base's blocks come first, with the same mixers and sizes), and with freeze_loaded they never train (no gradient,
  // no update, no weight decay); the rest, e.g. a TTT block on top, trains from its own initialisation. "{seed}" in
  // the path stands for train.seed, so independently trained heads (--seed) can sit on independently trained bases.
  std::string init_from;
  bool freeze_loaded = true;
  // Throws naming the offending key (train.<key>); `model` is needed for the cross-checks.
  void validate(const ModelConfig& model) const;
};

// train.init_from with "{seed}" replaced by train.seed.
std::string init_path(const TrainConfig& cfg);

// Learning rate for optimiser step `step` (1-based): linear warm-up to lr, then cosine to min_lr.
double learning_rate(const TrainConfig& c, int64_t step);
// ttt_lr_mult at `step` for TTT-MLP (docs/ttt.md §2.3); 1 for TTT-Linear.
double ttt_lr_mult(const TrainConfig& c, const ModelConfig& m, int64_t step);

// K drawn uniformly from `options` for every (layer, unit), in the order the layers ask.
class RandomSchedule final : public StepSchedule {
 public:
  RandomSchedule(std::vector<int> options, Generator& gen) : options_(std::move(options)), gen_(gen) {}
  int steps(const UnitInfo& u) override;
  bool decides_ahead() const override { return true; }
 private:
  std::vector<int> options_;
  Generator& gen_;
};

// What one optimiser step did, with where its time and FLOPs went.
struct StepStats {
  int64_t step = 0;
  double loss = 0;        // mean over the step's micro-batches
  double lr = 0;
  double grad_norm = 0;   // before clipping
  int64_t tokens = 0;
  FlopCounts flops;       // forward + backward passes
  FlopCounts optim_flops; // clipping and the AdamW update
  double forward_s = 0, backward_s = 0, optim_s = 0;  // this rank's (rank 0's in the logs)
  double comm_s = 0;      // several ranks: summing the gradients over them (and waiting for the slowest)
  int ranks = 1;          // processes the step's micro-batches were split over (tensor/dist.h)
  double seconds() const { return forward_s + backward_s + optim_s + comm_s; }
};

// Raised when a loss or gradient norm is NaN/Inf; the step is abandoned before touching the parameters.
struct NonFiniteError : std::runtime_error {
  NonFiniteError(const std::string& what, int64_t step) : std::runtime_error(what), step(step) {}
  int64_t step;
};

// Data-parallel over the ranks of tensor/dist.h when there are several (mpirun -np N): every rank holds the whole
// model and optimiser, computes grad_accum / N of each step's micro-batches (rank r the r-th consecutive share, with
// the windows and schedule draws one process would give them), and the gradients are summed over the ranks before
// clipping and AdamW, so every rank takes the same step. N ranks with grad_accum = N × a are the one-process run with
// grad_accum = N × a: bit for bit when a = 1 (the ranks' gradients are added in the order one process adds its
// micro-batches'), up to float32 rounding of that sum's grouping otherwise.
class Trainer {
 public:
  // The model is initialised on the CPU (same values everywhere) and then moved to `device`. Throws when
  // train.grad_accum is not a multiple of the ranks.
  Trainer(const ModelConfig& model, const TrainConfig& train, data::TokenStream tokens,
          Device device = Device::CPU);
  StepStats step();  // one optimiser step; throws NonFiniteError (on every rank when there are several)
  int64_t step_count() const { return step_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  const Model& model() const { return model_; }
  const TrainConfig& config() const { return cfg_; }
  int64_t frozen_parameters() const { return frozen_; }  // tensors taken from train.init_from and frozen
  // Moves the parameters and the AdamW moments to `device` (between steps); data batches follow the model.
  void to(Device device);
  Device device() const { return model_.device(); }

  // Host (CPU) copies of everything a resumed run needs, wherever the model lives.
  Checkpoint checkpoint(const std::string& config_text, std::vector<std::pair<std::string, std::string>> meta);
  // Continues from `ck` (copied onto the model's device); throws naming the first parameter whose name
  // or shape does not match.
  void restore(const Checkpoint& ck);

 private:
  // Why a step's loss came out non-finite: the first parameter holding NaN/Inf, else the first activation
  // (in forward order, by name) that is non-finite when `batch` goes through the model again under `run`.
  std::string trace_non_finite(const data::Batch& batch, const ModelState& state, const TTTRun& run) const;
  // This rank's micro-batches of the step (forward, backward); returns their losses, in order.
  std::vector<double> micro_batches(const TTTRun& run, StepStats& st);
  // The data sampler and schedule generator where one process would be before micro-batch `micro` of the step that
  // started at (sampler0, schedule0).
  void seek(uint64_t sampler0, uint64_t schedule0, int64_t micro);
  // Several ranks: the step's losses, FLOPs and tokens from every rank, and the gradients summed over them.
  std::vector<double> share_step(const std::vector<double>& losses, StepStats& st);

  TrainConfig cfg_;
  Model model_;
  AdamW opt_;
  data::WindowSampler sampler_;
  Generator schedule_gen_;
  int64_t step_ = 0;
  int rank_ = 0, ranks_ = 1;
  int64_t schedule_draws_ = 0;  // schedule draws of one micro-batch's forward pass
  int64_t frozen_ = 0;
};

// Copies a checkpoint's parameters into `model`, on whatever device it lives (for evaluation); throws
// naming the first parameter whose name or shape does not match.
void load_parameters(const Model& model, const Checkpoint& ck);

// A run to the end (or to `stop_after`) with validation, checkpoints and reports.
struct TrainLoopOptions {
  std::string checkpoint_path;  // written atomically at intervals and at the end
  std::string config_text;      // stored in every checkpoint
  std::vector<std::pair<std::string, std::string>> meta;  // e.g. the git commit, stored too
  const data::EvalWindows* valid = nullptr;  // validation windows; null = no validation
  EvalOptions eval;
  // Validation streams read with the state carried, beside the windows at each validation; null or empty = none.
  // stream_eval.inner and lr_mult are taken from `eval` and the step.
  const std::vector<data::StreamTokens>* valid_streams = nullptr;
  StreamEvalOptions stream_eval;
  int64_t stop_after = 0;       // 0 = run to cfg.steps; otherwise checkpoint and stop after this step
  std::function<bool()> interrupted;  // polled after each step: true checkpoints and stops
};

struct StepReport {
  StepStats stats;
  std::optional<EvalResult> val;  // when validation ran at this step
  std::optional<StreamEvalResult> val_stream;  // when validation ran and TrainLoopOptions::valid_streams is set
  bool checkpointed = false;
};

struct TrainResult {
  int64_t final_step = 0;
  bool interrupted = false;
  std::vector<std::pair<int64_t, double>> val_bpb;  // (step, bpb) of each validation this run
};

// `on_step` sees every step; its report says whether validation ran or a checkpoint was written.
// A non-finite loss throws std::runtime_error naming the step and the last good checkpoint, which is
// left as it was.
TrainResult train_loop(Trainer& trainer, const TrainLoopOptions& opt,
                       const std::function<void(const StepReport&)>& on_step = {});

}  // namespace ponder::ttt
