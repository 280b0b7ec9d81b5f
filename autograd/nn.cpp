// Modules and normalisations, composed only of differentiable ops so that gradients recorded under
// create_graph (the TTT inner loop) can be differentiated again.
#include "autograd/nn.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ponder {
namespace {

// Throws unless `t` is the 1-D parameter (dim) that a normalisation over a last axis of size dim needs.
void check_norm_param(const char* op, const char* what, const Tensor& x, const Tensor& t) {
  if (x.dim() < 1) throw std::invalid_argument(std::string(op) + ": input needs at least 1 axis, got a scalar");
  if (!t.defined() || t.shape() != Shape{x.shape().back()})
    throw std::invalid_argument(std::string(op) + ": " + what + " must have shape " + shape_str({x.shape().back()}) +
                                " for input " + shape_str(x.shape()) + ", got " +
                                (t.defined() ? shape_str(t.shape()) : std::string("undefined")));
}

// A freshly initialised tensor becomes a trainable leaf.
Tensor parameter(Tensor t) { return set_requires_grad(t); }

}  // namespace

void move_to_device_(const Tensor& t, Device device) {
  if (!t.defined()) return;
  if (!is_leaf(t))
    throw std::invalid_argument("move_to_device_: only a leaf tensor can move in place, got the result of " +
                                grad_fn(t)->name() + " " + shape_str(t.shape()));
  if (t.device() == device) return;
  raw::to_device_(t, device);
  if (AutogradMeta* m = t.impl()->autograd.get()) {
    if (m->grad.defined()) m->grad = raw::to_device(m->grad, device);
    m->grad_acc.reset();  // it recorded the old device; the next backward makes a new one
  }
}

void Module::to(Device device) {
  for (const Tensor& p : parameters()) move_to_device_(p, device);
}

// ---- Linear

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator& gen, DType dtype) {
  if (in <= 0 || out <= 0)
    throw std::invalid_argument("Linear: sizes must be positive, got in=" + std::to_string(in) +
                                " out=" + std::to_string(out));
  const double bound = 1.0 / std::sqrt(double(in));
  weight = parameter(gen.uniform({in, out}, -bound, bound, dtype));
  if (with_bias) bias = parameter(Tensor::zeros({out}, dtype));
}

Tensor Linear::forward(const Tensor& x) const {
  const int64_t in = weight.shape()[0];
  if (x.dim() < 1 || x.shape().back() != in)
    throw std::invalid_argument("Linear: input " + shape_str(x.shape()) + " does not end in in_features " +
                                std::to_string(in));
  // matmul needs a row axis; a single vector gets one for the product and loses it after.
  Tensor y = x.dim() == 1 ? reshape(matmul(reshape(x, {1, in}), weight), {weight.shape()[1]}) : matmul(x, weight);
  return bias.defined() ? add(y, bias) : y;
}

std::vector<Tensor> Linear::parameters() const {
  if (bias.defined()) return {weight, bias};
  return {weight};
}

// ---- Embedding

Embedding::Embedding(int64_t vocab, int64_t dim, Generator& gen, DType dtype) {
  if (vocab <= 0 || dim <= 0)
    throw std::invalid_argument("Embedding: sizes must be positive, got vocab=" + std::to_string(vocab) +
                                " dim=" + std::to_string(dim));
  weight = parameter(gen.normal({vocab, dim}, 0.0, 0.02, dtype));
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

std::vector<Tensor> Embedding::parameters() const { return {weight}; }

// ---- normalisations

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  check_norm_param("layer_norm", "gamma", x, gamma);
  check_norm_param("layer_norm", "beta", x, beta);
  return layer_norm_affine(x, gamma, beta, eps);  // biased variance
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_norm_param("rms_norm", "weight", x, weight);
  return rms_norm_affine(x, weight, eps);
}

LayerNorm::LayerNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  if (dim <= 0) throw std::invalid_argument("LayerNorm: dim must be positive, got " + std::to_string(dim));
  gamma = parameter(Tensor::full({dim}, 1.0, dtype));
  beta = parameter(Tensor::zeros({dim}, dtype));
}

