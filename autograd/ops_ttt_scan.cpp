// TTT-Linear's dual form over every mini-batch of a sequence as one differentiable op, the inner state carried
// from each mini-batch to the next. Its definition is n ttt_linear_dual ops and one concatenation (compose_scan
// below). As one node it writes each mini-batch's packed results and saved intermediates into one buffer, reads the
// next mini-batch's W and bias where the previous one wrote them, and its backward walks the mini-batches in
// reverse, writing their input gradients into one buffer each: one call each way of the backend's scan kernel where
// it has one (raw::ttt_linear_scan_into), else the dual kernels unit by unit. Per mini-batch that leaves the kernels,
// where the op-by-op scan also split its inputs, concatenated its outputs and the inputs' gradients, packed each
// upstream gradient and added dγ, dβ: about eleven small launches per mini-batch on a GPU. Under create_graph, and
// where the dual kernels do not run, the composition is recorded or re-run, so gradients of any order flow and the
// FLOPs are the same either way.
#include <stdexcept>
#include <string>

#include "autograd/checkpoint.h"
#include "autograd/fused.h"
#include "autograd/ops.h"
#include "autograd/scan_geo.h"

namespace ponder {
namespace scan_impl {  // named: a unity build puts other ops' helpers beside these
namespace {

using Mark = std::function<void(int64_t, int)>;

// The definition: one ttt_linear_dual op per unit, recorded, and the outputs concatenated.
std::array<Tensor, 3> compose_scan(const std::vector<Tensor>& x, double eps, const Mark& mark) {
  const Geo g = geometry(x[2], x[5], "ttt_linear_scan");
  const std::vector<int64_t> sizes(size_t(g.n), g.b);
  const std::vector<Tensor> qs = split(x[2], sizes, g.r), ks = split(x[3], sizes, g.r), vs = split(x[4], sizes, g.r),
                            es = split(x[5], std::vector<int64_t>(size_t(g.n), 1), g.r);
  std::vector<Tensor> outs;
  Tensor W = x[0], bias = x[1];
  for (int64_t u = 0; u < g.n; ++u) {
    if (mark) mark(u, -1);
    const size_t i = size_t(u);
    auto y = ttt_linear_dual(W, bias, qs[i], ks[i], vs[i], squeeze(es[i], g.r), x[6], x[7], eps, [&](int p) {
      if (mark) mark(u, p);
    });
    outs.push_back(y[0]);
    W = y[1];
    bias = y[2];
  }
  return {outs.size() == 1 ? outs[0] : cat(outs, g.r), W, bias};
}

// The node's values: the dual kernels over every unit into Y (n, …, b + f + 1, f) and S (n, G, kDualSaved) (one call
// of the backend's scan kernel, or the one-unit kernel per unit: raw::ttt_linear_scan_into), FLOPs counted per unit
// and phase as ttt_linear_dual counts them.
void forward_units(const std::vector<Tensor>& x, const Geo& g, double eps, const Tensor& Y, const Tensor& S,
                   const Mark& mark) {
  const bool bcast = x[6].shape() != lead_with(g, {g.b, g.f});
  raw::ttt_linear_scan_into(Y, S, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], eps);
  const fused::Sizes sizes = fused::dual_sizes(rows_of_unit(x[2], g, 0));
  for (int64_t u = 0; u < g.n; ++u) {
    if (mark) mark(u, -1);
    for (int p = 0; p < 4; ++p) {
      fused::count(FusedOp::TttLinearDual, sizes, bcast, p);
      if (mark) mark(u, p);
    }
  }
}

// s = the eight operands, Y, S; dy = {dout, dW_n, dbias_n}. The units in reverse (raw::ttt_linear_scan_backward_into):
// each one's dW, dbias are the upstream of the one before; dxq, dxk, dxv, deta land in their unit's part of one
// buffer each; dγ, dβ are the units' added up, counted as the n − 1 additions they are.
std::vector<Tensor> backward_units(const std::vector<Tensor>& s, const std::vector<Tensor>& dy, double eps) {
  const Geo g = geometry(s[2], s[5], "ttt_linear_scan");
  const DType dt = s[2].dtype();
  const Device dev = s[2].device();
  const bool bcast = s[6].shape() != lead_with(g, {g.b, g.f});
  const auto like = [&](const Shape& sh) { return Tensor::empty(sh, dt, dev); };
  const std::array<Tensor, 8> gr{like(s[0].shape()), like(s[1].shape()), like(lead_with(g, {g.b, g.f}, true)),
                                 like(lead_with(g, {g.b, g.f}, true)), like(lead_with(g, {g.b, g.f}, true)),
                                 like(lead_with(g, {g.b, g.b}, true)), like(s[6].shape()), like(s[7].shape())};
  raw::ttt_linear_scan_backward_into(gr, s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9],
                                     {dy[0], dy[1], dy[2]}, eps);
  const fused::Sizes sizes = fused::dual_sizes(rows_of_unit(s[2], g, 0));
  for (int64_t u = 0; u < g.n; ++u) fused::count(FusedOp::TttLinearDualBackward, sizes, bcast);
  flops::add(FlopCat::Elementwise, uint64_t((g.n - 1) * (s[6].numel() + s[7].numel())));
  return {gr[0], gr[1], units_inside(gr[2], g, true), units_inside(gr[3], g, true), units_inside(gr[4], g, true),
          units_inside(gr[5], g, false), gr[6], gr[7]};
}

std::vector<Tensor> scan_backward(const std::vector<Tensor>& s, const std::vector<Tensor>& dy,
                                  const std::vector<bool>& need, double eps) {
  const std::vector<Tensor> x(s.begin(), s.begin() + 8);
  std::vector<Tensor> g;
  if (!GradMode::enabled() && fused::use(FusedOp::TttLinearDualBackward, x[2])) {
    g = backward_units(s, dy, eps);
  } else {
    const RegionFn fn = [eps](const std::vector<Tensor>& v) {
      const auto y = compose_scan(v, eps, {});
      return std::vector<Tensor>(y.begin(), y.end());
    };
    return recompute_vjp(fn, x, dy, std::vector<bool>(need.begin(), need.begin() + 8),
                         {x[2].shape(), x[0].shape(), x[1].shape()}, "ttt_linear_scan", false);
  }
  for (size_t i = 0; i < g.size(); ++i)
    if (!need[i]) g[i] = Tensor();
  return g;
}

}  // namespace
}  // namespace scan_impl

