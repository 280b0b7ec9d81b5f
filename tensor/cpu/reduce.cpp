// Reductions and cumulative sums. Each output element is reduced by one thread in a fixed order,
// so sums are bitwise reproducible for any thread count. Floats accumulate in double.
#include <limits>
#include <stdexcept>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"

namespace ponder::cpu {
namespace {

template <class T>
void reduce_t(ReduceOp op, const Tensor& out, const Tensor& x) {
  std::vector<int64_t> ks, kis, kos, rs, rst;  // kept sizes/in-strides/out-strides, reduced sizes/strides
  for (size_t d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1) continue;
    if (out.shape()[d] == 1) {
      rs.push_back(x.shape()[d]);
      rst.push_back(x.strides()[d]);
    } else {
      ks.push_back(x.shape()[d]);
      kis.push_back(x.strides()[d]);
      kos.push_back(out.strides()[d]);
    }
  }
  const int64_t n_out = out.numel();
  int64_t n_red = 1;
  for (int64_t s : rs) n_red *= s;
  const T* px = x.data<T>();
  T* py = out.data<T>();
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const int nr = int(rs.size());
#pragma omp parallel for schedule(static) if (n_out > 1 && n_out * n_red >= kParallelMin)
  for (int64_t o = 0; o < n_out; ++o) {
    int64_t in_base = 0, out_off = 0, r = o;
    for (int d = int(ks.size()) - 1; d >= 0; --d) {
      int64_t i = r % ks[size_t(d)];
      r /= ks[size_t(d)];
      in_base += i * kis[size_t(d)];
      out_off += i * kos[size_t(d)];
    }
    Acc acc = op == ReduceOp::Sum ? Acc(0)
              : op == ReduceOp::Max ? Acc(std::numeric_limits<T>::lowest())
                                    : Acc(std::numeric_limits<T>::max());
    std::vector<int64_t> idx(size_t(nr), 0);
    const int64_t inner = nr ? rs.back() : 1, inner_st = nr ? rst.back() : 0;
    for (int64_t done = 0; done < n_red; done += inner) {
      int64_t base = in_base;
      for (int d = 0; d < nr - 1; ++d) base += idx[size_t(d)] * rst[size_t(d)];
      const T* p = px + base;
      if (op == ReduceOp::Sum)
        for (int64_t i = 0; i < inner; ++i) acc += Acc(p[i * inner_st]);
      else if (op == ReduceOp::Max)
        for (int64_t i = 0; i < inner; ++i) acc = Acc(p[i * inner_st]) > acc ? Acc(p[i * inner_st]) : acc;
      else
        for (int64_t i = 0; i < inner; ++i) acc = Acc(p[i * inner_st]) < acc ? Acc(p[i * inner_st]) : acc;
      for (int d = nr - 2; d >= 0; --d) {  // advance the outer reduced counter
        if (++idx[size_t(d)] < rs[size_t(d)]) break;
        idx[size_t(d)] = 0;
      }
    }
    py[out_off] = T(acc);
  }
}

template <class T>
void cumsum_t(const Tensor& out, const Tensor& x, int axis, bool reverse) {
  const int64_t len = x.shape()[size_t(axis)];
  const int64_t lines = len ? x.numel() / len : 0;
  const int64_t sx = x.strides()[size_t(axis)], so = out.strides()[size_t(axis)];
  const T* px = x.data<T>();
  T* py = out.data<T>();
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMin)
  for (int64_t l = 0; l < lines; ++l) {
    int64_t bx = 0, bo = 0, r = l;
    for (int d = int(x.dim()) - 1; d >= 0; --d) {
      if (d == axis) continue;
      int64_t i = r % x.shape()[size_t(d)];
      r /= x.shape()[size_t(d)];
      bx += i * x.strides()[size_t(d)];
      bo += i * out.strides()[size_t(d)];
    }
    Acc acc = 0;
    for (int64_t j = 0; j < len; ++j) {
      int64_t t = reverse ? len - 1 - j : j;
      acc += Acc(px[bx + t * sx]);
      py[bo + t * so] = T(acc);
    }
  }
}

}  // namespace

void reduce(ReduceOp op, const Tensor& out, const Tensor& x) {
  PONDER_DISPATCH_ALL(x.dtype(), "reduce", [&] { reduce_t<scalar_t>(op, out, x); });
}

void cumsum(const Tensor& out, const Tensor& x, int axis, bool reverse) {
  PONDER_DISPATCH_ALL(x.dtype(), "cumsum", [&] { cumsum_t<scalar_t>(out, x, axis, reverse); });
}

}  // namespace ponder::cpu