Tensor LayerNorm::forward(const Tensor& x) const { return layer_norm(x, gamma, beta, eps); }

std::vector<Tensor> LayerNorm::parameters() const { return {gamma, beta}; }

RMSNorm::RMSNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  if (dim <= 0) throw std::invalid_argument("RMSNorm: dim must be positive, got " + std::to_string(dim));
  weight = parameter(Tensor::full({dim}, 1.0, dtype));
}

Tensor RMSNorm::forward(const Tensor& x) const { return rms_norm(x, weight, eps); }

std::vector<Tensor> RMSNorm::parameters() const { return {weight}; }

// ---- LSTM

LSTMCell::LSTMCell(int64_t in, int64_t hidden_, Generator& gen, DType dtype) : hidden(hidden_) {
  if (in <= 0 || hidden <= 0)
    throw std::invalid_argument("LSTMCell: sizes must be positive, got in=" + std::to_string(in) +
                                " hidden=" + std::to_string(hidden));
  // PyTorch's LSTM init: every weight U(-1/√H, 1/√H).
  const double bound = 1.0 / std::sqrt(double(hidden));
  w_ih = parameter(gen.uniform({in, 4 * hidden}, -bound, bound, dtype));
  w_hh = parameter(gen.uniform({hidden, 4 * hidden}, -bound, bound, dtype));
  // A forget bias of 1 keeps the cell state flowing early in training (Jozefowicz et al., 2015).
  std::vector<double> b(size_t(4 * hidden), 0.0);
  for (int64_t j = hidden; j < 2 * hidden; ++j) b[size_t(j)] = 1.0;
  bias = parameter(Tensor::from_vector(b, {4 * hidden}, dtype));
}

std::pair<Tensor, Tensor> LSTMCell::step(const Tensor& x, const std::pair<Tensor, Tensor>& state) const {
  const auto& [h, c] = state;
  const int64_t in = w_ih.shape()[0];
  if (x.dim() != 2 || x.shape()[1] != in)
    throw std::invalid_argument("LSTMCell::step: x must be (B, " + std::to_string(in) + "), got " +
                                shape_str(x.shape()));
  const Shape hs{x.shape()[0], hidden};
  if (h.shape() != hs || c.shape() != hs)
    throw std::invalid_argument("LSTMCell::step: state must be " + shape_str(hs) + ", got h " + shape_str(h.shape()) +
                                " and c " + shape_str(c.shape()));
  Tensor gates = add(add(matmul(x, w_ih), matmul(h, w_hh)), bias);  // (B, 4H)
  std::vector<Tensor> g = split(gates, {hidden, hidden, hidden, hidden}, -1);  // i, f, g, o: each (B, H)
  Tensor c_next = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));  // (B, H)
  Tensor h_next = mul(sigmoid(g[3]), tanh(c_next));                             // (B, H)
  return {h_next, c_next};
}

Tensor LSTMCell::forward(const Tensor& x) const {
  if (x.dim() != 3 || x.shape()[1] < 1)
    throw std::invalid_argument("LSTMCell::forward: x must be (B, T, in) with T >= 1, got " + shape_str(x.shape()));
  const int64_t B = x.shape()[0], T = x.shape()[1], in = x.shape()[2];
  std::pair<Tensor, Tensor> state{Tensor::zeros({B, hidden}, w_ih.dtype(), w_ih.device()),
                                  Tensor::zeros({B, hidden}, w_ih.dtype(), w_ih.device())};
  std::vector<Tensor> hs;
  hs.reserve(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    state = step(reshape(slice(x, 1, t, t + 1), {B, in}), state);  // x_t: (B, in)
    hs.push_back(state.first);
  }
  return stack(hs, 1);  // (B, T, H)
}

std::vector<Tensor> LSTMCell::parameters() const { return {w_ih, w_hh, bias}; }

}  // namespace ponder
