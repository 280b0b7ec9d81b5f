// Normalisation over the last axis as fused ops: each front end records one node (autograd/fused.h) whose values
// come from its backend's kernel, or from its composition (autograd/compose.cpp) where the backend has none.
// The nodes' backward rules call the next op of the chain (layer_norm_rows → layer_norm_backward →
// layer_norm_vjp; ln_l2_grad → ln_l2_grad_vjp), which is one kernel at first order and the recorded, and so
// differentiable, composition under create_graph.
#include <stdexcept>

#include "autograd/compose.h"
#include "autograd/fused.h"
#include "autograd/ops.h"

namespace ponder {
namespace {

void check_rows(const char* op, const Tensor& x) {
  if (x.dim() < 1) throw std::invalid_argument(std::string(op) + ": input needs at least 1 axis, got a scalar");
}
// 1/sqrt(mean x² + eps) over the last axis, differentiable (rms_norm_backward's own gradient needs it).
Tensor rms_scale(const Tensor& x, double eps) { return rsqrt(affine(mean(mul(x, x), {-1}, true), 1, eps)); }

}  // namespace

Tensor layer_norm_rows(const Tensor& x, double eps) {
  check_rows("layer_norm_rows", x);
  if (!fused::node(FusedOp::LayerNormRows, x)) return compose::layer_norm_rows(x, eps);
  OpRecorder r(Op::LayerNorm, {x});
  Tensor y = fused::forward(FusedOp::LayerNormRows, x, [&] { return raw::layer_norm_rows(x, eps); },
                            [&] { return compose::layer_norm_rows(x, eps); });
  fused::count(FusedOp::LayerNormRows, fused::rows_of(x));
  return r.done(y, {x}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{layer_norm_backward(s[0], g, eps)};
  });
}

Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps) {
  check_rows("layer_norm_backward", x);
  if (!fused::node(FusedOp::LayerNormBackward, x)) return compose::layer_norm_backward(x, v, eps);
  OpRecorder r(Op::LayerNormBackward, {x, v});
  Tensor z = fused::forward(FusedOp::LayerNormBackward, x, [&] { return raw::layer_norm_backward(x, v, eps); },
                            [&] { return compose::layer_norm_backward(x, v, eps); });
  fused::count(FusedOp::LayerNormBackward, fused::rows_of(x));
  return r.done(z, {x, v}, [eps](const Tensor& dz, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    auto [dx, dv] = layer_norm_vjp(s[0], s[1], dz, eps);
    return std::vector<Tensor>{n[0] ? dx : Tensor(), n[1] ? sum_to(dv, s[1].shape()) : Tensor()};
  });
}

Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  check_rows("layer_norm_affine", x);
  if (!fused::node(FusedOp::LayerNormAffine, x)) return compose::layer_norm_affine(x, gamma, beta, eps);
  OpRecorder r(Op::LayerNormAffine, {x, gamma, beta});
  Tensor y = fused::forward(FusedOp::LayerNormAffine, x, [&] { return raw::layer_norm_affine(x, gamma, beta, eps); },
                            [&] { return compose::layer_norm_affine(x, gamma, beta, eps); });
  fused::count(FusedOp::LayerNormAffine, fused::rows_of(x), fused::broadcast_param(gamma, x));
  return r.done(y, {x, gamma}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    auto [dx, dg, db] = layer_norm_affine_backward(s[0], s[1], g, eps);
    return std::vector<Tensor>{n[0] ? dx : Tensor(), n[1] ? dg : Tensor(), n[2] ? db : Tensor()};
  });
}

