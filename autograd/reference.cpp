#include "autograd/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ponder::ref {

std::vector<int64_t> Dense::index(int64_t i) const {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t Dense::flat(const std::vector<int64_t>& idx) const {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

double Dense::at_broadcast(const std::vector<int64_t>& t) const {
  std::vector<int64_t> idx(shape.size());
  size_t lead = t.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) idx[d] = shape[d] == 1 ? 0 : t[lead + d];
  return v[size_t(flat(idx))];
}

Dense map(const Dense& x, const std::function<double(double)>& f) {
  Dense r = x;
  for (double& e : r.v) e = f(e);
  return r;
}

Dense zip(const Dense& a, const Dense& b, const std::function<double(double, double)>& f) {
  Dense r{broadcast_shapes(a.shape, b.shape, "ref::zip"), {}};
  r.v.resize(size_t(shape_numel(r.shape)));
  for (int64_t i = 0; i < r.numel(); ++i) {
    auto idx = r.index(i);
    r.v[size_t(i)] = f(a.at_broadcast(idx), b.at_broadcast(idx));
  }
  return r;
}

Dense reduce(const Dense& x, const std::vector<int64_t>& axes, bool keepdim, char kind) {
  std::vector<int> ax = normalize_axes(axes, x.shape.size(), "ref::reduce");
  Dense k{reduced_shape(x.shape, ax, true), {}};
  double init = kind == 's' ? 0.0 : kind == 'm' ? -std::numeric_limits<double>::infinity()
                                                 : std::numeric_limits<double>::infinity();
  k.v.assign(size_t(shape_numel(k.shape)), init);
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto idx = x.index(i);
    for (int a : ax) idx[size_t(a)] = 0;
    double& acc = k.v[size_t(k.flat(idx))];
    double e = x.v[size_t(i)];
    acc = kind == 's' ? acc + e : kind == 'm' ? std::max(acc, e) : std::min(acc, e);
  }
  if (!keepdim) k.shape = reduced_shape(x.shape, ax, false);
  return k;
}

Dense matmul(const Dense& a, const Dense& b) {
  const size_t da = a.shape.size(), db = b.shape.size();
  const int64_t m = a.shape[da - 2], k = a.shape[da - 1], n = b.shape[db - 1];
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Shape s = broadcast_shapes(ba, bb, "ref::matmul");
  s.push_back(m);
  s.push_back(n);
  Dense r{s, std::vector<double>(size_t(shape_numel(s)), 0.0)};
  for (int64_t i = 0; i < r.numel(); ++i) {
    auto idx = r.index(i);
    std::vector<int64_t> ia = idx, ib = idx;
    double acc = 0;
    for (int64_t p = 0; p < k; ++p) {
      ia[idx.size() - 1] = p;
      ib[idx.size() - 2] = p;
      acc += a.at_broadcast(ia) * b.at_broadcast(ib);
    }
    r.v[size_t(i)] = acc;
  }
  return r;
}

Dense softmax(const Dense& x, bool log) {
  Dense r = x;
  const int64_t n = x.shape.back(), rows = x.numel() / n;
  for (int64_t row = 0; row < rows; ++row) {
    double mx = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x.v[size_t(row * n + j)]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(x.v[size_t(row * n + j)] - mx);
    for (int64_t j = 0; j < n; ++j) {
      double lp = x.v[size_t(row * n + j)] - mx - std::log(s);
      r.v[size_t(row * n + j)] = log ? lp : std::exp(lp);
    }
  }
  return r;
}

Dense cumsum(const Dense& x, int axis, bool reverse) {
  Dense r = x;
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto idx = x.index(i);
    double acc = 0;
    const int64_t len = x.shape[size_t(axis)], at = idx[size_t(axis)];
    for (int64_t j = 0; j < len; ++j) {
      if (reverse ? j < at : j > at) continue;
      idx[size_t(axis)] = j;
      acc += x.v[size_t(x.flat(idx))];
    }
    r.v[size_t(i)] = acc;
  }
  return r;
}

Dense permute(const Dense& x, const std::vector<int>& perm) {
  Dense r;
  for (int p : perm) r.shape.push_back(x.shape[size_t(p)]);
  r.v.resize(x.v.size());
  for (int64_t i = 0; i < r.numel(); ++i) {
    auto ri = r.index(i);
    std::vector<int64_t> xi(ri.size());
    for (size_t d = 0; d < perm.size(); ++d) xi[size_t(perm[d])] = ri[d];
    r.v[size_t(i)] = x.v[size_t(x.flat(xi))];
  }
  return r;
}

}  // namespace ponder::ref
