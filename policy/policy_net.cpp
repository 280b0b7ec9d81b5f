#include "policy/policy_net.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ponder::policy {
namespace {

// Policy nets are float32 unless asked otherwise (float64 for finite-difference checks): their outputs only rank a
// handful of options, and float32 keeps the overhead they add to a decision small.
Tensor row(const std::vector<double>& x, DType dtype) { return Tensor::from_vector(x, {1, int64_t(x.size())}, dtype); }

// Points a copied net's parameter fields at `p` (parameters() order), each of the shape it replaces.
void assign_parameters(const std::vector<Tensor*>& fields, const std::vector<Tensor>& p, const char* who) {
  if (p.size() != fields.size())
    throw std::invalid_argument(std::string(who) + "::with_parameters: expected " + std::to_string(fields.size()) +
                                " tensors, got " + std::to_string(p.size()));
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].shape() != fields[i]->shape())
      throw std::invalid_argument(std::string(who) + "::with_parameters: parameter " + std::to_string(i) + " has shape " +
                                  shape_str(p[i].shape()) + ", expected " + shape_str(fields[i]->shape()));
    *fields[i] = p[i];
  }
}

void check_features(const std::vector<double>& x, int64_t expected, const char* who) {
  if (int64_t(x.size()) != expected)
    throw std::invalid_argument(std::string(who) + ": expected " + std::to_string(expected) + " features, got " +
                                std::to_string(x.size()));
}

std::vector<double> softmax_of(const std::vector<double>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double s = 0;
  for (size_t i = 0; i < z.size(); ++i) s += p[i] = std::exp(z[i] - m);
  for (double& v : p) v /= s;
  return p;
}

}  // namespace

// ---- FeatureNorm

void FeatureNorm::fit(const std::vector<std::vector<double>>& xs) {
  if (xs.empty()) throw std::invalid_argument("FeatureNorm::fit: no feature vectors");
  const size_t F = xs.front().size();
  mean.assign(F, 0.0);
  inv_std.assign(F, 1.0);
  for (const auto& x : xs) {
    if (x.size() != F) throw std::invalid_argument("FeatureNorm::fit: feature vectors of different lengths");
    for (size_t i = 0; i < F; ++i) mean[i] += x[i] / double(xs.size());
  }
  for (size_t i = 0; i < F; ++i) {
    double v = 0;
    for (const auto& x : xs) v += (x[i] - mean[i]) * (x[i] - mean[i]) / double(xs.size());
    // A constant feature (e.g. the bias) keeps its value rather than being divided by ~0.
    if (v < 1e-12) mean[i] = 0;
    else inv_std[i] = 1.0 / std::sqrt(v);
  }
}

std::vector<double> FeatureNorm::apply(const std::vector<double>& x) const {
  if (mean.empty()) return x;
  check_features(x, int64_t(mean.size()), "FeatureNorm");
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean[i]) * inv_std[i];
  return y;
}

// ---- MLP

MlpNet::MlpNet(int64_t in, int64_t hidden, int64_t out, Generator& gen, DType dtype)
    : l1_(in, hidden, true, gen, dtype), l2_(hidden, hidden, true, gen, dtype), l3_(hidden, out, true, gen, dtype) {
  NoGradGuard ng;
  copy_(l3_.weight, mul(l3_.weight, scalar_like(l3_.weight, 0.01)));
}

Tensor MlpNet::forward(const Tensor& x) const {
  return l3_.forward(tanh(l2_.forward(tanh(l1_.forward(x)))));  // (B, T, F) → (B, T, out)
}

std::vector<double> MlpNet::step(const std::vector<double>& x) {
  check_features(x, inputs(), "MlpNet");
  NoGradGuard ng;
  return forward(row(x, l1_.weight.dtype())).to_vector();
}

std::vector<Tensor> MlpNet::parameters() const {
  std::vector<Tensor> p;
  for (const Linear* l : {&l1_, &l2_, &l3_})
    for (const Tensor& t : l->parameters()) p.push_back(t);
  return p;
}

std::unique_ptr<PolicyNet> MlpNet::with_parameters(const std::vector<Tensor>& p) const {
  auto copy = std::make_unique<MlpNet>(*this);
  assign_parameters({&copy->l1_.weight, &copy->l1_.bias, &copy->l2_.weight, &copy->l2_.bias, &copy->l3_.weight,
                     &copy->l3_.bias}, p, "MlpNet");
  return copy;
}

// ---- LSTM

LstmNet::LstmNet(int64_t in, int64_t hidden, int64_t out, Generator& gen, DType dtype)
    : cell_(in, hidden, gen, dtype), head_(hidden, out, true, gen, dtype) {
  NoGradGuard ng;
  copy_(head_.weight, mul(head_.weight, scalar_like(head_.weight, 0.01)));
}

Tensor LstmNet::forward(const Tensor& x) const { return head_.forward(cell_.forward(x)); }  // (B, T, out)

void LstmNet::reset() {
  h_ = Tensor::zeros({1, cell_.hidden}, cell_.w_ih.dtype());
  c_ = Tensor::zeros({1, cell_.hidden}, cell_.w_ih.dtype());
}

std::vector<double> LstmNet::step(const std::vector<double>& x) {
  check_features(x, inputs(), "LstmNet");
  if (!h_.defined()) reset();
  NoGradGuard ng;
  std::tie(h_, c_) = cell_.step(row(x, cell_.w_ih.dtype()), {h_, c_});
  return head_.forward(h_).to_vector();
}

std::vector<Tensor> LstmNet::parameters() const {
  std::vector<Tensor> p = cell_.parameters();
  for (const Tensor& t : head_.parameters()) p.push_back(t);
  return p;
}

