// Reductions and cumulative sums. Each output element is reduced by one thread in a fixed order,
// so sums are bitwise reproducible for any thread count. Floats accumulate in double.
#include <limits>
#include <stdexcept>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"

namespace ponder::cpu {
namespace {

// A sum of n values at stride st in double, in a fixed order that does not depend on the thread count:
// eight interleaved partial sums (lane j takes elements j, j+8, …), then combined pairwise. Unlike one
// running sum it is not a chain of dependent additions, so a row of 64 takes a few dozen cycles.
// f maps an element, widened to double, to the value summed (the identity, or a square).
template <class T, class F = double (*)(double)>
double sum_run(const T* p, int64_t n, int64_t st, F f = [](double v) { return v; }) {
  if (n < 16) {
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) acc += f(double(p[i * st]));
    return acc;
  }
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  if (st == 1) {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lane[j] += f(double(p[i + j]));
  } else {
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) lane[j] += f(double(p[(i + j) * st]));
  }
  for (int j = 0; i < n; ++i, ++j) lane[j] += f(double(p[i * st]));
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// x's non-unit axes, split into those out keeps and those it reduces, in x's order.
struct ReduceAxes {
  std::vector<int64_t> ks, kis, kos, rs, rst;  // kept sizes/in-strides/out-strides, reduced sizes/strides
  bool inner_kept = false;                     // x's innermost non-unit axis is kept
  int64_t n_red = 1;                           // elements reduced into each output element
};

ReduceAxes reduce_axes(const Tensor& out, const Tensor& x) {
  ReduceAxes a;
  for (size_t d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1) continue;
    a.inner_kept = out.shape()[d] != 1;
    if (out.shape()[d] == 1) {
      a.rs.push_back(x.shape()[d]);
      a.rst.push_back(x.strides()[d]);
    } else {
      a.ks.push_back(x.shape()[d]);
      a.kis.push_back(x.strides()[d]);
      a.kos.push_back(out.strides()[d]);
    }
  }
  for (int64_t s : a.rs) a.n_red *= s;
  return a;
}

constexpr int kMaxDims = 16;  // reduced-index counters live on the stack up to this rank

// Visits the reduced indices in lexicographic order: fn(offset of the innermost run's start, run length).
template <class Fn>
inline void for_each_run(const ReduceAxes& a, int64_t in_base, Fn&& fn) {
  const int nr = int(a.rs.size());
  int64_t idx[kMaxDims] = {};
  const int64_t inner = nr ? a.rs.back() : 1;
  for (int64_t done = 0; done < a.n_red; done += inner) {
    int64_t base = in_base;
    for (int d = 0; d < nr - 1; ++d) base += idx[d] * a.rst[size_t(d)];
    fn(base, inner);
    for (int d = nr - 2; d >= 0; --d) {  // advance the outer reduced counters
      if (++idx[d] < a.rs[size_t(d)]) break;
      idx[d] = 0;
    }
  }
}

// The path for x's innermost axis kept and contiguous in x and out: blocks of an output row accumulate in a
// buffer while the reduced indices run in order, so the loop over the row vectorises.
template <class T, class Acc>
inline void reduce_rows(ReduceOp op, const ReduceAxes& a, const T* px, T* py, int64_t n_out, Acc init) {
  const std::vector<int64_t> &ks = a.ks, &kis = a.kis, &kos = a.kos;
  const int64_t L = ks.back();
  constexpr int64_t kBlock = 1024;  // row block held in the accumulator
  const int64_t blocks = (L + kBlock - 1) / kBlock, n_outer = n_out / L;
  const int nk = int(ks.size()) - 1;
#pragma omp parallel for schedule(static) if (n_outer * blocks > 1 && n_out * a.n_red >= kParallelMin)
  for (int64_t it = 0; it < n_outer * blocks; ++it) {
    int64_t r = it / blocks, j0 = (it % blocks) * kBlock, in_base = j0, out_off = j0;
    const int64_t len = std::min(kBlock, L - j0);
    for (int d = nk - 1; d >= 0; --d) {
      int64_t i = r % ks[size_t(d)];
      r /= ks[size_t(d)];
      in_base += i * kis[size_t(d)];
      out_off += i * kos[size_t(d)];
    }
    Acc acc[kBlock];
    for (int64_t j = 0; j < len; ++j) acc[j] = init;
    const int64_t inner_st = a.rst.back();
    for_each_run(a, in_base, [&](int64_t base, int64_t inner) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* p = px + base + i * inner_st;
        if (op == ReduceOp::Sum)
          for (int64_t j = 0; j < len; ++j) acc[j] += Acc(p[j]);
        else if (op == ReduceOp::Max)
          for (int64_t j = 0; j < len; ++j) acc[j] = Acc(p[j]) > acc[j] ? Acc(p[j]) : acc[j];
        else
          for (int64_t j = 0; j < len; ++j) acc[j] = Acc(p[j]) < acc[j] ? Acc(p[j]) : acc[j];
      }
    });
    for (int64_t j = 0; j < len; ++j) py[out_off + j] = T(acc[j]);
  }
}

