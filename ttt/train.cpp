#include "ttt/train.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <numbers>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_sync.h"
#include "tensor/dist.h"
#include "ttt/checkpoint_io.h"
#include "util/fault.h"

namespace ponder::ttt {
namespace {

// Independent streams from one configured seed.
constexpr uint64_t kSamplerStream = 1, kScheduleStream = 2;

void need(bool ok, const std::string& key, const std::string& msg) {
  if (!ok) throw std::invalid_argument("train." + key + " " + msg);
}

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Host copies, so a checkpoint neither aliases the live tensors nor holds device memory.
std::vector<NamedTensor> named_copies(const std::vector<std::pair<std::string, Tensor>>& params,
                                      const std::vector<Tensor>& values) {
  std::vector<NamedTensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& v = values[i];
    out.push_back({params[i].first, v.device() == Device::CPU ? raw::clone(v) : raw::to_device(v, Device::CPU)});
  }
  return out;
}

// Copies `src` into `dst` after checking that the lists line up name by name and shape by shape.
void load_into(const std::vector<std::pair<std::string, Tensor>>& names, const std::vector<Tensor>& dst,
               const std::vector<NamedTensor>& src, const char* what) {
  if (src.size() != dst.size())
    throw std::runtime_error(std::string("checkpoint holds ") + std::to_string(src.size()) + " " + what +
                             " tensors, this model has " + std::to_string(dst.size()));
  for (size_t i = 0; i < dst.size(); ++i) {
    const Tensor& d = dst[i];
    const NamedTensor& s = src[i];
    if (s.name != names[i].first || s.value.shape() != d.shape() || s.value.dtype() != d.dtype())
      throw std::runtime_error(std::string("checkpoint ") + what + " " + std::to_string(i) + " is '" + s.name + "' " +
                               shape_str(s.value.shape()) + " " + dtype_name(s.value.dtype()) + ", this model has '" +
                               names[i].first + "' " + shape_str(d.shape()) + " " + dtype_name(d.dtype()));
    raw::copy_(d, raw::to_device(s.value, d.device()));
  }
}

// "3 NaN and 1 Inf among 4096 values" when t holds non-finite values, else "".
std::string non_finite(const Tensor& t) {
  int64_t nan = 0, inf = 0;
  for (double v : t.to_vector()) {
    nan += std::isnan(v);
    inf += std::isinf(v);
  }
  if (nan + inf == 0) return "";
  return std::to_string(nan) + " NaN and " + std::to_string(inf) + " Inf among " + std::to_string(t.numel()) +
         " values";
}

}  // namespace

std::string init_path(const TrainConfig& cfg) {
  std::string path = cfg.init_from;
  for (size_t at = path.find("{seed}"); at != std::string::npos; at = path.find("{seed}", at))
    path.replace(at, 6, std::to_string(cfg.seed));
  return path;
}

namespace {

// train.init_from: the base checkpoint's parameters copied into the ones of the same name, frozen with
// freeze_loaded; returns how many were frozen. Throws naming a base parameter this model lacks or holds otherwise.
int64_t load_base(const Model& model, const TrainConfig& cfg) {
  const Checkpoint base = load_checkpoint(init_path(cfg));
  const auto named = model.named_parameters();
  const auto labels = model.parameter_labels();
  NoGradGuard ng;
  int64_t frozen = 0;
  for (const NamedTensor& s : base.params) {
    size_t i = 0;
    while (i < named.size() && named[i].first != s.name) ++i;
    if (i == named.size())
      throw std::invalid_argument("train.init_from: '" + init_path(cfg) + "' holds parameter '" + s.name +
                                  "', which this model does not have: the base's blocks must come first");
    Tensor p = named[i].second;
    if (s.value.shape() != p.shape() || s.value.dtype() != p.dtype())
      throw std::invalid_argument("train.init_from: '" + init_path(cfg) + "' holds '" + s.name + "' as " +
                                  shape_str(s.value.shape()) + " " + dtype_name(s.value.dtype()) + ", this model's " +
                                  labels[i] + " is " + shape_str(p.shape()) + " " + dtype_name(p.dtype()));
    raw::copy_(p, raw::to_device(s.value, p.device()));
    if (cfg.freeze_loaded) {
      set_requires_grad(p, false);
      ++frozen;
    }
  }
  if (frozen == int64_t(named.size()))
    throw std::invalid_argument("train.init_from: every parameter of this model is in '" + init_path(cfg) +
                                "' and frozen: nothing would train (add a block, or set train.freeze_loaded: false)");
  return frozen;
}

}  // namespace

