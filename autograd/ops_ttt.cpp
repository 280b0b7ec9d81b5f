// TTT-Linear's dual form on one mini-batch as one differentiable op: a node (autograd/fused.h) around the
// backend's kernel, or around the composition of autograd/compose.cpp where the backend has none. The kernel writes
// the three results packed along the second-to-last axis ({out; W'; bias'}); the node's three outputs are views of
// them, and its backward takes their three gradients where they lie. The node also saves the kernel's intermediates (Z, G, zb, xq·xkᵀ
// per head), so the backward kernel recomputes none of them (undefined when the composition ran). Its backward
// is one kernel at first order and the recorded composition of the VJP under create_graph, so gradients of any
// order flow.
#include <stdexcept>
#include <string>

#include "autograd/checkpoint.h"
#include "autograd/compose.h"
#include "autograd/fused.h"
#include "autograd/ops.h"

namespace ponder {

std::array<Tensor, 3> ttt_linear_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk,
                                      const Tensor& xv, const Tensor& eta, const Tensor& gamma, const Tensor& beta,
                                      double eps, const std::function<void(int)>& mark) {
  if (xq.dim() < 2 || W.dim() < 2 || bias.dim() < 2)
    throw std::invalid_argument("ttt_linear_dual: xq " + shape_str(xq.shape()) + ", W " + shape_str(W.shape()) +
                                " and bias " + shape_str(bias.shape()) + " need two axes each");
  const int r = int(xq.dim()) - 2;
  const int64_t b = xq.shape()[size_t(r)], f = xq.shape()[size_t(r) + 1];
  auto lead = [&](const Tensor& t) {  // t's last two axes after xq's leading ones
    Shape s(xq.shape().begin(), xq.shape().begin() + r);
    s.push_back(t.shape()[t.dim() - 2]);
    s.push_back(t.shape().back());
    return t.shape() == s ? t : expand(t, s);
  };
  const Tensor We = lead(W), be = lead(bias);
  if (!fused::node(FusedOp::TttLinearDual, xq))
    return compose::ttt_linear_dual(We, be, xq, xk, xv, eta, gamma, beta, eps, mark);
  OpRecorder rec(Op::TttLinearDual, {We, be, xq, xk, xv, eta, gamma, beta});
  auto [y, saved] = fused::forward(
      FusedOp::TttLinearDual, xq, [&] { return raw::ttt_linear_dual(We, be, xq, xk, xv, eta, gamma, beta, eps); },
      [&] {
        const auto parts = compose::ttt_linear_dual(We, be, xq, xk, xv, eta, gamma, beta, eps);
        return std::make_pair(cat({parts[0], parts[1], parts[2]}, r), Tensor());
      });
  const bool bcast = gamma.shape() != xq.shape();
  for (int p = 0; p < 4; ++p) {
    fused::count(FusedOp::TttLinearDual, fused::dual_sizes(xq), bcast, p);
    if (mark) mark(p);
  }
  // Three outputs of one node, views of the packed buffer: their gradients reach the backward as they are, where a
  // split of one packed output would concatenate them (three copies per mini-batch) for the kernel to read.
  std::vector<Tensor> parts = rec.done(
      {raw::slice(y, r, 0, b), raw::slice(y, r, b, b + f), raw::slice(y, r, b + f, b + f + 1)},
      {We, be, xq, xk, xv, eta, gamma, beta, saved},
      [eps](const std::vector<Tensor>& dy, const std::vector<Tensor>& s, const std::vector<bool>& need) {
        auto g = ttt_linear_dual_backward(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], {dy[0], dy[1], dy[2]},
                                          eps);
        std::vector<Tensor> out(g.size());
        for (size_t i = 0; i < g.size(); ++i)
          if (need[i]) out[i] = g[i];
        return out;
      });
  return {parts[0], parts[1], parts[2]};
}

namespace {
// The backward of ttt_prefix_steps: the kernel at first order where the forward ran it (saved s[6]) and the device
// has one; under create_graph, or without the kernel, the composition re-run and differentiated (its forward not
// counted again), so gradients of any order flow and the FLOPs are the composition's backward either way.
std::vector<Tensor> prefix_steps_backward(const std::vector<Tensor>& s, const Tensor& da, const std::vector<bool>& need,
                                          int steps, double eps) {
  const std::vector<Tensor> x(s.begin(), s.begin() + 6);
  if (s[6].defined() && !GradMode::enabled() && fused::use(FusedOp::TttPrefixStepsBackward, x[0])) {
    const auto g = raw::ttt_prefix_steps_backward(x[0], x[1], x[2], x[3], x[4], x[5], steps, eps, s[6], da);
    fused::add_counts(fused::prefix_counts(x[0].shape(), x[4].shape(), steps).backward);
    std::vector<Tensor> out(6);
    for (size_t i = 0; i < 6; ++i)
      if (need[i]) out[i] = g[i];
    return out;
  }
  const RegionFn fn = [steps, eps](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{compose::ttt_prefix_steps(v[0], v[1], v[2], v[3], v[4], v[5], steps, eps)};
  };
  return recompute_vjp(fn, x, {da}, std::vector<bool>(need.begin(), need.begin() + 6), {da.shape()},
                       "ttt_prefix_steps", false);
}
}  // namespace