// The general path: each output element reduced on its own, its innermost reduced run summed by sum_run.
template <class T, class Acc>
inline void reduce_each(ReduceOp op, const ReduceAxes& a, const T* px, T* py, int64_t n_out, Acc init) {
  const std::vector<int64_t> &ks = a.ks, &kis = a.kis, &kos = a.kos;
  const int nr = int(a.rs.size());
#pragma omp parallel for schedule(static) if (n_out > 1 && n_out * a.n_red >= kParallelMin)
  for (int64_t o = 0; o < n_out; ++o) {
    int64_t in_base = 0, out_off = 0, r = o;
    for (int d = int(ks.size()) - 1; d >= 0; --d) {
      int64_t i = r % ks[size_t(d)];
      r /= ks[size_t(d)];
      in_base += i * kis[size_t(d)];
      out_off += i * kos[size_t(d)];
    }
    Acc acc = init;
    const int64_t inner_st = nr ? a.rst.back() : 0;
    for_each_run(a, in_base, [&](int64_t base, int64_t inner) {
      const T* p = px + base;
      if (op == ReduceOp::Sum) {
        if constexpr (std::is_floating_point_v<T>) acc += sum_run(p, inner, inner_st);
        else
          for (int64_t i = 0; i < inner; ++i) acc += Acc(p[i * inner_st]);
      } else if (op == ReduceOp::Max) {
        for (int64_t i = 0; i < inner; ++i) acc = Acc(p[i * inner_st]) > acc ? Acc(p[i * inner_st]) : acc;
      } else {
        for (int64_t i = 0; i < inner; ++i) acc = Acc(p[i * inner_st]) < acc ? Acc(p[i * inner_st]) : acc;
      }
    });
    py[out_off] = T(acc);
  }
}

// Reduces x into out (x's rank, size 1 on the reduced axes). Size-1 axes are dropped first; then
//  - when x's innermost axis is kept, contiguous in x and in out, each output row is accumulated in a
//    double buffer while the reduced indices run in lexicographic order, so the loop over the row
//    vectorises and every element sees the same additions in the same order as one at a time;
//  - otherwise each output element is reduced on its own, its innermost reduced run summed by sum_run.
// Either way the order of the additions is fixed, whatever the thread count. The two paths add in
// different orders (a running sum against sum_run's eight lanes), so the same logical sum of a
// contiguous tensor and of a transposed view may differ in the last bits.
template <class T>
void reduce_t(ReduceOp op, const Tensor& out, const Tensor& x) {
  const ReduceAxes a = reduce_axes(out, x);
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  const T* px = x.data<T>();
  T* py = out.data<T>();
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  const Acc init = op == ReduceOp::Sum   ? Acc(0)
                   : op == ReduceOp::Max ? Acc(std::numeric_limits<T>::lowest())
                                         : Acc(std::numeric_limits<T>::max());
  const int nr = int(a.rs.size());
  if (nr > kMaxDims) throw std::invalid_argument("reduce: more than 16 reduced axes");
  if (a.inner_kept && nr > 0 && a.kis.back() == 1 && a.kos.back() == 1)
    reduce_rows(op, a, px, py, n_out, init);
  else
    reduce_each(op, a, px, py, n_out, init);
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

// Σ x² of a contiguous tensor in double, with the additions reduce() makes for the sum of all elements of
// x converted to float64 and squared: runs along the innermost non-unit axis summed by sum_run, the runs
// added in order. So it equals that composition bit for bit.
template <class T>
double sum_squares_t(const Tensor& x) {
  int64_t inner = 1;
  for (size_t d = x.dim(); d-- > 0;)
    if (x.shape()[d] != 1) {
      inner = x.shape()[d];
      break;
    }
  const T* p = x.data<T>();
  const int64_t n = x.numel();
  double acc = 0;
  for (int64_t o = 0; o < n; o += inner) acc += sum_run(p + o, inner, 1, [](double v) { return v * v; });
  return acc;
}

}  // namespace

double sum_squares(const Tensor& x) {
  return PONDER_DISPATCH_FLOAT(x.dtype(), "sum_squares", [&] { return sum_squares_t<scalar_t>(x); });
}

void reduce(ReduceOp op, const Tensor& out, const Tensor& x) {
  PONDER_DISPATCH_ALL(x.dtype(), "reduce", [&] { reduce_t<scalar_t>(op, out, x); });
}

void cumsum(const Tensor& out, const Tensor& x, int axis, bool reverse) {
  PONDER_DISPATCH_ALL(x.dtype(), "cumsum", [&] { cumsum_t<scalar_t>(out, x, axis, reverse); });
}

}  // namespace ponder::cpu