void TrainConfig::validate(const ModelConfig& model) const {
  need(steps > 0, "steps", "must be positive, got " + std::to_string(steps));
  need(batch_size > 0, "batch_size", "must be positive, got " + std::to_string(batch_size));
  need(seq_len > 0 && model.mini_batch > 0 && seq_len % model.mini_batch == 0, "seq_len",
       "= " + std::to_string(seq_len) + " must be a positive multiple of model.mini_batch = " +
           std::to_string(model.mini_batch));
  need(grad_accum > 0, "grad_accum", "must be positive, got " + std::to_string(grad_accum));
  need(!carry_state || grad_accum > 1, "carry_state",
       "reads the grad_accum micro-batches of a step as consecutive windows: it needs train.grad_accum >= 2, got " +
           std::to_string(grad_accum));
  need(lr > 0, "lr", "must be positive, got " + num(lr));
  need(min_lr >= 0 && min_lr <= lr, "min_lr", "must lie in [0, lr], got " + num(min_lr));
  need(warmup >= 0 && warmup <= steps, "warmup", "must lie in [0, steps], got " + std::to_string(warmup));
  need(beta1 >= 0 && beta1 < 1, "beta1", "must lie in [0, 1), got " + num(beta1));
  need(beta2 >= 0 && beta2 < 1, "beta2", "must lie in [0, 1), got " + num(beta2));
  need(eps > 0, "eps", "must be positive, got " + num(eps));
  need(weight_decay >= 0, "weight_decay", "must be >= 0, got " + num(weight_decay));
  need(grad_clip >= 0, "grad_clip", "must be >= 0, got " + num(grad_clip));
  for (int k : step_options) need(k >= 0, "step_options", "must hold step counts >= 0, got " + std::to_string(k));
  need(remat_group >= 0, "remat_group", "must be >= 0, got " + std::to_string(remat_group));
  need(ttt_lr_mult_init > 0 && ttt_lr_mult_init <= 1, "ttt_lr_mult_init",
       "must lie in (0, 1], got " + num(ttt_lr_mult_init));
  need(ttt_lr_warmup >= 0, "ttt_lr_warmup", "must be >= 0, got " + std::to_string(ttt_lr_warmup));
  need(log_every > 0, "log_every", "must be positive, got " + std::to_string(log_every));
  need(eval_every >= 0, "eval_every", "must be >= 0, got " + std::to_string(eval_every));
  need(checkpoint_every >= 0, "checkpoint_every", "must be >= 0, got " + std::to_string(checkpoint_every));
}

