// Reductions and scans as differentiable ops, plus the composites built on them (mean, var, softmax, …).
#include <stdexcept>

#include "autograd/ops.h"

namespace ponder {
namespace {
Shape keep_shape(const Shape& s, const Axes& axes, const char* op) {
  return reduced_shape(s, normalize_axes(axes, s.size(), op), true);
}
}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdim) {
  OpRecorder r(Op::Sum, {x});
  Tensor y = raw::reduce(ReduceOp::Sum, x, axes, keepdim);
  Shape xs = x.shape(), ks = keep_shape(x.shape(), axes, "sum");
  return r.done(y, {}, [xs, ks](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{expand(reshape(g, ks), xs)};
  });
}

Tensor max(const Tensor& x, const Axes& axes, bool keepdim) {
  OpRecorder r(Op::Max, {x});
  Tensor yk = raw::reduce(ReduceOp::Max, x, axes, true);
  Shape ks = yk.shape();
  Tensor y = keepdim ? yk : raw::reshape(yk, reduced_shape(x.shape(), normalize_axes(axes, x.dim(), "max"), false));
  return r.done(y, {x, yk}, [ks, axes](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    // Gradient goes to the arg-max positions (shared equally on ties); the mask is a constant.
    Tensor mask = raw::binary(BinaryOp::Eq, s[0], s[1]);
    Tensor count = raw::reduce(ReduceOp::Sum, mask, axes, true);
    Tensor w = raw::binary(BinaryOp::Div, mask, count);
    return std::vector<Tensor>{mul(expand(reshape(g, ks), s[0].shape()), w)};
  });
}

Tensor min(const Tensor& x, const Axes& axes, bool keepdim) { return neg(max(neg(x), axes, keepdim)); }

Tensor mean(const Tensor& x, const Axes& axes, bool keepdim) {
  int64_t n = 1;
  for (int a : normalize_axes(axes, x.dim(), "mean")) n *= x.shape()[size_t(a)];
  if (n == 0) throw std::invalid_argument("mean: reducing over an empty axis of " + shape_str(x.shape()));
  return affine(sum(x, axes, keepdim), 1.0 / double(n), 0);
}

Tensor var(const Tensor& x, const Axes& axes, int64_t correction, bool keepdim) {
  int64_t n = 1;
  for (int a : normalize_axes(axes, x.dim(), "var")) n *= x.shape()[size_t(a)];
  if (n - correction <= 0)
    throw std::invalid_argument("var: " + std::to_string(n) + " elements with correction " + std::to_string(correction));
  Tensor d = sub(x, mean(x, axes, true));
  return affine(sum(mul(d, d), axes, keepdim), 1.0 / double(n - correction), 0);
}

Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdim) {
  // The shift m is a constant (its gradient contributions cancel exactly).
  Tensor m = raw::reduce(ReduceOp::Max, x, axes, true);
  Tensor out = add(log(sum(exp(sub(x, m)), axes, true)), m);
  return keepdim ? out : reshape(out, reduced_shape(x.shape(), normalize_axes(axes, x.dim(), "logsumexp"), false));
}

Tensor log_softmax(const Tensor& x, int64_t axis) { return sub(x, logsumexp(x, {axis}, true)); }
Tensor softmax(const Tensor& x, int64_t axis) { return exp(log_softmax(x, axis)); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  OpRecorder r(Op::SumTo, {x});
  Tensor y = raw::sum_to(x, shape);
  Shape xs = x.shape();
  return r.done(y, {}, [xs](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{expand(g, xs)};
  });
}

Tensor cumsum(const Tensor& x, int64_t axis, bool reverse) {
  OpRecorder r(Op::Cumsum, {x});
  int ax = normalize_axis(axis, x.dim(), "cumsum");
  Tensor y = raw::cumsum(x, ax, reverse);
  return r.done(y, {}, [ax, reverse](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{cumsum(g, ax, !reverse)};
  });
}

}  // namespace ponder
