// The TTT dual forms over every unit (mini-batch) of a sequence, the inner state carried from each unit to the
// next (tensor/kernels.h: ttt_linear_scan_into, ttt_mlp_scan_into): one call of the backend's scan kernel where it
// has one (Backend::dual_scan, Backend::mlp_scan), else the one-unit kernel unit by unit. Those loops are the
// definition the scan kernels are tested against bit for bit (tests/test_ops.cpp, tests/test_cuda.cpp); a scan
// kernel saves what a call per unit costs: a launch or a parallel region per unit and, on the CPU, reloading a
// head's state and buffers into cache each time.
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

// Whether the scans take a backend's scan kernel where it has one; an error for a PONDER_DUAL_SCAN it cannot read.
bool scan_kernel_on() {
  if (g_scan < 0)
    throw std::invalid_argument("PONDER_DUAL_SCAN=" + std::string(std::getenv("PONDER_DUAL_SCAN")) +
                                " must be 1 (the backend's scan kernel) or 0 (the one-unit kernel unit by unit)");
  return g_scan == 1;
}

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
  if (!scan_kernel_on() || !backend(xq.device()).dual_scan() || g.G == 0) return std::nullopt;
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

// ---- TTT-MLP: the backend's scan kernel (CUDA), else the one-unit kernel unit by unit (the CPU).
namespace scan_units {
namespace {

// x (…, n·b, c), or (…, n, b, c) when !split, as a contiguous (n, …, b, c): one copy per scan, after which every
// unit's part is the contiguous operand the one-unit kernel takes (it would copy each unit's rows on its own).
Tensor units_first_copy(const Tensor& x, const Geo& g, bool split) {
  std::vector<int> perm{g.r};
  for (int a = 0; a < g.r; ++a) perm.push_back(a);
  perm.push_back(g.r + 1);
  perm.push_back(g.r + 2);
  Shape s = g.lead;
  for (int64_t e : {g.n, g.b, x.shape().back()}) s.push_back(e);
  return contiguous(permute(split ? reshape(x, s) : x, perm));
}
std::array<Tensor, 4> units_first_rows(const std::array<Tensor, 10>& x, const Geo& g) {
  return {units_first_copy(x[4], g, true), units_first_copy(x[5], g, true), units_first_copy(x[6], g, true),
          units_first_copy(x[7], g, false)};
}

// Unit u's ten operands: its weights (x's for unit 0, else what unit u − 1 wrote into Y), rows and η (parts of
// units_first_rows).
std::array<Tensor, 10> mlp_unit(const std::array<Tensor, 10>& x, const std::array<Tensor, 4>& rows,
                                const std::array<Tensor, 5>& Y, int64_t u) {
  std::array<Tensor, 10> xu;
  for (size_t i = 0; i < 4; ++i) xu[i] = u == 0 ? x[i] : unit_part(Y[i + 1], u - 1);
  for (size_t i = 0; i < 4; ++i) xu[i + 4] = unit_part(rows[i], u);
  xu[8] = x[8];
  xu[9] = x[9];
  return xu;
}

// The forward's buffers checked against x: Y's five (n, …, m, c) parts and S.
void mlp_scan_buffers(const char* op, const std::array<Tensor, 5>& Y, const Tensor& S, const std::array<Tensor, 10>& x,
                      const Geo& g) {
  const int64_t h = x[0].shape().back();
  for (size_t i = 0; i < 4; ++i)
    scan_need(x[i].dim() >= 2 && std::equal(g.lead.begin(), g.lead.end(), x[i].shape().begin()) &&
                  x[i].dim() == g.lead.size() + 2,
              std::string(op) + ": weight " + std::to_string(i) + " " + shape_str(x[i].shape()) +
                  " must have xq's leading shape " + shape_str(g.lead));
  const int64_t rc[5][2] = {{g.b, g.f}, {g.f, h}, {1, h}, {h, g.f}, {1, g.f}};
  const char* names[5] = {"out", "W1", "b1", "W2", "b2"};
  for (size_t i = 0; i < 5; ++i) scan_buffer(op, names[i], Y[i], x[4], units_first(g, rc[i][0], rc[i][1]));
  scan_buffer(op, "S", S, x[4], {g.n, g.G, kMlpDualSaved(g.b, g.f, h)});
}

}  // namespace
}  // namespace scan_units