double learning_rate(const TrainConfig& c, int64_t step) {
  if (step <= c.warmup) return c.lr * double(step) / double(c.warmup);
  const double span = double(c.steps - c.warmup);
  const double progress = std::min(1.0, double(step - c.warmup) / span);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

double ttt_lr_mult(const TrainConfig& c, const ModelConfig& m, int64_t step) {
  if (m.inner != "mlp") return 1.0;
  const int64_t warmup = c.ttt_lr_warmup > 0 ? c.ttt_lr_warmup : std::max<int64_t>(1, c.steps / 10);
  const double ramp = std::min(1.0, double(step - 1) / double(warmup));
  return c.ttt_lr_mult_init + ramp * (1 - c.ttt_lr_mult_init);
}

int RandomSchedule::steps(const UnitInfo&) {
  const auto n = options_.size();
  return options_[std::min(n - 1, size_t(gen_.uniform01() * double(n)))];
}

Trainer::Trainer(const ModelConfig& model, const TrainConfig& train, data::TokenStream tokens, Device device)
    : cfg_((model.validate(), train.validate(model), train)),
      model_(model, train.seed),
      opt_(model_.parameters(), train.lr, train.beta1, train.beta2, train.eps, train.weight_decay),
      sampler_(std::move(tokens), train.batch_size, train.seq_len, train.seed + kSamplerStream,
               train.carry_state ? train.grad_accum : 1),
      schedule_gen_(train.seed + kScheduleStream),
      rank_(dist::rank()),
      ranks_(dist::size()) {
  if (cfg_.carry_state && ranks_ > 1)
    throw std::invalid_argument("train.carry_state reads a step's micro-batches one after another with one state, so "
                                "they cannot be split over " + std::to_string(ranks_) + " ranks: run it in one process");
  if (cfg_.grad_accum % ranks_ != 0)
    throw std::invalid_argument("train.grad_accum = " + std::to_string(cfg_.grad_accum) + " must be a multiple of the " +
                                std::to_string(ranks_) + " ranks: each rank computes grad_accum / ranks of every "
                                "step's micro-batches (--set train.grad_accum=" + std::to_string(ranks_) +
                                " gives each one)");
  // Each TTT layer asks a randomised schedule once per unit (mini-batch) of the window.
  if (!cfg_.step_options.empty())
    schedule_draws_ = model_.num_ttt_layers() * (cfg_.seq_len / model_.config().mini_batch);
  if (!cfg_.init_from.empty()) frozen_ = load_base(model_, cfg_);
  to(device);
}

void Trainer::to(Device device) {
  model_.to(device);
  opt_.to(device);
}

void Trainer::seek(uint64_t sampler0, uint64_t schedule0, int64_t micro) {
  sampler_.seek(sampler0, micro);
  schedule_gen_.set_state(cfg_.seed + kScheduleStream, schedule0 + uint64_t(micro * schedule_draws_));
}

std::vector<double> Trainer::micro_batches(const TTTRun& run, StepStats& st) {
  const int64_t count = cfg_.grad_accum / ranks_, first = int64_t(rank_) * count;
  const uint64_t sampler0 = sampler_.state(), schedule0 = schedule_gen_.counter();
  // train.carry_state: the step's windows are runs read in order, the state carried between them (one process).
  const std::vector<data::Batch> runs = cfg_.carry_state ? sampler_.next_span() : std::vector<data::Batch>{};
  ModelState state;
  std::vector<double> losses;
  std::string failure;
  for (int64_t micro = first; micro < first + count; ++micro) {
    if (ranks_ > 1) seek(sampler0, schedule0, micro);
    const data::Batch batch = cfg_.carry_state ? runs[size_t(micro)] : sampler_.next();
    const ModelState before = state;
    const uint64_t schedule_at = schedule_gen_.counter();
    auto t0 = std::chrono::steady_clock::now();
    Tensor loss = mean(model_.token_losses(batch.input, batch.target, state, run));
    state = cfg_.carry_state ? detached(state) : ModelState{};
    const double value = loss.item();
    st.forward_s += since(t0);
    if (!std::isfinite(value)) {
      schedule_gen_.set_state(cfg_.seed + kScheduleStream, schedule_at);  // the same step counts again
      RandomSchedule again(cfg_.step_options, schedule_gen_);
      TTTRun rerun = run;
      rerun.schedule = run.schedule ? &again : nullptr;
      failure = "loss is " + std::to_string(value) + " at step " + std::to_string(st.step) +
                (cfg_.carry_state ? " (window " + std::to_string(micro + 1) + " of its carried runs)" : "") + "; " +
                trace_non_finite(batch, before, rerun);
      break;
    }
    if (ranks_ > 1 && schedule_gen_.counter() - schedule_at != uint64_t(schedule_draws_))
      throw std::logic_error("a micro-batch drew " + std::to_string(schedule_gen_.counter() - schedule_at) +
                             " step counts, not the " + std::to_string(schedule_draws_) + " the ranks skip over");
    losses.push_back(value);
    st.tokens += batch.input.numel();
    t0 = std::chrono::steady_clock::now();
    backward(cfg_.grad_accum > 1 ? loss * (1.0 / double(cfg_.grad_accum)) : loss);
    st.backward_s += since(t0);
  }
  if (ranks_ > 1) {
    failure = dist::first_message(failure);  // one rank's non-finite loss stops every rank
    seek(sampler0, schedule0, cfg_.grad_accum);
  }
  if (!failure.empty()) throw NonFiniteError(failure, st.step);
  return losses;
}

std::vector<double> Trainer::share_step(const std::vector<double>& losses, StepStats& st) {
  const auto t0 = std::chrono::steady_clock::now();
  // FLOP counters and tokens: each rank counted its own micro-batches.
  std::vector<uint64_t> mine;
  for (const auto& cat : st.flops.n) mine.insert(mine.end(), cat.begin(), cat.end());
  mine.push_back(st.flops.bytes_moved);
  mine.push_back(uint64_t(st.tokens));
  const std::vector<uint64_t> all = dist::allgather(mine);
  st.flops = FlopCounts{};
  st.tokens = 0;
  for (size_t at = 0; at < all.size(); at += mine.size()) {
    size_t i = at;
    for (auto& cat : st.flops.n)
      for (uint64_t& v : cat) v += all[i++];
    st.flops.bytes_moved += all[i++];
    st.tokens += int64_t(all[i]);
  }
  std::vector<double> every = dist::allgather(losses);  // in micro-batch order: rank r holds the r-th share
  sum_gradients_over_ranks(opt_.params());
  st.comm_s = since(t0);
  return every;
}

StepStats Trainer::step() {
  StepStats st;
  st.step = step_ + 1;
  st.ranks = ranks_;
  st.lr = learning_rate(cfg_, st.step);
  opt_.set_lr(st.lr);
  opt_.zero_grad();
  RandomSchedule random(cfg_.step_options, schedule_gen_);
  TTTRun run;
  run.path = cfg_.path;
  run.mode = cfg_.mode;
  run.schedule = cfg_.step_options.empty() ? nullptr : &random;
  run.lr_mult = ttt_lr_mult(cfg_, model_.config(), st.step);
  run.remat_group = cfg_.remat_group;
  FlopScope grad_scope;
  std::vector<double> losses = micro_batches(run, st);
  st.flops = grad_scope.counts();
  if (ranks_ > 1) losses = share_step(losses, st);
  for (double v : losses) st.loss += v / double(cfg_.grad_accum);
  const auto t0 = std::chrono::steady_clock::now();
  FlopScope optim_scope;
  const double clip = cfg_.grad_clip > 0 ? cfg_.grad_clip : std::numeric_limits<double>::infinity();
  // The gradients are the same on every rank, so is their norm: every rank clips alike without exchanging it.
  st.grad_norm = clip_grad_norm(opt_.params(), clip);
  if (!std::isfinite(st.grad_norm)) {
    std::string where = "every gradient is finite: their squared norm overflowed";
    const auto named = model_.named_parameters();
    const auto labels = model_.parameter_labels();
    for (size_t i = 0; i < named.size(); ++i) {
      const Tensor g = grad_of(named[i].second);
      const std::string bad = g.defined() ? non_finite(g) : "";
      if (bad.empty()) continue;
      where = "the first parameter with a non-finite gradient is " + labels[i] + " ('" + named[i].first + "', " +
              shape_str(g.shape()) + "): " + bad;
      break;
    }
    throw NonFiniteError("gradient norm is " + std::to_string(st.grad_norm) + " at step " + std::to_string(st.step) +
                             "; " + where,
                         st.step);
  }
  opt_.step();
  st.optim_flops = optim_scope.counts();
  st.optim_s = since(t0);
  step_ = st.step;
  return st;
}

std::string Trainer::trace_non_finite(const data::Batch& batch, const ModelState& state, const TTTRun& run) const {
  const auto named = model_.named_parameters();
  const auto labels = model_.parameter_labels();
  for (size_t i = 0; i < named.size(); ++i) {
    const std::string bad = non_finite(named[i].second);
    if (!bad.empty())
      return "parameter " + labels[i] + " ('" + named[i].first + "', " + shape_str(named[i].second.shape()) +
             ") holds " + bad;
  }
  // The parameters are finite: repeat the forward pass without recording and watch the activations.
  NoGradGuard ng;
  std::string first;
  TTTRun watched = run;
  watched.watch = [&](const std::string& where, const Tensor& t) {
    if (!first.empty()) return;
    const std::string bad = non_finite(t);
    if (!bad.empty()) first = where + " " + shape_str(t.shape()) + ": " + bad;
  };
  ModelState from = detached(state);
  const Tensor losses = model_.token_losses(batch.input, batch.target, from, watched);
  if (first.empty()) {
    const std::string bad = non_finite(losses);
    if (!bad.empty()) first = "the token losses (the logits are finite) " + shape_str(losses.shape()) + ": " + bad;
  }
  return first.empty() ? "the repeated forward pass gave finite activations and losses"
                       : "the first non-finite activation is " + first;
}

Checkpoint Trainer::checkpoint(const std::string& config_text, std::vector<std::pair<std::string, std::string>> meta) {
  const auto names = model_.named_parameters();
  Checkpoint ck;
  ck.config_text = config_text;
  ck.meta = std::move(meta);
  ck.step = step_;
  ck.sampler_state = sampler_.state();
  ck.schedule_state = schedule_gen_.counter();
  ck.optimizer_steps = opt_.steps();
  ck.params = named_copies(names, opt_.params());
  ck.exp_avg = named_copies(names, opt_.exp_avg());
  ck.exp_avg_sq = named_copies(names, opt_.exp_avg_sq());
  return ck;
}

void Trainer::restore(const Checkpoint& ck) {
  NoGradGuard no_grad;
  const auto names = model_.named_parameters();
  load_into(names, opt_.params(), ck.params, "parameter");
  load_into(names, opt_.exp_avg(), ck.exp_avg, "first-moment");
  load_into(names, opt_.exp_avg_sq(), ck.exp_avg_sq, "second-moment");
  opt_.set_steps(ck.optimizer_steps);
  sampler_.set_state(ck.sampler_state);
  schedule_gen_.set_state(cfg_.seed + kScheduleStream, ck.schedule_state);
  step_ = ck.step;
}

void load_parameters(const Model& model, const Checkpoint& ck) {
  NoGradGuard no_grad;
  load_into(model.named_parameters(), model.parameters(), ck.params, "parameter");
}

TrainResult train_loop(Trainer& trainer, const TrainLoopOptions& opt,
                       const std::function<void(const StepReport&)>& on_step) {
  const TrainConfig& cfg = trainer.config();
  const int64_t end = opt.stop_after > 0 ? std::min(opt.stop_after, cfg.steps) : cfg.steps;
  const bool saving = !opt.checkpoint_path.empty();
  // A checkpoint already on disk is the one this run resumed from.
  int64_t saved_step = saving && std::filesystem::exists(opt.checkpoint_path) ? trainer.step_count() : -1;
  TrainResult result;
  while (trainer.step_count() < end) {
    StepReport rep;
    try {
      rep.stats = trainer.step();
      fault::point("train.step");
    } catch (const NonFiniteError& e) {
      const std::string last = saved_step >= 0 ? "'" + opt.checkpoint_path + "' (step " +
                                                      std::to_string(saved_step) + ")"
                                                : "none (no checkpoint was written before the failure)";
      const std::string msg = std::string(e.what()) + "; training stopped and wrote nothing; last good checkpoint: " + last;
      if (trainer.ranks() > 1) throw dist::SharedError(msg);  // every rank stops here (Trainer::step)
      throw std::runtime_error(msg);
    }
    const int64_t s = rep.stats.step;
    // Validation and checkpoints are rank 0's: every rank holds the same parameters.
    const bool lead = trainer.rank() == 0;
    if (lead && opt.valid != nullptr && ((cfg.eval_every > 0 && s % cfg.eval_every == 0) || s == cfg.steps)) {
      EvalOptions eo = opt.eval;
      eo.lr_mult = ttt_lr_mult(cfg, trainer.model().config(), s);
      rep.val = evaluate(trainer.model(), *opt.valid, eo);
      result.val_bpb.push_back({s, rep.val->bpb});
      if (opt.valid_streams != nullptr && !opt.valid_streams->empty()) {
        StreamEvalOptions so = opt.stream_eval;
        so.inner = eo.inner;
        so.lr_mult = eo.lr_mult;
        rep.val_stream = evaluate_streams(trainer.model(), *opt.valid_streams, so);
      }
    }
    const bool stop = dist::any(opt.interrupted && opt.interrupted());  // a rank stopping alone would leave the rest waiting
    if (saving && ((cfg.checkpoint_every > 0 && s % cfg.checkpoint_every == 0) || s == end || stop)) {
      if (lead) save_checkpoint(opt.checkpoint_path, trainer.checkpoint(opt.config_text, opt.meta));
      saved_step = s;
      rep.checkpointed = true;
    }
    if (on_step) on_step(rep);
    if (stop) {
      result.interrupted = true;
      break;
    }
  }
  result.final_step = trainer.step_count();
  return result;
}

}  // namespace ponder::ttt