Tensor ln_l2_grad(const Tensor& z, const Tensor& target, const Tensor& gamma, const Tensor& beta, double eps) {
  check_rows("ln_l2_grad", z);
  if (!fused::node(FusedOp::LnL2Grad, z)) return compose::ln_l2_grad(z, target, gamma, beta, eps);
  OpRecorder r(Op::LnL2Grad, {z, target, gamma, beta});
  Tensor y = fused::forward(FusedOp::LnL2Grad, z, [&] { return raw::ln_l2_grad(z, target, gamma, beta, eps); },
                            [&] { return compose::ln_l2_grad(z, target, gamma, beta, eps); });
  fused::count(FusedOp::LnL2Grad, fused::rows_of(z), fused::broadcast_param(gamma, z));
  return r.done(y, {z, target, gamma, beta},
                [eps](const Tensor& w, const std::vector<Tensor>& s, const std::vector<bool>& n) {
                  auto [dz, dt, dg, db] = ln_l2_grad_vjp(s[0], s[1], s[2], s[3], w, eps);
                  return std::vector<Tensor>{n[0] ? dz : Tensor(), n[1] ? sum_to(dt, s[1].shape()) : Tensor(),
                                             n[2] ? dg : Tensor(), n[3] ? db : Tensor()};
                });
}

Tensor rms_norm_rows(const Tensor& x, double eps) {
  check_rows("rms_norm_rows", x);
  if (!fused::node(FusedOp::RmsNormRows, x)) return compose::rms_norm_rows(x, eps);
  OpRecorder r(Op::RmsNorm, {x});
  Tensor y = fused::forward(FusedOp::RmsNormRows, x, [&] { return raw::rms_norm_rows(x, eps); },
                            [&] { return compose::rms_norm_rows(x, eps); });
  fused::count(FusedOp::RmsNormRows, fused::rows_of(x));
  return r.done(y, {x}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{rms_norm_backward(s[0], g, eps)};
  });
}

Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps) {
  check_rows("rms_norm_affine", x);
  if (!fused::node(FusedOp::RmsNormAffine, x)) return compose::rms_norm_affine(x, weight, eps);
  OpRecorder r(Op::RmsNormAffine, {x, weight});
  Tensor y = fused::forward(FusedOp::RmsNormAffine, x, [&] { return raw::rms_norm_affine(x, weight, eps); },
                            [&] { return compose::rms_norm_affine(x, weight, eps); });
  fused::count(FusedOp::RmsNormAffine, fused::rows_of(x), fused::broadcast_param(weight, x));
  return r.done(y, {x, weight}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    auto [dx, dw] = rms_norm_affine_backward(s[0], s[1], g, eps);
    return std::vector<Tensor>{n[0] ? dx : Tensor(), n[1] ? dw : Tensor()};
  });
}

Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps) {
  check_rows("rms_norm_backward", x);
  if (!fused::node(FusedOp::RmsNormBackward, x)) return compose::rms_norm_backward(x, g, eps);
  OpRecorder r(Op::RmsNormBackward, {x, g});
  Tensor w = fused::forward(FusedOp::RmsNormBackward, x, [&] { return raw::rms_norm_backward(x, g, eps); },
                            [&] { return compose::rms_norm_backward(x, g, eps); });
  fused::count(FusedOp::RmsNormBackward, fused::rows_of(x));
  return r.done(w, {x, g}, [eps](const Tensor& dz, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    // w = r·(g − y·m), m = mean(g⊙y), y = x·r. Self-adjoint in g: dg = rms_norm_backward(x, dz). Through y
    // (r held): dy = −r·(m·dz + mean(dz⊙y)·g); through r itself: dr = Σ dz⊙w / r, ∂r/∂x = −r²·y/D. So
    // dx = rms_norm_backward(x, dy) − r·mean(dz⊙w)·y. Only gradients of gradients come here, so it is
    // written with differentiable ops and has no fused kernel.
    const Tensor &x = s[0], &g = s[1];
    Tensor dx, dg;
    if (n[0]) {
      Tensor y = rms_norm_rows(x, eps), rs = rms_scale(x, eps);
      Tensor m = mean(mul(g, y), {-1}, true);
      Tensor w = rms_norm_backward(x, g, eps);
      Tensor dy = neg(mul(rs, add(mul(m, dz), mul(mean(mul(dz, y), {-1}, true), g))));
      dx = sub(rms_norm_backward(x, dy, eps), mul(mul(rs, mean(mul(dz, w), {-1}, true)), y));
    }
    if (n[1]) dg = sum_to(rms_norm_backward(x, dz, eps), g.shape());
    return std::vector<Tensor>{dx, dg};
  });
}

}  // namespace ponder
