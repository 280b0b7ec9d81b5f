// Element-wise differentiable ops. Each: forward kernel, then a backward rule in the same ops.
#include <stdexcept>

#include "autograd/compose.h"
#include "autograd/fused.h"
#include "autograd/ops.h"

namespace ponder {
namespace {

// y = f(x) with backward dy/dx computed by `rule(g, x, y)`.
template <class Rule>
Tensor unary_op(Op op, UnaryOp kernel, const Tensor& x, double p0, double p1, Rule rule) {
  OpRecorder r(op, {x});
  Tensor y = raw::unary(kernel, x, p0, p1);
  return r.done(y, {x}, [rule](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{rule(g, s[0], s[1])};
  }, /*save_output=*/true);
}

Tensor nograd_unary(UnaryOp k, const Tensor& x, double p0 = 0, double p1 = 0) { return raw::unary(k, x, p0, p1); }

}  // namespace

Tensor scalar_like(const Tensor& a, double v) { return Tensor::full({}, v, a.dtype(), a.device()); }
Tensor zeros_like(const Tensor& a) { return Tensor::zeros(a.shape(), a.dtype(), a.device()); }
Tensor ones_like(const Tensor& a) { return Tensor::full(a.shape(), 1.0, a.dtype(), a.device()); }

Tensor neg(const Tensor& x) {
  return unary_op(Op::Neg, UnaryOp::Neg, x, 0, 0, [](const Tensor& g, const Tensor&, const Tensor&) { return neg(g); });
}
Tensor exp(const Tensor& x) {
  return unary_op(Op::Exp, UnaryOp::Exp, x, 0, 0, [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, y); });
}
Tensor log(const Tensor& x) {
  return unary_op(Op::Log, UnaryOp::Log, x, 0, 0, [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, x); });
}
Tensor sqrt(const Tensor& x) {
  return unary_op(Op::Sqrt, UnaryOp::Sqrt, x, 0, 0,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return div(affine(g, 0.5, 0), y); });
}
Tensor rsqrt(const Tensor& x) {  // d/dx x^-1/2 = -1/2 · y³
  return unary_op(Op::Rsqrt, UnaryOp::Rsqrt, x, 0, 0, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(affine(g, -0.5, 0), mul(y, mul(y, y)));
  });
}
Tensor pow(const Tensor& x, double p) {
  return unary_op(Op::Pow, UnaryOp::Pow, x, p, 0, [p](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(affine(g, p, 0), pow(x, p - 1));
  });
}
Tensor tanh(const Tensor& x) {
  return unary_op(Op::Tanh, UnaryOp::Tanh, x, 0, 0, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(g, affine(mul(y, y), -1, 1));
  });
}
Tensor sigmoid(const Tensor& x) {
  return unary_op(Op::Sigmoid, UnaryOp::Sigmoid, x, 0, 0, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return mul(g, mul(y, affine(y, -1, 1)));
  });
}
Tensor relu(const Tensor& x) {
  return unary_op(Op::Relu, UnaryOp::Relu, x, 0, 0,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, nograd_unary(UnaryOp::Step, x)); });
}
Tensor gelu_tanh(const Tensor& x) {
  return unary_op(Op::GeluTanh, UnaryOp::GeluTanh, x, 0, 0,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, gelu_tanh_grad(x)); });
}
Tensor silu(const Tensor& x) {
  return unary_op(Op::Silu, UnaryOp::Silu, x, 0, 0,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, silu_grad(x)); });
}
Tensor gelu_tanh_grad(const Tensor& x) {
  // gelu'' = (1 − t²)·(u' − x·t·u'² + ½·x·u''), t = tanh(u), u = c(x + a·x³), u' = c(1 + 3a·x²), u'' = 6ca·x
  // (docs/ttt.md §2.2), written with differentiable ops for higher orders.
  return unary_op(Op::GeluTanhGrad, UnaryOp::GeluTanhGrad, x, 0, 0, [](const Tensor& g, const Tensor& x, const Tensor&) {
    const double c = 0.7978845608028654, a = 0.044715;
    Tensor x2 = mul(x, x);
    Tensor t = tanh(mul(affine(x2, c * a, c), x));
    Tensor du = affine(x2, 3 * c * a, c);
    Tensor inner = add(sub(du, mul(mul(x, t), mul(du, du))), affine(x2, 3 * c * a, 0));  // ½·x·u'' = 3ca·x²
    return mul(g, mul(affine(mul(t, t), -1, 1), inner));
  });
}
Tensor silu_grad(const Tensor& x) {
  // silu'' = σ(1 − σ)·(2 + x·(1 − 2σ))
  return unary_op(Op::SiluGrad, UnaryOp::SiluGrad, x, 0, 0, [](const Tensor& g, const Tensor& x, const Tensor&) {
    Tensor s = sigmoid(x);
    Tensor ds = mul(s, affine(s, -1, 1));
    return mul(g, mul(ds, affine(mul(x, affine(s, -2, 1)), 1, 2)));
  });
}
Tensor abs(const Tensor& x) {
  return unary_op(Op::Abs, UnaryOp::Abs, x, 0, 0,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return mul(g, nograd_unary(UnaryOp::Sign, x)); });
}
Tensor clamp(const Tensor& x, double lo, double hi) {
  if (lo > hi) throw std::invalid_argument("clamp: lower bound " + std::to_string(lo) + " exceeds upper " + std::to_string(hi));
  return unary_op(Op::Clamp, UnaryOp::Clamp, x, lo, hi, [lo, hi](const Tensor& g, const Tensor& x, const Tensor&) {
    return mul(g, nograd_unary(UnaryOp::InRange, x, lo, hi));
  });
}
Tensor affine(const Tensor& x, double scale, double shift) {
  OpRecorder r(Op::Affine, {x});
  Tensor y = raw::unary(UnaryOp::Affine, x, scale, shift);
  return r.done(y, {}, [scale](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{affine(g, scale, 0)};
  });
}