namespace scan_units {
namespace {

// The operands of the backend's MLP scan kernel, or nothing where it has none (or PONDER_DUAL_SCAN=0): unit 0's,
// whose rows are the first parts of the units-first copies.
std::optional<MlpScanOperands> mlp_scan_operands(const std::array<Tensor, 10>& x, const std::array<Tensor, 4>& rows,
                                                 const std::array<Tensor, 5>& Y, const Geo& g, double eps) {
  if (!scan_kernel_on() || !backend(x[4].device()).mlp_scan() || g.G == 0) return std::nullopt;
  return MlpScanOperands{mlp_operands(mlp_unit(x, rows, Y, 0), eps), g.n};
}

// The backward unit by unit: each unit's weight gradients into one of two sets of buffers (the unit before reads
// them as its upstream), unit 0's into g; dγ, dβ the last unit's, then each earlier unit's added to them.
void mlp_backward_units(const std::array<Tensor, 10>& g, const std::array<Tensor, 10>& x,
                        const std::array<Tensor, 4>& rows, const std::array<Tensor, 5>& Y, const Tensor& S,
                        const Tensor& dout, const std::array<Tensor, 5>& dy, double eps, const Geo& geo) {
  const auto like = [&](const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); };
  std::array<Tensor, 4> buf[2];
  for (auto& b : buf)
    for (size_t i = 0; i < 4; ++i) b[i] = like(g[i]);
  const Tensor tg = like(g[8]), tb = like(g[9]);
  std::array<Tensor, 4> d{dy[1], dy[2], dy[3], dy[4]};
  for (int64_t u = geo.n - 1; u >= 0; --u) {
    const bool last = u == geo.n - 1;
    const std::array<Tensor, 4>& o = u == 0 ? std::array<Tensor, 4>{g[0], g[1], g[2], g[3]} : buf[u % 2];
    ttt_mlp_dual_backward_into({o[0], o[1], o[2], o[3], unit_part(g[4], u), unit_part(g[5], u), unit_part(g[6], u),
                                unit_part(g[7], u), last ? g[8] : tg, last ? g[9] : tb},
                               mlp_unit(x, rows, Y, u), eps, unit_part(S, u),
                               {unit_part(dout, u), d[0], d[1], d[2], d[3]});
    if (!last) {
      backend(x[4].device()).binary(BinaryOp::Add, g[8], g[8], tg);
      backend(x[4].device()).binary(BinaryOp::Add, g[9], g[9], tb);
    }
    d = o;
  }
}

}  // namespace
}  // namespace scan_units

void ttt_mlp_scan_into(const std::array<Tensor, 5>& Y, const Tensor& S, const std::array<Tensor, 10>& x, double eps) {
  using namespace scan_units;
  const Geo g = geometry(x[4], x[7], "ttt_mlp_scan");
  mlp_scan_buffers("ttt_mlp_scan", Y, S, x, g);
  const std::array<Tensor, 4> rows = units_first_rows(x, g);
  if (const auto so = mlp_scan_operands(x, rows, Y, g, eps)) return backend(x[4].device()).ttt_mlp_scan(Y, S, *so);
  for (int64_t u = 0; u < g.n; ++u)
    ttt_mlp_dual_into({unit_part(Y[0], u), unit_part(Y[1], u), unit_part(Y[2], u), unit_part(Y[3], u),
                       unit_part(Y[4], u)},
                      unit_part(S, u), mlp_unit(x, rows, Y, u), eps);
}

void ttt_mlp_scan_backward_into(const std::array<Tensor, 10>& g, const std::array<Tensor, 10>& x,
                                const std::array<Tensor, 5>& Y, const Tensor& S, const std::array<Tensor, 5>& dy,
                                double eps) {
  using namespace scan_units;
  const char* op = "ttt_mlp_scan_backward";
  const Geo geo = geometry(x[4], x[7], op);
  mlp_scan_buffers(op, Y, S, x, geo);
  const char* names[10] = {"dW1", "db1", "dW2", "db2", "dxq", "dxk", "dxv", "deta", "dγ", "dβ"};
  for (size_t i = 0; i < 10; ++i) {
    const Shape want = i >= 4 && i < 7 ? units_first(geo, geo.b, geo.f)
                       : i == 7        ? units_first(geo, geo.b, geo.b)
                                       : x[i].shape();
    scan_buffer(op, names[i], g[i], x[4], want);
  }
  scan_need(dy[0].shape() == x[4].shape(), std::string(op) + ": dout " + shape_str(dy[0].shape()) +
                                               " must be xq's " + shape_str(x[4].shape()));
  for (size_t i = 1; i < 5; ++i) {
    check_same(op, x[4], dy[i]);
    scan_need(dy[i].shape() == x[i - 1].shape(), std::string(op) + ": the last unit's upstream " +
                                                     std::to_string(i) + " " + shape_str(dy[i].shape()) +
                                                     " must be " + shape_str(x[i - 1].shape()));
  }
  const std::array<Tensor, 4> rows = units_first_rows(x, geo);
  const Tensor dout = units_first_copy(dy[0], geo, true);
  if (const auto so = mlp_scan_operands(x, rows, Y, geo, eps))
    return backend(x[4].device())
        .ttt_mlp_scan_backward(g, *so, Y, S, {dout, contiguous(dy[1]), contiguous(dy[2]), contiguous(dy[3]),
                                              contiguous(dy[4])});
  mlp_backward_units(g, x, rows, Y, S, dout, dy, eps, geo);
}

}  // namespace ponder::raw
