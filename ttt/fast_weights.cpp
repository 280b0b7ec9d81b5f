#include "ttt/fast_weights.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/nn.h"
#include "tensor/rng.h"

namespace ponder::ttt {
namespace {

void need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("fast_weights: " + msg);
}

Tensor leaf(Tensor t, Device device) {
  Tensor p = raw::to_device(t, device);
  set_requires_grad(p);
  return p;
}

}  // namespace

void FastWeightsConfig::validate(int64_t layers) const {
  need(kind == "lora" || kind == "head", "kind must be lora or head, got '" + kind + "'");
  need(init_std >= 0 && std::isfinite(init_std), "init_std must be finite and >= 0, got " + std::to_string(init_std));
  need(replay >= 0 && replay <= 64, "replay must be in [0, 64] earlier chunks, got " + std::to_string(replay));
  if (kind == "head") {
    need(head_hidden >= 1, "head_hidden must be >= 1, got " + std::to_string(head_hidden));
    return;
  }
  need(rank >= 1, "rank must be >= 1, got " + std::to_string(rank));
  need(!targets.empty(), "targets must name at least one projection (e.g. ffn.w2)");
  need(last_blocks >= 0 && last_blocks <= layers, "last_blocks must be in [0, " + std::to_string(layers) +
                                                      "] (0 = every block), got " + std::to_string(last_blocks));
}

void FastOptimConfig::validate() const {
  need(optimizer == "sgd" || optimizer == "momentum" || optimizer == "adam",
       "optimizer must be sgd, momentum or adam, got '" + optimizer + "'");
  need(std::isfinite(lr) && lr >= 0, "lr must be finite and >= 0, got " + std::to_string(lr));
  need(std::isfinite(momentum) && momentum >= 0 && momentum < 1, "momentum must be in [0, 1), got " + std::to_string(momentum));
  need(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, "beta1 and beta2 must be in [0, 1)");
  need(std::isfinite(eps) && eps > 0, "eps must be > 0, got " + std::to_string(eps));
  need(std::isfinite(clip) && clip >= 0, "clip must be finite and >= 0 (0: none), got " + std::to_string(clip));
}

FastOptimizer::FastOptimizer(std::vector<Tensor> params, const FastOptimConfig& cfg)
    : params_(std::move(params)), cfg_(cfg) {
  cfg.validate();
  for (const Tensor& p : params_) {
    if (cfg.optimizer != "sgd") m_.push_back(raw::zeros_like(p));
    if (cfg.optimizer == "adam") v_.push_back(raw::zeros_like(p));
  }
}

void FastOptimizer::step(const std::vector<Tensor>& grads) {
  need(grads.size() == params_.size(), "step: " + std::to_string(grads.size()) + " gradients for " +
                                           std::to_string(params_.size()) + " parameters");
  NoGradGuard ng;
  double sq = 0;
  for (const Tensor& g : grads) sq += sum(mul(g, g)).item();
  const double norm = std::sqrt(sq);
  need(std::isfinite(norm), "the fast weights' gradient is not finite (norm " + std::to_string(norm) + ")");
  double scale = 1;
  if (cfg_.normalize) scale = norm > 0 ? 1 / norm : 0;
  else if (cfg_.clip > 0 && norm > cfg_.clip) scale = cfg_.clip / norm;
  ++t_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = grads[i] * scale;
    Tensor dir = g;
    if (cfg_.optimizer == "momentum") {
      m_[i] = add(m_[i] * cfg_.momentum, g);
      dir = m_[i];
    } else if (cfg_.optimizer == "adam") {
      m_[i] = add(m_[i] * cfg_.beta1, g * (1 - cfg_.beta1));
      v_[i] = add(v_[i] * cfg_.beta2, mul(g, g) * (1 - cfg_.beta2));
      const double c1 = 1 - std::pow(cfg_.beta1, double(t_)), c2 = 1 - std::pow(cfg_.beta2, double(t_));
      dir = div(m_[i] * (1 / c1), sqrt(v_[i] * (1 / c2)) + cfg_.eps);
    }
    raw::copy_(params_[i], sub(params_[i], dir * cfg_.lr));
  }
}

FastOptimizer::State FastOptimizer::save() const {
  State s;
  s.t = t_;
  for (const Tensor& p : params_) s.values.push_back(raw::clone(p));
  s.m = m_;  // buffers are replaced, never written in place, so handles are a snapshot
  s.v = v_;
  return s;
}

void FastOptimizer::restore(const State& s) {
  NoGradGuard ng;
  for (size_t i = 0; i < params_.size(); ++i) raw::copy_(params_[i], s.values[i]);
  m_ = s.m;
  v_ = s.v;
  t_ = s.t;
}

