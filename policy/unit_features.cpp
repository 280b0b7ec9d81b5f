#include "policy/unit_features.h"

#include <array>

namespace ponder::policy {

namespace {
constexpr double kEma = 0.7;
double ema(double old, double x) { return std::isnan(old) ? x : kEma * old + (1 - kEma) * x; }
}  // namespace

double mean_entropy(const Tensor& logits) {
  NoGradGuard ng;
  Tensor lp = log_softmax(logits, -1);
  return -mean(sum(mul(exp(lp), lp), {-1})).item();
}

std::vector<std::string> UnitFeatures::vector_names() {
  return {"position",        "prev_loss",   "has_prev",    "prev_entropy", "ema_loss",     "ema_entropy",
          "ttt_loss",        "has_ttt_loss", "grad_norm",  "has_grad",     "hidden_mean",  "hidden_std",
          "hidden_sparsity", "budget_left", "prev_k",      "mean_k",       "prev_k_is_0",  "prev_k_is_1",
          "prev_k_is_2",     "prev_k_ge_4", "loss_minus_ema", "entropy_minus_ema", "first_unit",
          "first_is_newline", "first_is_space", "first_is_letter", "first_is_digit", "first_is_punct", "after_first_step",
          "recon_before", "recon_drop", "has_recon", "bias"};
}

namespace {
// One-hot byte class of `t` (newline, space or tab, letter, digit, other printable ASCII); all 0 when unknown (-1) or
// outside ASCII (a tokenizer other than bytes).
std::array<double, 5> byte_class(int t) {
  std::array<double, 5> c{};
  if (t == '\n') c[0] = 1;
  else if (t == ' ' || t == '\t') c[1] = 1;
  else if ((t >= 'a' && t <= 'z') || (t >= 'A' && t <= 'Z')) c[2] = 1;
  else if (t >= '0' && t <= '9') c[3] = 1;
  else if (t > ' ' && t < 127) c[4] = 1;
  return c;
}
}  // namespace

std::vector<double> UnitFeatures::vector() const {
  auto v = [](double x) { return std::isnan(x) ? 0.0 : x; };
  const bool has_prev = !std::isnan(prev_loss);
  const std::array<double, 5> cls = byte_class(first_token);
  return {double(unit) / double(std::max<int64_t>(n_units, 1)),
          v(prev_loss),
          has_prev ? 1.0 : 0.0,
          v(prev_entropy),
          v(ema_loss),
          v(ema_entropy),
          v(ttt_loss),
          std::isnan(ttt_loss) ? 0.0 : 1.0,
          v(grad_norm),
          std::isnan(grad_norm) ? 0.0 : 1.0,
          v(hidden_mean),
          v(hidden_std),
          v(hidden_sparsity),
          budget_left,
          double(std::max(prev_k, 0)),
          mean_k,
          prev_k == 0 ? 1.0 : 0.0,
          prev_k == 1 ? 1.0 : 0.0,
          prev_k == 2 ? 1.0 : 0.0,
          prev_k >= 4 ? 1.0 : 0.0,
          has_prev ? v(prev_loss) - v(ema_loss) : 0.0,
          has_prev ? v(prev_entropy) - v(ema_entropy) : 0.0,
          unit == 0 ? 1.0 : 0.0,
          cls[0],
          cls[1],
          cls[2],
          cls[3],
          cls[4],
          stage == Stage::After ? 1.0 : 0.0,
          v(recon_before),
          v(recon_drop),
          std::isnan(recon_before) ? 0.0 : 1.0,
          1.0};
}

FeatureTracker::FeatureTracker(int64_t n_units, FeatureNeeds needs, double step_budget)
    : n_units_(n_units), needs_(needs), step_budget_(step_budget) {}

UnitFeatures FeatureTracker::next(int64_t unit, const ttt::Model& model, const ttt::ModelState& state,
                                  bool probe) const {
  UnitFeatures f = last_;
  f.unit = unit;
  f.n_units = n_units_;
  f.budget_left = step_budget_ > 0 ? std::max(0.0, 1.0 - steps_spent_ / step_budget_) : 1.0;
  if (probe && unit > 0 && (needs_.probe_loss || needs_.probe_grad)) {
    double loss = 0, gn = 0;
    auto probes = model.probe(state, needs_.probe_grad);
    for (const ttt::Probe& p : probes) {
      loss += p.loss / double(probes.size());
      gn += p.grad_norm / double(probes.size());
    }
    f.ttt_loss = loss;
    if (needs_.probe_grad) f.grad_norm = gn;
  }
  return f;
}

namespace {
double mean_over_layers(const std::vector<ttt::Probe>& probes, double ttt::Probe::*field) {
  double s = 0;
  for (const ttt::Probe& p : probes) s += p.*field / double(probes.size());
  return s;
}
}  // namespace

UnitFeatures FeatureTracker::after_step(int64_t unit, const ttt::Model& model, const ttt::ModelState& before,
                                        const ttt::ModelState& after) const {
  UnitFeatures f = last_;
  f.stage = Stage::After;
  f.unit = unit;
  f.first_token = read_first_;
  f.n_units = n_units_;
  f.budget_left = step_budget_ > 0 ? std::max(0.0, 1.0 - steps_spent_ / step_budget_) : 1.0;
  if (needs_.probe_loss) f.ttt_loss = mean_over_layers(model.probe(after, false), &ttt::Probe::loss);
  if (needs_.recon || needs_.recon_drop || needs_.probe_grad) {
    const std::vector<ttt::Probe> start = model.probe_chunk(before, after, needs_.probe_grad);
    if (needs_.probe_grad) f.grad_norm = mean_over_layers(start, &ttt::Probe::grad_norm);
    f.recon_before = mean_over_layers(start, &ttt::Probe::loss);
    if (needs_.recon_drop) {
      f.recon_after = mean_over_layers(model.probe_chunk(after, after, false), &ttt::Probe::loss);
      f.recon_drop = f.recon_before - f.recon_after;
    }
  }
  return f;
}

void FeatureTracker::observe(int k, const Tensor& logits, const Tensor& targets) {
  observe_logits(logits, targets);
  record_k(k);
}

void FeatureTracker::observe_logits(const Tensor& logits, const Tensor& targets) {
  NoGradGuard ng;
  const std::vector<int64_t> ids = targets.to_ints();
  read_first_ = last_.first_token;
  last_.first_token = ids.empty() ? -1 : int(ids.back());  // the next unit's first input token
  const int64_t V = logits.shape().back();
  Tensor flat = reshape(logits, {-1, V});
  if (needs_.loss) {
    double loss = mean(cross_entropy_per_token(flat, raw::reshape(targets, {-1}))).item();
    last_.prev_loss = loss;
    last_.ema_loss = ema(last_.ema_loss, loss);
  }
  if (needs_.entropy) {
    double h = mean_entropy(flat);
    last_.prev_entropy = h;
    last_.ema_entropy = ema(last_.ema_entropy, h);
    Tensor p = softmax(flat, -1);
    last_.hidden_mean = mean(flat).item();
    last_.hidden_std = std::sqrt(var(flat).item());
    last_.hidden_sparsity = mean(raw::binary(BinaryOp::Lt, p, scalar_like(p, 1.0 / double(V)))).item();
  }
}

void FeatureTracker::record_k(int k) {
  last_.prev_k = k;
  steps_spent_ += k;
  ++done_;
  last_.mean_k = steps_spent_ / double(done_);
}

}  // namespace ponder::policy