std::array<Tensor, 3> ttt_linear_scan(const Tensor& W0, const Tensor& b0, const Tensor& xq, const Tensor& xk,
                                      const Tensor& xv, const Tensor& eta, const Tensor& gamma, const Tensor& beta,
                                      double eps, const std::function<void(int64_t, int)>& mark) {
  using namespace scan_impl;
  const Geo g = geometry(xq, eta, "ttt_linear_scan");
  auto lead = [&](const Tensor& t, int64_t rows) {  // W0, b0 after xq's leading axes (shared ones broadcast)
    const Shape s = lead_with(g, {rows, g.f});
    if (t.dim() < 2 || t.shape()[t.dim() - 2] != rows || t.shape().back() != g.f)
      throw std::invalid_argument("ttt_linear_scan: " + std::string(rows == 1 ? "bias " : "W ") +
                                  shape_str(t.shape()) + " must broadcast to " + shape_str(s));
    return t.shape() == s ? t : expand(t, s);
  };
  const std::vector<Tensor> x{lead(W0, g.f), lead(b0, 1), xq, xk, xv, eta, gamma, beta};
  if (!fused::node(FusedOp::TttLinearDual, xq) || !fused::use(FusedOp::TttLinearDual, xq))
    return compose_scan(x, eps, mark);
  OpRecorder rec(Op::TttLinearScan, x);
  const Tensor Y = Tensor::empty(lead_with(g, {g.b + g.f + 1, g.f}, true), xq.dtype(), xq.device());
  const Tensor S = Tensor::empty({g.n, heads(g), kDualSaved(g.b, g.f)}, xq.dtype(), xq.device());
  forward_units(x, g, eps, Y, S, mark);
  const Tensor last = part(Y, g.n - 1);
  std::vector<Tensor> saved = x;
  saved.push_back(Y);
  saved.push_back(S);
  const std::vector<Tensor> out = rec.done(
      {units_inside(raw::slice(Y, g.r + 1, 0, g.b), g, true), raw::slice(last, g.r, g.b, g.b + g.f),
       raw::slice(last, g.r, g.b + g.f, g.b + g.f + 1)},
      saved, [eps](const std::vector<Tensor>& dy, const std::vector<Tensor>& s, const std::vector<bool>& need) {
        return scan_impl::scan_backward(s, dy, need, eps);
      });
  return {out[0], out[1], out[2]};
}

}  // namespace ponder