FastWeights::FastWeights(const Model& base, const FastWeightsConfig& cfg, uint64_t seed) : base_(base), cfg_(cfg) {
  const ModelConfig& mc = base.config();
  cfg.validate(mc.layers);
  Generator gen(seed);
  const DType dt = base.dtype();
  const Device dev = base.device();
  if (cfg.kind == "head") {
    const int64_t d = mc.d, h = cfg.head_hidden;
    params_ = {leaf(gen.normal({d, h}, 0, cfg.init_std, dt), dev), leaf(gen.normal({d, h}, 0, cfg.init_std, dt), dev),
               leaf(Tensor::zeros({h, d}, dt), dev)};
    names_ = {"head.w1", "head.w3", "head.w2"};
  } else {
    const std::vector<std::string> labels = base.parameter_labels();
    const std::vector<Tensor> tensors = base.parameters();
    const int64_t first = cfg.last_blocks == 0 ? 0 : mc.layers - cfg.last_blocks;
    for (int64_t l = first; l < mc.layers; ++l)
      for (const std::string& t : cfg.targets) {
        const std::string label = "block" + std::to_string(l) + "." + t;
        const auto it = std::find(labels.begin(), labels.end(), label);
        need(it != labels.end(), "no parameter " + label + " in this model (lora targets name a block's "
                                 "projection, e.g. ffn.w1, ffn.w2, ffn.w3, attn.wo, ttt.wo)");
        const Tensor& w = tensors[size_t(it - labels.begin())];
        need(w.dim() == 2, label + " is " + shape_str(w.shape()) + ": lora adapts matrices only");
        params_.push_back(leaf(gen.normal({w.shape()[0], cfg.rank}, 0, cfg.init_std, dt), dev));
        params_.push_back(leaf(Tensor::zeros({cfg.rank, w.shape()[1]}, dt), dev));
        names_.insert(names_.end(), {label + ".A", label + ".B"});
        labels_.push_back(label);
        adapted_.push_back(w);
      }
  }
  for (const Tensor& p : params_) initial_.push_back(raw::clone(p));
}

void FastWeights::reset() {
  NoGradGuard ng;
  for (size_t i = 0; i < params_.size(); ++i) raw::copy_(params_[i], initial_[i]);
  last_ = Read{};
  replayed_.clear();
}

Model FastWeights::adapted() const {
  std::vector<std::pair<std::string, Tensor>> replace;
  for (size_t i = 0; i < labels_.size(); ++i)
    replace.push_back({labels_[i], add(adapted_[i], matmul(params_[2 * i], params_[2 * i + 1]))});
  return base_.with_parameters(replace);
}

Tensor FastWeights::head_logits(const Tensor& hidden) const {
  const Tensor n = rms_norm_rows(hidden, base_.config().rms_eps);
  const Tensor f = matmul(silu_mul(matmul(n, params_[0]), matmul(n, params_[1])), params_[2]);
  return base_.logits(add(hidden, f));
}

Tensor FastWeights::read(const Tensor& ids, ModelState& state, const Tensor& targets) {
  // The scoring pass is never differentiated (updates differentiate reread()), and a state carried with a graph
  // would chain every later chunk's backward to this one.
  NoGradGuard scoring;
  need(cfg_.replay == 0 || targets.defined(), "read: replay needs each chunk's targets");
  if (cfg_.replay > 0 && last_.ids.defined()) {
    replayed_.push_back(last_);
    if (int64_t(replayed_.size()) > cfg_.replay) replayed_.erase(replayed_.begin());
  }
  last_ = Read{ids, Tensor(), targets, ModelState{}};
  if (cfg_.kind == "head") {
    last_.hidden = base_.hidden_chunk(ids, state);  // the head's input: a constant of every update on this chunk
    return head_logits(last_.hidden);
  }
  last_.before = state;  // handles: forward_chunk assigns new tensors to the state, never writes into them
  return adapted().forward_chunk(ids, state);
}

Tensor FastWeights::peek(const Tensor& ids, ModelState& state) const {
  NoGradGuard look;
  if (cfg_.kind == "head") return head_logits(base_.hidden_chunk(ids, state));
  return adapted().forward_chunk(ids, state);
}

Tensor FastWeights::logits_of(const Read& r) const {
  if (cfg_.kind == "head") return head_logits(r.hidden);
  ModelState s = r.before;
  return adapted().forward_chunk(r.ids, s);
}

Tensor FastWeights::reread() const {
  need(last_.ids.defined(), "reread() before any read()");
  return logits_of(last_);
}

double FastWeights::update(const Tensor& targets, int64_t len, FastOptimizer& opt) {
  SetGradGuard on(true);  // callers (rollouts) run under no-grad
  const Tensor logits = reread();
  const int64_t V = logits.shape()[2];
  need(len >= 1 && len <= logits.shape()[1], "update: len " + std::to_string(len) + " outside the chunk");
  auto mean_loss = [V](const Tensor& lg, const Tensor& tg, int64_t n) {
    return cross_entropy(reshape(slice(lg, 1, 0, n), {n, V}), raw::reshape(raw::slice(tg, 1, 0, n), {n}));
  };
  Tensor loss = mean_loss(logits, targets, len);
  if (!replayed_.empty()) {  // the mean over every token of the chunk and the replayed ones
    Tensor total = affine(loss, double(len), 0);
    int64_t count = len;
    for (const Read& r : replayed_) {
      const int64_t n = r.targets.shape()[1];
      total = add(total, affine(mean_loss(logits_of(r), r.targets, n), double(n), 0));
      count += n;
    }
    loss = affine(total, 1.0 / double(count), 0);
  }
  opt.step(grad({loss}, params_));
  return loss.item();
}

}  // namespace ponder::ttt
