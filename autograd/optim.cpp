// Optimisers. Updates are raw kernels under NoGradGuard written back with raw::copy_, which bumps
// each parameter's version so a graph that saved the old value refuses to backward (C6). Every
// kernel used is element-wise or a fixed-order reduction, so results do not depend on thread count.
#include "autograd/optim.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "autograd/compose.h"
#include "autograd/fused.h"
#include "autograd/nn.h"

namespace ponder {
namespace {

Tensor scale(const Tensor& x, double a, double b = 0) { return raw::unary(UnaryOp::Affine, x, a, b); }
Tensor plus(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Add, a, b); }

void buffers_to(std::vector<Tensor>& buffers, Device device) {
  for (Tensor& b : buffers) b = raw::to_device(b, device);
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params) : params_(std::move(params)) {
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.defined()) throw std::invalid_argument("optimizer: parameter " + std::to_string(i) + " is undefined");
    if (!is_leaf(p) || !is_float(p.dtype()))
      throw std::invalid_argument("optimizer: parameter " + std::to_string(i) + " (" + shape_str(p.shape()) + ", " +
                                  dtype_name(p.dtype()) + ") must be a floating leaf tensor");
  }
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) ponder::zero_grad(p);
}

void Optimizer::to(Device device) {
  for (const Tensor& p : params_) move_to_device_(p, device);
}

// ---- SGD

SGD::SGD(std::vector<Tensor> params, double lr, double momentum) : Optimizer(std::move(params)), momentum_(momentum) {
  lr_ = lr;
  // Zero buffers make the first step v = μ·0 + g = g, PyTorch's rule, with no special case.
  if (momentum_ != 0)
    for (const Tensor& p : params_) velocity_.push_back(raw::zeros_like(p));
}

void SGD::to(Device device) {
  Optimizer::to(device);
  buffers_to(velocity_, device);
}

void SGD::step() {
  NoGradGuard ng;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor g = grad_of(p);
    if (!g.defined()) continue;
    if (momentum_ != 0) {
      raw::copy_(velocity_[i], plus(scale(velocity_[i], momentum_), g));
      g = velocity_[i];
    }
    raw::copy_(p, plus(p, scale(g, -lr_)));
  }
}

// ---- AdamW

AdamW::AdamW(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(std::move(params)), beta1_(beta1), beta2_(beta2), eps_(eps), wd_(weight_decay) {
  lr_ = lr;
  for (const Tensor& p : params_) {
    m_.push_back(raw::zeros_like(p));
    v_.push_back(raw::zeros_like(p));
  }
}

void AdamW::to(Device device) {
  Optimizer::to(device);
  buffers_to(m_, device);
  buffers_to(v_, device);
}

void AdamW::step() {
  NoGradGuard ng;
  ++t_;
  const double bc1 = 1 - std::pow(beta1_, double(t_)), bc2 = 1 - std::pow(beta2_, double(t_));
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = grad_of(p);
    if (!g.defined()) continue;
    // m, v, then sqrt(v̂) + eps and lr·m̂ / that; the decay factor multiplies p before the Adam step
    // (PyTorch order). One fused kernel where the device has it (autograd/fused.h).
    adamw_step_(p, m_[i], v_[i], g, AdamWCoeffs{lr_, beta1_, beta2_, eps_, wd_, bc1, bc2});
  }
}

// ---- gradient clipping

namespace {

// Σ‖grad‖² over the parameters that have a gradient, in float64 (one read from the device per call).
double grad_sum_squares(const std::vector<Tensor>& params) {
  NoGradGuard ng;
  // Squared norms summed in float64 in parameter order: exact enough and order-fixed. Where the device has the fused
  // reduction each parameter's sum is a host number at once; elsewhere (CUDA) the per-parameter scalars are added on
  // the device and read once, since every read waits for the device: one wait per step, not one per parameter.
  double host = 0;
  Tensor on_device;
  for (const Tensor& p : params) {
    Tensor g = grad_of(p);
    if (!g.defined()) continue;
    if (fused::use(FusedOp::SumSquares, g)) {
      host += sum_squares(g);
      continue;
    }
    Tensor s = compose::sum_squares_scalar(g);
    const FlopIsolate uncounted;  // the fused path's host additions are not counted either
    on_device = on_device.defined() ? plus(on_device, s) : s;
  }
  return on_device.defined() ? host + on_device.item() : host;
}

}  // namespace

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm >= 0))
    throw std::invalid_argument("clip_grad_norm: max_norm must be >= 0, got " + std::to_string(max_norm));
  NoGradGuard ng;
  const double norm = std::sqrt(grad_sum_squares(params));
  if (norm > max_norm) {
    const double coef = max_norm / (norm + 1e-6);
    for (const Tensor& p : params) {
      Tensor g = grad_of(p);
      if (g.defined()) set_grad(p, scale(g, coef));
    }
  }
  return norm;
}

}  // namespace ponder