namespace {
// One node (same shapes only) around the backend's kernel, or the composition where the backend has none.
Tensor act_mul_op(GateAct act, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || !fused::node(FusedOp::ActMul, a)) return compose::act_mul(act, a, b);
  OpRecorder r(Op::ActMul, {a, b});
  Tensor y = fused::forward(FusedOp::ActMul, a, [&] { return raw::act_mul(act, a, b); },
                            [&] { return compose::act_mul(act, a, b); });
  fused::count(FusedOp::ActMul, fused::rows_of(a), false, int(act));
  return r.done(y, {a, b}, [act](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    auto [da, db] = act_mul_backward(act, s[0], s[1], g);
    return std::vector<Tensor>{da, db};
  });
}
}  // namespace

Tensor rope_rotate(const Tensor& x, const Tensor& cs, const Tensor& sn) {
  // The angles are constants: with a differentiable cos or sin, the composition gives their gradients too.
  if (requires_grad(cs) || requires_grad(sn) || !fused::node(FusedOp::Rope, x)) return compose::rope_rotate(x, cs, sn);
  OpRecorder r(Op::Rope, {x});
  Tensor y = fused::forward(FusedOp::Rope, x, [&] { return raw::rope_rotate(x, cs, sn); },
                            [&] { return compose::rope_rotate(x, cs, sn); });
  fused::count(FusedOp::Rope, {x.numel() / x.shape().back(), x.shape().back() / 2});
  // The map is a rotation, so its VJP is the rotation the other way: the op itself with −sin (any order).
  return r.done(y, {}, [cs, sn](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{rope_rotate(g, cs, neg(sn))};
  });
}

Tensor silu_mul(const Tensor& a, const Tensor& b) { return act_mul_op(GateAct::Silu, a, b); }
Tensor gelu_tanh_mul(const Tensor& a, const Tensor& b) { return act_mul_op(GateAct::GeluTanh, a, b); }

// ---- binary

