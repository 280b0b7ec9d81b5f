// The geometry the scan ops share (autograd/ops_ttt_scan.cpp, ops_ttt_mlp_scan.cpp): a sequence's rows xq
// (…, N, f) in n units of b rows, η (…, n, b, b), and buffers that hold one part per unit with the units first.
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/ops.h"

namespace ponder::scan_impl {

// r: the rows' axis of xq (…, N, f); n units of b rows; eta (…, n, b, b).
struct Geo {
  int r;
  int64_t b, f, n;
  Shape lead;
};

inline Geo geometry(const Tensor& xq, const Tensor& eta, const char* op) {
  if (xq.dim() < 2 || eta.dim() != xq.dim() + 1)
    throw std::invalid_argument(std::string(op) + ": xq " + shape_str(xq.shape()) + " must be (…, N, f) and eta " +
                                shape_str(eta.shape()) + " (…, n, b, b)");
  Geo g{int(xq.dim()) - 2, eta.shape().back(), xq.shape().back(), eta.shape()[xq.dim() - 2], {}};
  g.lead.assign(xq.shape().begin(), xq.shape().end() - 2);
  Shape want = g.lead;
  for (int64_t s : {g.n, g.b, g.b}) want.push_back(s);
  if (eta.shape() != want || g.b < 1 || g.n < 1 || xq.shape()[size_t(g.r)] != g.n * g.b)
    throw std::invalid_argument(std::string(op) + ": eta " + shape_str(eta.shape()) + " must be (…, n, b, b) with " +
                                "n·b = " + std::to_string(xq.shape()[size_t(g.r)]) + " rows of xq " +
                                shape_str(xq.shape()));
  return g;
}

// The leading shape, then `tail`; with the units' axis first when units_first.
inline Shape lead_with(const Geo& g, std::initializer_list<int64_t> tail, bool units_first = false) {
  Shape s = g.lead;
  if (units_first) s.insert(s.begin(), g.n);
  s.insert(s.end(), tail);
  return s;
}

inline int64_t heads(const Geo& g) {
  int64_t G = 1;
  for (int64_t a : g.lead) G *= a;
  return G;
}

// Unit u of a (…, N, f) operand and of a buffer with the units first.
inline Tensor rows_of_unit(const Tensor& x, const Geo& g, int64_t u) {
  return raw::slice(x, g.r, u * g.b, (u + 1) * g.b);
}
inline Tensor part(const Tensor& buf, int64_t u) { return raw::squeeze(raw::slice(buf, 0, u, u + 1), 0); }

// A (n, …, m, c) buffer as (…, n·m, c) (rows = true) or (…, n, m, c): the units moved behind the leading axes.
inline Tensor units_inside(const Tensor& buf, const Geo& g, bool rows) {
  std::vector<int> perm;
  for (int a = 1; a <= g.r; ++a) perm.push_back(a);
  for (int a : {0, g.r + 1, g.r + 2}) perm.push_back(a);
  Tensor t = raw::contiguous(raw::permute(buf, perm));
  const int64_t m = buf.shape()[size_t(g.r) + 1], c = buf.shape().back();
  return rows ? raw::reshape(t, lead_with(g, {g.n * m, c})) : t;
}

}  // namespace ponder::scan_impl
