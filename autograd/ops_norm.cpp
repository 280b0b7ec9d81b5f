// Normalisation over the last axis as fused ops: one kernel forward and, in a first-order backward, one
// kernel for the gradient (tensor/kernels.h). Their backward rules call the next op of the chain
// (layer_norm_rows → layer_norm_backward → layer_norm_vjp), so under create_graph every rule is itself
// recorded and differentiable; the VJP of the backward ops is written with differentiable ops there.
#include <stdexcept>

#include "autograd/ops.h"

namespace ponder {
namespace {

// 1/sqrt(var x + eps) and 1/sqrt(mean x² + eps) over the last axis, as differentiable compositions (used
// only when a backward rule is recorded, i.e. for gradients of gradients of gradients).
Tensor ln_scale(const Tensor& x, double eps) {
  Tensor xc = sub(x, mean(x, {-1}, true));
  return rsqrt(affine(mean(mul(xc, xc), {-1}, true), 1, eps));
}
Tensor rms_scale(const Tensor& x, double eps) { return rsqrt(affine(mean(mul(x, x), {-1}, true), 1, eps)); }

void check_rows(const char* op, const Tensor& x) {
  if (x.dim() < 1) throw std::invalid_argument(std::string(op) + ": input needs at least 1 axis, got a scalar");
}

}  // namespace

Tensor layer_norm_rows(const Tensor& x, double eps) {
  check_rows("layer_norm_rows", x);
  OpRecorder r(Op::LayerNorm, {x});
  Tensor y = raw::layer_norm_rows(x, eps);
  return r.done(y, {x}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{layer_norm_backward(s[0], g, eps)};
  });
}

namespace {
// The VJP of (x, v) ↦ layer_norm_backward(x, v) for upstream dz, written with differentiable ops.
// z = s·(v − m1 − x̂·m2), m1 = mean v, m2 = mean(v⊙x̂). z is linear in v with a self-adjoint map, so
// dv = layer_norm_backward(x, dz). Through x̂ (s held): dx̂ = −s·(m2·dz + mean(dz⊙x̂)·v); through s itself:
// ds = Σ dz⊙z / s, and ∂s/∂x = −s²·x̂/D. Together dx = layer_norm_backward(x, dx̂) − s·mean(dz⊙z)·x̂.
// dv has x's shape.
std::pair<Tensor, Tensor> layer_norm_vjp_ops(const Tensor& x, const Tensor& v, const Tensor& dz, double eps) {
  Tensor xh = layer_norm_rows(x, eps), sc = ln_scale(x, eps);
  Tensor m2 = mean(mul(v, xh), {-1}, true);
  Tensor z = layer_norm_backward(x, v, eps);
  Tensor dxh = neg(mul(sc, add(mul(m2, dz), mul(mean(mul(dz, xh), {-1}, true), v))));
  Tensor dx = sub(layer_norm_backward(x, dxh, eps), mul(mul(sc, mean(mul(dz, z), {-1}, true)), xh));
  return {dx, layer_norm_backward(x, dz, eps)};
}
}  // namespace

Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps) {
  check_rows("layer_norm_backward", x);
  OpRecorder r(Op::LayerNormBackward, {x, v});
  Tensor z = raw::layer_norm_backward(x, v, eps);
  return r.done(z, {x, v}, [eps](const Tensor& dz, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    const Tensor &x = s[0], &v = s[1];
    // First order: one fused kernel; recorded: differentiable ops.
    auto [dx, dv] = GradMode::enabled() ? layer_norm_vjp_ops(x, v, dz, eps) : raw::layer_norm_vjp(x, v, dz, eps);
    return std::vector<Tensor>{n[0] ? dx : Tensor(), n[1] ? sum_to(dv, v.shape()) : Tensor()};
  });
}

Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  check_rows("layer_norm_affine", x);
  OpRecorder r(Op::LayerNormAffine, {x, gamma, beta});
  Tensor y = raw::layer_norm_affine(x, gamma, beta, eps);
  return r.done(y, {x, gamma}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    const Tensor &x = s[0], &gamma = s[1];
    Tensor dx, dg, db;
    if (!GradMode::enabled()) {  // first order: one fused kernel
      auto [gx, gg, gb] = raw::layer_norm_affine_backward(x, gamma, g, eps);
      dx = gx;
      dg = gg;
      db = gb;
    } else {
      dx = layer_norm_backward(x, mul(g, gamma), eps);
      dg = sum_to(mul(g, layer_norm_rows(x, eps)), gamma.shape());
      db = sum_to(g, gamma.shape());
    }
    return std::vector<Tensor>{n[0] ? dx : Tensor(), n[1] ? dg : Tensor(), n[2] ? db : Tensor()};
  });
}