Tensor add(const Tensor& a, const Tensor& b) {
  OpRecorder r(Op::Add, {a, b});
  Tensor y = raw::binary(BinaryOp::Add, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return r.done(y, {}, [sa, sb](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>& n) {
    return std::vector<Tensor>{n[0] ? sum_to(g, sa) : Tensor(), n[1] ? sum_to(g, sb) : Tensor()};
  });
}
Tensor sub(const Tensor& a, const Tensor& b) {
  OpRecorder r(Op::Sub, {a, b});
  Tensor y = raw::binary(BinaryOp::Sub, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return r.done(y, {}, [sa, sb](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>& n) {
    return std::vector<Tensor>{n[0] ? sum_to(g, sa) : Tensor(), n[1] ? sum_to(neg(g), sb) : Tensor()};
  });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  OpRecorder r(Op::Mul, {a, b});
  Tensor y = raw::binary(BinaryOp::Mul, a, b);
  return r.done(y, {a, b}, [](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    return std::vector<Tensor>{n[0] ? sum_to(mul(g, s[1]), s[0].shape()) : Tensor(),
                               n[1] ? sum_to(mul(g, s[0]), s[1].shape()) : Tensor()};
  });
}
Tensor div(const Tensor& a, const Tensor& b) {
  OpRecorder r(Op::Div, {a, b});
  Tensor y = raw::binary(BinaryOp::Div, a, b);
  return r.done(y, {a, b}, [](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    Tensor gb = div(g, s[1]);
    return std::vector<Tensor>{n[0] ? sum_to(gb, s[0].shape()) : Tensor(),
                               n[1] ? sum_to(neg(mul(gb, div(s[0], s[1]))), s[1].shape()) : Tensor()};
  });
}

namespace {
// maximum/minimum: the winner takes the gradient; ties split it evenly.
Tensor extremum(Op op, BinaryOp k, BinaryOp wins, const Tensor& a, const Tensor& b) {
  OpRecorder r(op, {a, b});
  Tensor y = raw::binary(k, a, b);
  return r.done(y, {a, b}, [wins](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    Tensor tie = raw::binary(BinaryOp::Eq, s[0], s[1]);
    Tensor wa = raw::binary(BinaryOp::Add, raw::binary(wins, s[0], s[1]), raw::unary(UnaryOp::Affine, tie, 0.5, 0));
    Tensor wb = raw::unary(UnaryOp::Affine, wa, -1, 1);
    return std::vector<Tensor>{n[0] ? sum_to(mul(g, wa), s[0].shape()) : Tensor(),
                               n[1] ? sum_to(mul(g, wb), s[1].shape()) : Tensor()};
  });
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum(Op::Maximum, BinaryOp::Maximum, BinaryOp::Gt, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum(Op::Minimum, BinaryOp::Minimum, BinaryOp::Lt, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  OpRecorder r(Op::Where, {a, b});
  Tensor c = cond.alias();
  Tensor y = raw::where(c, a, b);
  Shape sa = a.shape(), sb = b.shape();
  return r.done(y, {c}, [sa, sb](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    Tensor z = scalar_like(g, 0);
    return std::vector<Tensor>{n[0] ? sum_to(where(s[0], g, z), sa) : Tensor(),
                               n[1] ? sum_to(where(s[0], z, g), sb) : Tensor()};
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) { return where(mask, scalar_like(x, value), x); }

Tensor eq(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Eq, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Gt, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Lt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return raw::binary(BinaryOp::Ge, a, b); }
Tensor sign(const Tensor& x) { return raw::unary(UnaryOp::Sign, x); }

// ---- in-place

namespace {
void check_inplace(const Tensor& t, const char* op) {
  if (GradMode::enabled() && requires_grad(t))
    throw std::runtime_error(std::string(op) + ": in-place update of a tensor that requires grad; run it under "
                             "NoGradGuard (optimiser steps) or use an out-of-place op");
}
}  // namespace

void copy_(const Tensor& dst, const Tensor& src) {
  check_inplace(dst, "copy_");
  raw::copy_(dst, src);
}
void fill_(const Tensor& dst, double value) {
  check_inplace(dst, "fill_");
  raw::fill_(dst, value);
}

// ---- operators

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s) { return affine(a, 1, s); }
Tensor operator-(const Tensor& a, double s) { return affine(a, 1, -s); }
Tensor operator*(const Tensor& a, double s) { return affine(a, s, 0); }
Tensor operator/(const Tensor& a, double s) { return affine(a, 1 / s, 0); }
Tensor operator+(double s, const Tensor& a) { return affine(a, 1, s); }
Tensor operator-(double s, const Tensor& a) { return affine(a, -1, s); }
Tensor operator*(double s, const Tensor& a) { return affine(a, s, 0); }

}  // namespace ponder