Tensor ttt_prefix_steps(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w, const Tensor& gamma,
                        const Tensor& beta, int steps, double eps, const std::function<void(int)>& mark) {
  if (!fused::node(FusedOp::TttPrefixSteps, z0))
    return compose::ttt_prefix_steps(z0, t, neg_m, w, gamma, beta, steps, eps, mark);
  OpRecorder rec(Op::TttPrefixSteps, {z0, t, neg_m, w, gamma, beta});
  auto [a, saved] = fused::forward(
      FusedOp::TttPrefixSteps, z0, [&] { return raw::ttt_prefix_steps(z0, t, neg_m, w, gamma, beta, steps, eps); },
      [&] { return std::make_pair(compose::ttt_prefix_steps(z0, t, neg_m, w, gamma, beta, steps, eps), Tensor()); });
  const fused::PrefixCounts c = fused::prefix_counts(z0.shape(), gamma.shape(), steps);
  for (int p = 0; p < 3; ++p) {
    fused::add_counts(c.forward[size_t(p)]);
    if (mark) mark(p);
  }
  return rec.done(a, {z0, t, neg_m, w, gamma, beta, saved},
                  [steps, eps](const Tensor& da, const std::vector<Tensor>& s, const std::vector<bool>& need) {
                    return prefix_steps_backward(s, da, need, steps, eps);
                  });
}

namespace {
std::vector<Shape> shapes_of(const std::array<Tensor, 10>& x) {
  std::vector<Shape> s;
  for (const Tensor& t : x) s.push_back(t.shape());
  return s;
}

// The backward of ttt_mlp_dual: as prefix_steps_backward, the kernel at first order where the forward ran it (saved
// s[10]), else the composition re-run and differentiated.
// dy: one gradient per output (the engine gives zeros to an output that got none).
std::vector<Tensor> mlp_dual_backward(const std::vector<Tensor>& s, const std::vector<Tensor>& dy,
                                      const std::vector<bool>& need, double eps) {
  std::array<Tensor, 10> x;
  std::copy(s.begin(), s.begin() + 10, x.begin());
  const size_t like[5] = {4, 0, 1, 2, 3};  // output i is shaped like input like[i]
  if (s[10].defined() && !GradMode::enabled() && fused::use(FusedOp::TttMlpDualBackward, x[4])) {
    const auto g = raw::ttt_mlp_dual_backward(x, eps, s[10], {dy[0], dy[1], dy[2], dy[3], dy[4]});
    fused::add_counts(fused::mlp_dual_counts(shapes_of(x)).backward);
    std::vector<Tensor> out(10);
    for (size_t i = 0; i < 10; ++i)
      if (need[i]) out[i] = g[i];
    return out;
  }
  const RegionFn fn = [eps](const std::vector<Tensor>& v) {
    std::array<Tensor, 10> a;
    std::copy(v.begin(), v.end(), a.begin());
    const auto y = compose::ttt_mlp_dual(a, eps, {});
    return std::vector<Tensor>(y.begin(), y.end());
  };
  std::vector<Shape> out_shapes;
  for (size_t i = 0; i < 5; ++i) out_shapes.push_back(x[like[i]].shape());
  return recompute_vjp(fn, std::vector<Tensor>(x.begin(), x.end()), dy, std::vector<bool>(need.begin(), need.begin() + 10),
                       out_shapes, "ttt_mlp_dual", false);
}
}  // namespace

std::array<Tensor, 5> ttt_mlp_dual(const std::array<Tensor, 10>& in_x, double eps,
                                   const std::function<void(int)>& mark) {
  std::array<Tensor, 10> x = in_x;
  const Tensor& xq = x[4];
  for (size_t i = 0; i < 5; ++i)
    if (x[i].dim() < 2)
      throw std::invalid_argument("ttt_mlp_dual: operand " + std::to_string(i) + " " + shape_str(x[i].shape()) +
                                  " needs two axes (W1, b1, W2, b2, xq: (…, r, c))");
  for (size_t i = 0; i < 4; ++i) {  // the weights after xq's leading axes (shared ones broadcast)
    Shape s(xq.shape().begin(), xq.shape().end() - 2);
    s.push_back(x[i].shape()[x[i].dim() - 2]);
    s.push_back(x[i].shape().back());
    if (x[i].shape() != s) x[i] = expand(x[i], s);
  }
  if (!fused::node(FusedOp::TttMlpDual, xq)) return compose::ttt_mlp_dual(x, eps, mark);
  OpRecorder rec(Op::TttMlpDual, std::vector<Tensor>(x.begin(), x.end()));
  auto [y, saved] = fused::forward(
      FusedOp::TttMlpDual, xq, [&] { return raw::ttt_mlp_dual(x, eps); },
      [&] { return std::make_pair(compose::ttt_mlp_dual(x, eps), Tensor()); });
  const fused::PhasedCounts c = fused::mlp_dual_counts(shapes_of(x));
  for (int p = 0; p < 4; ++p) {
    fused::add_counts(c.forward[size_t(p)]);
    if (mark) mark(p);
  }
  std::vector<Tensor> in(x.begin(), x.end());
  in.push_back(saved);
  const std::vector<Tensor> out = rec.done(
      std::vector<Tensor>(y.begin(), y.end()), in,
      [eps](const std::vector<Tensor>& dy, const std::vector<Tensor>& s, const std::vector<bool>& need) {
        return mlp_dual_backward(s, dy, need, eps);
      });
  return {out[0], out[1], out[2], out[3], out[4]};
}

}  // namespace ponder
