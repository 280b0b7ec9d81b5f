// TTT-Linear's dual form over every unit (mini-batch) of a sequence, the inner state carried from each unit to the
// next (tensor/kernels.h, ttt_linear_scan_into): one call of the backend's scan kernel where it has one
// (Backend::dual_scan), else the one-unit kernel unit by unit. The loop below is the definition the scan kernels
// are tested against bit for bit (tests/test_ops.cpp); a scan kernel saves what a call per unit costs: a launch or a
// parallel region per unit and, on the CPU, reloading a head's state and buffers into cache each time.
#include <atomic>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "tensor/kernels.h"

namespace ponder::raw {
namespace scan_units {  // named: a unity build puts other kernels' helpers beside these
namespace {

// PONDER_DUAL_SCAN: 1 (the default) or 0; anything else is −1, an error at the first scan rather than a silent
// choice.
int scan_from_env() {
  const char* v = std::getenv("PONDER_DUAL_SCAN");
  if (!v) return 1;
  const std::string s = v;
  return s == "1" ? 1 : s == "0" ? 0 : -1;
}
std::atomic<int> g_scan{scan_from_env()};

void scan_need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

// The scan's sizes: xq (…, N, f) with r = its rows' axis, eta (…, n, b, b), N = n·b; G heads of the leading shape.
struct Geo {
  int r;
  int64_t n, b, f, G;
  Shape lead;
};

Geo geometry(const Tensor& xq, const Tensor& eta, const char* op) {
  scan_need(xq.dim() >= 2 && eta.dim() == xq.dim() + 1, std::string(op) + ": xq " + shape_str(xq.shape()) +
                                                       " must be (…, N, f) and eta " + shape_str(eta.shape()) +
                                                       " (…, n, b, b)");
  Geo g{int(xq.dim()) - 2, eta.shape()[xq.dim() - 2], eta.shape().back(), xq.shape().back(), 1, {}};
  g.lead.assign(xq.shape().begin(), xq.shape().end() - 2);
  for (int64_t a : g.lead) g.G *= a;
  scan_need(g.n >= 1 && g.b >= 1 && xq.shape()[size_t(g.r)] == g.n * g.b,
       std::string(op) + ": eta " + shape_str(eta.shape()) + " must give n ≥ 1 units of b ≥ 1 rows that make the " +
           std::to_string(xq.shape()[size_t(g.r)]) + " rows of xq " + shape_str(xq.shape()));
  return g;
}

// A contiguous buffer shaped (n, …, m, c) (units_first) or (n, G, c): checked against the geometry.
void scan_buffer(const char* op, const char* what, const Tensor& t, const Tensor& xq, const Shape& want) {
  check_same(op, xq, t);
  scan_need(t.shape() == want && t.is_contiguous(),
       std::string(op) + ": " + what + " " + shape_str(t.shape()) + " must be a contiguous " + shape_str(want));
}
Shape units_first(const Geo& g, int64_t m, int64_t c) {
  Shape s{g.n};
  s.insert(s.end(), g.lead.begin(), g.lead.end());
  s.push_back(m);
  s.push_back(c);
  return s;
}

// Unit u's rows of a (…, N, f) operand, its η, and its part of a units-first buffer.
Tensor unit_rows(const Tensor& x, const Geo& g, int64_t u) { return slice(x, g.r, u * g.b, (u + 1) * g.b); }
Tensor unit_eta(const Tensor& eta, const Geo& g, int64_t u) { return squeeze(slice(eta, g.r, u, u + 1), g.r); }
Tensor unit_part(const Tensor& buf, int64_t u) { return squeeze(slice(buf, 0, u, u + 1), 0); }

// Unit u's W and bias: the start for u = 0, else where unit u − 1 wrote them in Y.
std::pair<Tensor, Tensor> state_before(const Tensor& Y, const Tensor& W0, const Tensor& b0, const Geo& g, int64_t u) {
  if (u == 0) return {W0, b0};
  const Tensor y = unit_part(Y, u - 1);
  return {slice(y, g.r, g.b, g.b + g.f), slice(y, g.r, g.b + g.f, g.b + g.f + 1)};
}

// The scan's operands for the backend's kernel, or nothing where a head view of unit 0 had to be a copy (its units
// then do not lie a fixed step apart) or the backend has no scan kernel. Unit u's views are unit 0's moved by u
// units: a slice changes only the offset, and dual_head_view reads shapes and strides alone.
std::optional<ScanOperands> scan_operands(const Tensor& W0, const Tensor& b0, const Tensor& xq, const Tensor& xk,
                                          const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                                          const Tensor& beta, double eps, const Geo& g) {
  if (g_scan < 0)
    throw std::invalid_argument("PONDER_DUAL_SCAN=" + std::string(std::getenv("PONDER_DUAL_SCAN")) +
                                " must be 1 (the backend's scan kernel) or 0 (the one-unit kernel unit by unit)");
  if (g_scan == 0 || !backend(xq.device()).dual_scan() || g.G == 0) return std::nullopt;
  ScanOperands s;
  s.first = dual_operands(W0, b0, unit_rows(xq, g, 0), unit_rows(xk, g, 0), unit_rows(xv, g, 0),
                          unit_eta(eta, g, 0), gamma, beta, eps);
  const Tensor* src[4] = {&xq, &xk, &xv, &eta};
  const Tensor* view[4] = {&s.first.xq, &s.first.xk, &s.first.xv, &s.first.eta};
  for (int i = 0; i < 4; ++i)
    if (&src[i]->storage() != &view[i]->storage()) return std::nullopt;
  s.units = g.n;
  s.step_q = g.b * xq.strides()[size_t(g.r)];
  s.step_k = g.b * xk.strides()[size_t(g.r)];
  s.step_v = g.b * xv.strides()[size_t(g.r)];
  s.step_eta = eta.strides()[size_t(g.r)];
  return s;
}

}  // namespace
}  // namespace scan_units

void set_dual_scan(bool on) { scan_units::g_scan = on ? 1 : 0; }
bool dual_scan_enabled() { return scan_units::g_scan == 1; }

void ttt_linear_scan_into(const Tensor& Y, const Tensor& S, const Tensor& W0, const Tensor& b0, const Tensor& xq,
                          const Tensor& xk, const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                          const Tensor& beta, double eps) {
  using namespace scan_units;
  const Geo g = geometry(xq, eta, "ttt_linear_scan");
  scan_buffer("ttt_linear_scan", "Y", Y, xq, units_first(g, g.b + g.f + 1, g.f));
  scan_buffer("ttt_linear_scan", "S", S, xq, {g.n, g.G, kDualSaved(g.b, g.f)});
  if (const auto s = scan_operands(W0, b0, xq, xk, xv, eta, gamma, beta, eps, g)) {
    backend(xq.device()).ttt_linear_scan(reshape(Y, {g.n, g.G, g.b + g.f + 1, g.f}), S, *s);
    return;
  }
  for (int64_t u = 0; u < g.n; ++u) {
    const auto [W, bias] = state_before(Y, W0, b0, g, u);
    ttt_linear_dual_into(unit_part(Y, u), unit_part(S, u), W, bias, unit_rows(xq, g, u), unit_rows(xk, g, u),
                         unit_rows(xv, g, u), unit_eta(eta, g, u), gamma, beta, eps);
  }
}

namespace scan_units {
namespace {

// The backward unit by unit: each unit's dW, dbias into one of two buffers (the next unit back reads them as its
// upstream), unit 0's into g; dγ, dβ the last unit's, then each earlier unit's added to them.
void scan_backward_units(const std::array<Tensor, 8>& g, const Tensor& W0, const Tensor& b0, const Tensor& xq,
                         const Tensor& xk, const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                         const Tensor& beta, const Tensor& Y, const Tensor& S, const std::array<Tensor, 3>& dy,
                         double eps, const Geo& geo) {
  const auto like = [&](const Tensor& t) { return Tensor::empty(t.shape(), xq.dtype(), xq.device()); };
  const Tensor bw[2] = {like(g[0]), like(g[0])}, bb[2] = {like(g[1]), like(g[1])}, tg = like(g[6]), tb = like(g[7]);
  Tensor dW = dy[1], db = dy[2];
  for (int64_t u = geo.n - 1; u >= 0; --u) {
    const bool last = u == geo.n - 1;
    const Tensor oW = u == 0 ? g[0] : bw[u % 2], ob = u == 0 ? g[1] : bb[u % 2];
    const auto [W, bias] = state_before(Y, W0, b0, geo, u);
    ttt_linear_dual_backward_into({oW, ob, unit_part(g[2], u), unit_part(g[3], u), unit_part(g[4], u),
                                   unit_part(g[5], u), last ? g[6] : tg, last ? g[7] : tb},
                                  W, bias, unit_rows(xq, geo, u), unit_rows(xk, geo, u), unit_rows(xv, geo, u),
                                  unit_eta(eta, geo, u), gamma, beta, unit_part(S, u),
                                  {unit_rows(dy[0], geo, u), dW, db}, eps);
    if (!last) {
      backend(xq.device()).binary(BinaryOp::Add, g[6], g[6], tg);
      backend(xq.device()).binary(BinaryOp::Add, g[7], g[7], tb);
    }
    dW = oW;
    db = ob;
  }
}

}  // namespace
}  // namespace scan_units

void ttt_linear_scan_backward_into(const std::array<Tensor, 8>& g, const Tensor& W0, const Tensor& b0,
                                   const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                   const Tensor& gamma, const Tensor& beta, const Tensor& Y, const Tensor& S,
                                   const std::array<Tensor, 3>& dy, double eps) {
  using namespace scan_units;
  const char* op = "ttt_linear_scan_backward";
  const Geo geo = geometry(xq, eta, op);
  scan_buffer(op, "Y", Y, xq, units_first(geo, geo.b + geo.f + 1, geo.f));
  scan_buffer(op, "S", S, xq, {geo.n, geo.G, kDualSaved(geo.b, geo.f)});
  scan_buffer(op, "dW0", g[0], xq, W0.shape());
  scan_buffer(op, "db0", g[1], xq, b0.shape());
  for (size_t i = 2; i < 5; ++i)
    scan_buffer(op, "a gradient of xq, xk or xv", g[i], xq, units_first(geo, geo.b, geo.f));
  scan_buffer(op, "deta", g[5], xq, units_first(geo, geo.b, geo.b));
  scan_buffer(op, "dγ", g[6], xq, gamma.shape());
  scan_buffer(op, "dβ", g[7], xq, beta.shape());
  scan_need(dy[0].shape() == xq.shape(), std::string(op) + ": dout " + shape_str(dy[0].shape()) + " must be xq's " +
                                        shape_str(xq.shape()));
  const auto s = scan_operands(W0, b0, xq, xk, xv, eta, gamma, beta, eps, geo);
  const Tensor dout0 = s ? dual_head_view(unit_rows(dy[0], geo, 0), true) : Tensor();
  if (!s || &dout0.storage() != &dy[0].storage())
    return scan_backward_units(g, W0, b0, xq, xk, xv, eta, gamma, beta, Y, S, dy, eps, geo);
  const int64_t n = geo.n, G = geo.G, b = geo.b, f = geo.f;
  for (int i = 1; i < 3; ++i) check_same(op, xq, dy[size_t(i)]);
  scan_need(dy[1].shape() == W0.shape() && dy[2].shape() == b0.shape(),
       std::string(op) + ": dW_n " + shape_str(dy[1].shape()) + " and dbias_n " + shape_str(dy[2].shape()) +
           " must be " + shape_str(W0.shape()) + " and " + shape_str(b0.shape()));
  backend(xq.device()).ttt_linear_scan_backward(
      {reshape(g[0], {G, f, f}), reshape(g[1], {G, 1, f}), reshape(g[2], {n, G, b, f}), reshape(g[3], {n, G, b, f}),
       reshape(g[4], {n, G, b, f}), reshape(g[5], {n, G, b, b}), reshape(g[6], s->first.gamma.shape()),
       reshape(g[7], s->first.beta.shape())},
      *s, reshape(Y, {n, G, b + f + 1, f}), S,
      {dout0, dual_head_view(dy[1], false), dual_head_view(dy[2], false)}, b * dy[0].strides()[size_t(geo.r)]);
}

}  // namespace ponder::raw
