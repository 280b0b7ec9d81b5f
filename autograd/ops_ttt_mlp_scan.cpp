// TTT-MLP's dual form over every mini-batch of a sequence as one differentiable op, the inner weights carried from
// each mini-batch to the next. Its definition is n ttt_mlp_dual ops and one concatenation (compose_mlp_scan below).
// As one node it writes every unit's results into buffers with one part per unit (raw::ttt_mlp_scan_into: the
// backend's scan kernel where it has one, else the one-unit kernel unit by unit), each unit reading the weights the
// one before wrote there, and its backward walks the units in reverse, writing their input gradients into one
// buffer each (raw::ttt_mlp_scan_backward_into). That leaves the kernels, where the
// op-by-op scan also split its inputs, concatenated its outputs and the inputs' gradients and added dγ, dβ through
// the engine, with a node per unit. Under create_graph, and where the kernels do not run, the composition is
// recorded or re-run, so gradients of any order flow and the FLOPs are the same either way.
#include <stdexcept>
#include <string>

#include "autograd/checkpoint.h"
#include "autograd/fused.h"
#include "autograd/ops.h"
#include "autograd/scan_geo.h"

namespace ponder {
namespace mlp_scan_impl {  // named: a unity build puts other ops' helpers beside these
using namespace scan_impl;
namespace {

constexpr const char* kOp = "ttt_mlp_scan";
using Mark = std::function<void(int64_t, int)>;

std::array<Tensor, 10> ten(const std::vector<Tensor>& v) {
  std::array<Tensor, 10> a;
  std::copy(v.begin(), v.begin() + 10, a.begin());
  return a;
}

// The definition: one ttt_mlp_dual op per unit, recorded, and the outputs concatenated.
std::array<Tensor, 5> compose_mlp_scan(const std::vector<Tensor>& x, double eps, const Mark& mark) {
  const Geo g = geometry(x[4], x[7], kOp);
  const std::vector<int64_t> sizes(size_t(g.n), g.b);
  const std::vector<Tensor> qs = split(x[4], sizes, g.r), ks = split(x[5], sizes, g.r), vs = split(x[6], sizes, g.r),
                            es = split(x[7], std::vector<int64_t>(size_t(g.n), 1), g.r);
  std::vector<Tensor> outs;
  std::array<Tensor, 4> w{x[0], x[1], x[2], x[3]};
  for (int64_t u = 0; u < g.n; ++u) {
    if (mark) mark(u, -1);
    const size_t i = size_t(u);
    auto y = ttt_mlp_dual({w[0], w[1], w[2], w[3], qs[i], ks[i], vs[i], squeeze(es[i], g.r), x[8], x[9]}, eps,
                          [&](int p) {
                            if (mark) mark(u, p);
                          });
    outs.push_back(y[0]);
    w = {y[1], y[2], y[3], y[4]};
  }
  return {outs.size() == 1 ? outs[0] : cat(outs, g.r), w[0], w[1], w[2], w[3]};
}

// The per-unit kernel counts: mlp_dual_counts of unit 0's ten operand shapes.
fused::PhasedCounts unit_counts(const std::vector<Tensor>& x, const Geo& g) {
  std::vector<Shape> s;
  for (size_t i = 0; i < 4; ++i) s.push_back(x[i].shape());
  for (size_t i = 4; i < 7; ++i) s.push_back(lead_with(g, {g.b, g.f}));
  s.push_back(lead_with(g, {g.b, g.b}));
  s.push_back(x[8].shape());
  s.push_back(x[9].shape());
  return fused::mlp_dual_counts(s);
}

// The node's buffers: Y {out, W1, b1, W2, b2} with one part per unit, the units first, and S their intermediates.
std::array<Tensor, 5> unit_buffers(const std::vector<Tensor>& x, const Geo& g) {
  const int64_t h = x[0].shape().back();
  const auto buf = [&](int64_t m, int64_t c) { return Tensor::empty(lead_with(g, {m, c}, true), x[4].dtype(), x[4].device()); };
  return {buf(g.b, g.f), buf(g.f, h), buf(1, h), buf(h, g.f), buf(1, g.f)};
}

// s = the ten operands, Y's five buffers, S; dy = the five outputs' gradients. The units in reverse: each unit's
// weight gradients are the upstream of the one before; dxq, dxk, dxv, deta land in their unit's part of one buffer
// each; dγ, dβ are the units' added up, counted as the n − 1 additions they are.
std::vector<Tensor> mlp_backward_units(const std::vector<Tensor>& s, const std::vector<Tensor>& dy, double eps) {
  const Geo g = geometry(s[4], s[7], kOp);
  const auto like = [&](const Shape& sh) { return Tensor::empty(sh, s[4].dtype(), s[4].device()); };
  const std::array<Tensor, 10> gr{like(s[0].shape()),
                                  like(s[1].shape()),
                                  like(s[2].shape()),
                                  like(s[3].shape()),
                                  like(lead_with(g, {g.b, g.f}, true)),
                                  like(lead_with(g, {g.b, g.f}, true)),
                                  like(lead_with(g, {g.b, g.f}, true)),
                                  like(lead_with(g, {g.b, g.b}, true)),
                                  like(s[8].shape()),
                                  like(s[9].shape())};
  raw::ttt_mlp_scan_backward_into(gr, ten(s), {s[10], s[11], s[12], s[13], s[14]}, s[15],
                                  {dy[0], dy[1], dy[2], dy[3], dy[4]}, eps);
  const fused::PhasedCounts c = unit_counts(s, g);
  for (int64_t u = 0; u < g.n; ++u) fused::add_counts(c.backward);
  flops::add(FlopCat::Elementwise, uint64_t((g.n - 1) * (s[8].numel() + s[9].numel())));
  return {gr[0],
          gr[1],
          gr[2],
          gr[3],
          units_inside(gr[4], g, true),
          units_inside(gr[5], g, true),
          units_inside(gr[6], g, true),
          units_inside(gr[7], g, false),
          gr[8],
          gr[9]};
}

std::vector<Tensor> mlp_scan_backward(const std::vector<Tensor>& s, const std::vector<Tensor>& dy,
                                  const std::vector<bool>& need, double eps) {
  const std::vector<Tensor> x(s.begin(), s.begin() + 10);
  std::vector<Tensor> g;
  if (!GradMode::enabled() && fused::use(FusedOp::TttMlpDualBackward, x[4])) {
    g = mlp_backward_units(s, dy, eps);
  } else {
    const RegionFn fn = [eps](const std::vector<Tensor>& v) {
      const auto y = compose_mlp_scan(v, eps, {});
      return std::vector<Tensor>(y.begin(), y.end());
    };
    return recompute_vjp(fn, x, dy, std::vector<bool>(need.begin(), need.begin() + 10),
                         {x[4].shape(), x[0].shape(), x[1].shape(), x[2].shape(), x[3].shape()}, kOp, false);
  }
  for (size_t i = 0; i < g.size(); ++i)
    if (!need[i]) g[i] = Tensor();
  return g;
}

}  // namespace
}  // namespace mlp_scan_impl

std::array<Tensor, 5> ttt_mlp_scan(const std::array<Tensor, 10>& in_x, double eps,
                                   const std::function<void(int64_t, int)>& mark) {
  using namespace mlp_scan_impl;
  const Geo g = geometry(in_x[4], in_x[7], kOp);
  std::vector<Tensor> x(in_x.begin(), in_x.end());
  for (size_t i = 0; i < 4; ++i) {  // the weights after xq's leading axes (shared ones broadcast)
    if (x[i].dim() < 2)
      throw std::invalid_argument(std::string(kOp) + ": weight " + std::to_string(i) + " " +
                                  shape_str(x[i].shape()) + " needs two axes (W1, b1, W2, b2: (…, r, c))");
    const Shape s = lead_with(g, {x[i].shape()[x[i].dim() - 2], x[i].shape().back()});
    if (x[i].shape() != s) x[i] = expand(x[i], s);
  }
  if (!fused::node(FusedOp::TttMlpDual, x[4]) || !fused::use(FusedOp::TttMlpDual, x[4]))
    return compose_mlp_scan(x, eps, mark);
  OpRecorder rec(Op::TttMlpScan, x);
  const std::array<Tensor, 5> Y = unit_buffers(x, g);
  const Tensor S = Tensor::empty({g.n, heads(g), kMlpDualSaved(g.b, g.f, x[0].shape().back())}, x[4].dtype(),
                                 x[4].device());
  raw::ttt_mlp_scan_into(Y, S, ten(x), eps);
  const fused::PhasedCounts c = unit_counts(x, g);
  for (int64_t u = 0; u < g.n; ++u) {
    if (mark) mark(u, -1);
    for (int p = 0; p < 4; ++p) {
      fused::add_counts(c.forward[size_t(p)]);
      if (mark) mark(u, p);
    }
  }
  std::vector<Tensor> saved = x;
  saved.insert(saved.end(), Y.begin(), Y.end());
  saved.push_back(S);
  const std::vector<Tensor> out =
      rec.done({units_inside(Y[0], g, true), part(Y[1], g.n - 1), part(Y[2], g.n - 1), part(Y[3], g.n - 1),
                part(Y[4], g.n - 1)},
               saved, [eps](const std::vector<Tensor>& dy, const std::vector<Tensor>& s, const std::vector<bool>& need) {
                 return mlp_scan_impl::mlp_scan_backward(s, dy, need, eps);
               });
  return {out[0], out[1], out[2], out[3], out[4]};
}

}  // namespace ponder