std::unique_ptr<PolicyNet> make_policy_net(const std::string& kind, int64_t in, int64_t hidden, int64_t out,
                                           uint64_t seed, DType dtype) {
  Generator gen(seed);
  if (kind == "mlp") return std::make_unique<MlpNet>(in, hidden, out, gen, dtype);
  if (kind == "lstm") return std::make_unique<LstmNet>(in, hidden, out, gen, dtype);
  throw std::invalid_argument("policy net: expected mlp or lstm, got '" + kind + "'");
}

std::unique_ptr<PolicyNet> LstmNet::with_parameters(const std::vector<Tensor>& p) const {
  auto copy = std::make_unique<LstmNet>(*this);
  copy->h_ = copy->c_ = Tensor();
  assign_parameters({&copy->cell_.w_ih, &copy->cell_.w_hh, &copy->cell_.bias, &copy->head_.weight, &copy->head_.bias},
                    p, "LstmNet");
  return copy;
}

int64_t feature_count() { return int64_t(UnitFeatures::vector_names().size()); }

// ---- LearnedPolicy

LearnedPolicy::LearnedPolicy(std::string name, std::shared_ptr<PolicyNet> net, std::vector<int> options,
                             FeatureNorm norm, FeatureNeeds needs)
    : name_(std::move(name)), net_(std::move(net)), options_(std::move(options)), norm_(std::move(norm)),
      needs_(needs) {
  if (options_.empty() || int64_t(options_.size()) != net_->outputs())
    throw std::invalid_argument("LearnedPolicy: the net has " + std::to_string(net_->outputs()) + " outputs for " +
                                std::to_string(options_.size()) + " step options");
}

std::unique_ptr<Policy> LearnedPolicy::clone() const {
  auto copy = std::make_unique<LearnedPolicy>(*this);
  copy->net_ = net_->with_parameters(net_->parameters());
  return copy;
}

void LearnedPolicy::begin_sequence(uint64_t seed) {
  gen_ = Generator(seed);
  net_->reset();
}

int LearnedPolicy::act(const std::vector<double>& x) {
  const std::vector<double> p = softmax_of(net_->step(norm_.apply(x)));
  if (mode_ == ActMode::Greedy) {
    last_action_ = int(std::max_element(p.begin(), p.end()) - p.begin());
  } else {
    const double u = gen_.uniform01();
    double c = 0;
    last_action_ = int(p.size()) - 1;  // when rounding leaves Σp a hair below u
    for (size_t i = 0; i < p.size(); ++i)
      if (u < (c += p[i])) {
        last_action_ = int(i);
        break;
      }
  }
  return options_[size_t(last_action_)];
}

int LearnedPolicy::action_index(int k) const {
  auto it = std::find(options_.begin(), options_.end(), k);
  if (it == options_.end()) throw std::invalid_argument("LearnedPolicy: step count " + std::to_string(k) + " is not an option");
  return int(it - options_.begin());
}

// ---- HaltingPolicy

HaltingPolicy::HaltingPolicy(std::string name, std::shared_ptr<PolicyNet> net, FeatureNorm norm, FeatureNeeds needs)
    : name_(std::move(name)), net_(std::move(net)), norm_(std::move(norm)), needs_(needs) {}

std::unique_ptr<Policy> HaltingPolicy::clone() const {
  auto copy = std::make_unique<HaltingPolicy>(*this);
  copy->net_ = net_->with_parameters(net_->parameters());
  return copy;
}

void HaltingPolicy::begin_sequence(uint64_t seed) {
  gen_ = Generator(seed);
  net_->reset();
}

int HaltingPolicy::act(const std::vector<double>& x) {
  const std::vector<double> z = net_->step(norm_.apply(x));
  const size_t N = z.size();
  std::vector<double> lam(N, 1.0);  // conditional halting probabilities, λ_N = 1
  for (size_t n = 0; n + 1 < N; ++n) lam[n] = 1.0 / (1.0 + std::exp(-z[n]));
  if (mode_ == ActMode::Greedy) {  // the mode of p_n = λ_n·Π_{j<n}(1 − λ_j)
    double survive = 1, best = -1;
    size_t arg = N - 1;
    for (size_t n = 0; n < N; ++n) {
      if (lam[n] * survive > best) best = lam[n] * survive, arg = n;
      survive *= 1 - lam[n];
    }
    return int(arg + 1);
  }
  for (size_t n = 0; n + 1 < N; ++n)
    if (gen_.uniform01() < lam[n]) return int(n + 1);
  return int(N);
}

Tensor halting_log_probs(const Tensor& logits) {
  if (logits.dim() != 2 || logits.shape()[1] < 1)
    throw std::invalid_argument("halting_log_probs: logits must be (U, N), got " + shape_str(logits.shape()));
  const int64_t U = logits.shape()[0], N = logits.shape()[1];
  // Beyond ±30 σ saturates in float32; clamping there keeps log finite.
  Tensor z = clamp(logits, -30, 30);
  Tensor log_halt = log(sigmoid(z));         // (U, N): log λ_n
  Tensor log_go = log(sigmoid(neg(z)));      // (U, N): log(1 − λ_n)
  // λ_N = 1: the last step's log λ is 0, and its log(1 − λ) is never used.
  Tensor zero = Tensor::zeros({U, 1}, logits.dtype(), logits.device());
  log_halt = N > 1 ? cat({slice(log_halt, 1, 0, N - 1), zero}, 1) : zero;
  Tensor survive = shift(cumsum(log_go, 1), 1, 1);  // Σ_{j<n} log(1 − λ_j), 0 for n = 1
  return add(log_halt, survive);                     // (U, N)
}

}  // namespace ponder::policy