Tensor ln_l2_grad(const Tensor& z, const Tensor& target, const Tensor& gamma, const Tensor& beta, double eps) {
  check_rows("ln_l2_grad", z);
  OpRecorder r(Op::LnL2Grad, {z, target, gamma, beta});
  Tensor y = raw::ln_l2_grad(z, target, gamma, beta, eps);
  return r.done(y, {z, target, gamma, beta},
                [eps](const Tensor& w, const std::vector<Tensor>& s, const std::vector<bool>& n) {
                  const Tensor &z = s[0], &t = s[1], &gamma = s[2], &beta = s[3];
                  Tensor dz, dt, dg, db;
                  if (!GradMode::enabled()) {  // first order: one fused kernel
                    auto [a, b, c, d] = raw::ln_l2_grad_vjp(z, t, gamma, beta, w, eps);
                    dz = a;
                    dt = b;
                    dg = c;
                    db = d;
                  } else {
                    // gy = r⊙γ, r = γ⊙x̂ + β − t, out = layer_norm_backward(z, gy): dgy (and part of dz) from
                    // its VJP; x̂ then gets dgy⊙γ², γ gets dgy⊙(r + γ⊙x̂), β gets dgy⊙γ, t gets −dgy⊙γ.
                    Tensor xh = layer_norm_rows(z, eps);
                    Tensor rr = sub(add(mul(xh, gamma), beta), t);
                    auto [dz_a, dgy] = layer_norm_vjp_ops(z, mul(rr, gamma), w, eps);
                    Tensor dgyg = mul(dgy, gamma);
                    dz = add(dz_a, layer_norm_backward(z, mul(dgyg, gamma), eps));
                    dt = neg(dgyg);
                    dg = sum_to(mul(dgy, add(rr, mul(gamma, xh))), gamma.shape());
                    db = sum_to(dgyg, beta.shape());
                  }
                  return std::vector<Tensor>{n[0] ? dz : Tensor(), n[1] ? sum_to(dt, t.shape()) : Tensor(),
                                             n[2] ? dg : Tensor(), n[3] ? db : Tensor()};
                });
}

Tensor rms_norm_rows(const Tensor& x, double eps) {
  check_rows("rms_norm_rows", x);
  OpRecorder r(Op::RmsNorm, {x});
  Tensor y = raw::rms_norm_rows(x, eps);
  return r.done(y, {x}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{rms_norm_backward(s[0], g, eps)};
  });
}

Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps) {
  check_rows("rms_norm_affine", x);
  OpRecorder r(Op::RmsNormAffine, {x, weight});
  Tensor y = raw::rms_norm_affine(x, weight, eps);
  return r.done(y, {x, weight}, [eps](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    const Tensor &x = s[0], &w = s[1];
    Tensor dx, dw;
    if (!GradMode::enabled()) {  // first order: one fused kernel
      auto [gx, gw] = raw::rms_norm_affine_backward(x, w, g, eps);
      dx = gx;
      dw = gw;
    } else {
      dx = rms_norm_backward(x, mul(g, w), eps);
      dw = sum_to(mul(g, rms_norm_rows(x, eps)), w.shape());
    }
    return std::vector<Tensor>{n[0] ? dx : Tensor(), n[1] ? dw : Tensor()};
  });
}

Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps) {
  check_rows("rms_norm_backward", x);
  OpRecorder r(Op::RmsNormBackward, {x, g});
  Tensor w = raw::rms_norm_backward(x, g, eps);
  return r.done(w, {x, g}, [eps](const Tensor& dz, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    // w = r·(g − y·m), m = mean(g⊙y), y = x·r. Self-adjoint in g: dg = rms_norm_backward(x, dz). Through y
    // (r held): dy = −r·(m·dz + mean(dz⊙y)·g); through r itself: dr = Σ dz⊙w / r, ∂r/∂x = −r²·y/D. So
    // dx = rms_norm_backward(x, dy) − r·mean(dz⊙w)·y. Only gradients of gradients come here, so it is
    // written with differentiable ops and no fused kernel.
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
