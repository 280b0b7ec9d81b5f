// Causal softmax attention per head (tensor/kernels.def), a block of queries at a time. A block's scores against
// the keys its rows can see are one GEMM into a scratch block; the softmax runs row by row (sums in double);
// the output is a second GEMM. Keys no row of the block can see (above the causal diagonal, or beyond the
// window) are never touched, so a causal pass does about half the products of the dense composition
// (autograd/compose.cpp, the definition this is tested against), and no (n × T) tensor is ever stored: the
// backward recomputes each block's probabilities from the saved log-normalisers (lse), as flash attention does.
// Blocks of one head run in order and heads in parallel, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/vmath.h"

namespace ponder::cpu {
namespace {

constexpr int64_t kBlock = 64;  // queries per block: a 64 × T float scratch is 512 KiB at T = 2,048

// The keys [lo, hi) query i sees.
struct Span {
  int64_t lo, hi;
};
Span seen(const AttnGeometry& g, int64_t i, int64_t T) {
  const int64_t lag0 = g.t0 + i - g.first;  // index of the key at the query's own position
  const int64_t lo = g.window ? std::max<int64_t>(0, lag0 - g.window + 1) : 0;
  return {std::min(lo, T), std::clamp<int64_t>(lag0 + 1, 0, T)};
}

// s[j] ← exp(scale·s[j] − shift) for j < len; returns Σ of the results in double. Float rows go through the
// 8-lane exp (vmath.h), eight at a time; a tail is padded with −∞, whose exp is 0.
double exp_row(float* s, int64_t len, double scale, double shift) {
  using vmath::vf;
  const vf sc = vmath::splat(float(scale)), sh = vmath::splat(float(shift));
  double sum = 0;
  int64_t j = 0;
  for (; j + vmath::kLanes <= len; j += vmath::kLanes) {
    vf x;
    std::memcpy(&x, s + j, sizeof x);
    const vf e = vmath::exp_v(x * sc - sh);
    std::memcpy(s + j, &e, sizeof e);
    float part = 0;  // eight lanes summed in float, then added in double
    for (int l = 0; l < vmath::kLanes; ++l) part += e[l];
    sum += double(part);
  }
  if (j < len) {
    vf x = vmath::splat(-std::numeric_limits<float>::infinity());
    for (int64_t l = 0; j + l < len; ++l) x[l] = s[j + l] * sc[l] - sh[l];
    const vf e = vmath::exp_v(x);
    for (int64_t l = 0; j + l < len; ++l) {
      s[j + l] = e[l];
      sum += double(e[l]);
    }
  }
  return sum;
}
double exp_row(double* s, int64_t len, double scale, double shift) {
  double sum = 0;
  for (int64_t j = 0; j < len; ++j) sum += (s[j] = std::exp(scale * s[j] - shift));
  return sum;
}
template <class T>
T row_max(const T* s, int64_t len) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < len; ++j) m = s[j] > m ? s[j] : m;
  return m;
}

// Rows [i0, i1) of one head: the block's key span, and each row's seen keys relative to it.
struct Block {
  int64_t i0, i1, lo, hi;
  int64_t rows() const { return i1 - i0; }
  int64_t span() const { return hi - lo; }
};
Block block_of(const AttnGeometry& g, int64_t b, int64_t n, int64_t T) {
  const int64_t i0 = b * kBlock, i1 = std::min(n, i0 + kBlock);
  return {i0, i1, seen(g, i0, T).lo, seen(g, i1 - 1, T).hi};
}

// P (rows × span, ld span) from the scores S in place: each row's softmax over its seen keys, 0 elsewhere.
// With saved (backward) the normaliser is exp(saved lse); otherwise it is computed and written to lse.
template <class T>
void softmax_rows(T* s, const Block& blk, const AttnGeometry& g, int64_t Tk, const T* saved, T* lse) {
  for (int64_t r = 0; r < blk.rows(); ++r) {
    T* row = s + r * blk.span();
    const Span sp = seen(g, blk.i0 + r, Tk);
    const int64_t a = sp.lo - blk.lo, e = sp.hi - blk.lo;
    std::fill(row, row + a, T(0));
    std::fill(row + e, row + blk.span(), T(0));
    if (saved) {
      exp_row(row + a, e - a, g.scale, double(saved[blk.i0 + r]));
      continue;
    }
    const double m = g.scale * double(row_max(row + a, e - a));  // scale > 0 keeps the argmax
    const double inv = 1.0 / exp_row(row + a, e - a, g.scale, m);
    for (int64_t j = a; j < e; ++j) row[j] = T(double(row[j]) * inv);
    lse[blk.i0 + r] = T(m - std::log(inv));
  }
}

template <class T>
void attention_t(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttnGeometry& g) {
  const int64_t G = q.shape()[0], n = q.shape()[1], f = q.shape()[2], Tk = k.shape()[1];
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>();
  T *yp = y.data<T>(), *lp = lse.data<T>();
#pragma omp parallel
  {
    std::vector<T> s(size_t(kBlock * Tk));
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < G * blocks; ++task) {
      const int64_t h = task / blocks;
      const Block blk = block_of(g, task % blocks, n, Tk);
      const T *qh = qp + (h * n + blk.i0) * f, *kh = kp + (h * Tk + blk.lo) * f, *vh = vp + (h * Tk + blk.lo) * f;
      gemm(false, true, blk.rows(), blk.span(), f, qh, f, kh, f, T(0), s.data(), blk.span());
      softmax_rows<T>(s.data(), blk, g, Tk, nullptr, lp + h * n);
      gemm(false, false, blk.rows(), f, blk.span(), s.data(), blk.span(), vh, f, T(0), yp + (h * n + blk.i0) * f, f);
    }
  }
}

// One head's gradients: blocks in order, dk and dv accumulated across them.
template <class T>
void attention_backward_head(T* dq, T* dk, T* dv, const T* q, const T* k, const T* v, const T* y, const T* lse,
                             const T* dy, int64_t n, int64_t Tk, int64_t f, const AttnGeometry& g, T* p, T* ds) {
  std::fill(dk, dk + Tk * f, T(0));
  std::fill(dv, dv + Tk * f, T(0));
  for (int64_t b = 0; b * kBlock < n; ++b) {
    const Block blk = block_of(g, b, n, Tk);
    const int64_t R = blk.rows(), S = blk.span();
    const T *qb = q + blk.i0 * f, *dyb = dy + blk.i0 * f, *ks = k + blk.lo * f, *vs = v + blk.lo * f;
    gemm(false, true, R, S, f, qb, f, ks, f, T(0), p, S);   // scores
    softmax_rows<T>(p, blk, g, Tk, lse, nullptr);  // P from the saved normalisers
    gemm(true, false, S, f, R, p, S, dyb, f, T(1), dv + blk.lo * f, f);  // dv += Pᵀ·dy
    gemm(false, true, R, S, f, dyb, f, vs, f, T(0), ds, S);               // dP = dy·vᵀ
    for (int64_t r = 0; r < R; ++r) {  // dS = scale·P⊙(dP − Σ_f dy⊙y)
      double d = 0;
      for (int64_t c = 0; c < f; ++c) d += double(dyb[r * f + c]) * double(y[(blk.i0 + r) * f + c]);
      const T td = T(d), sc = T(g.scale);
      T *dr = ds + r * S;
      const T* pr = p + r * S;
      for (int64_t j = 0; j < S; ++j) dr[j] = sc * pr[j] * (dr[j] - td);
    }
    gemm(false, false, R, f, S, ds, S, ks, f, T(0), dq + blk.i0 * f, f);  // dq = dS·k
    gemm(true, false, S, f, R, ds, S, qb, f, T(1), dk + blk.lo * f, f);   // dk += dSᵀ·q
  }
}

template <class T>
void attention_backward_t(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy, const AttnGeometry& g) {
  const int64_t G = q.shape()[0], n = q.shape()[1], f = q.shape()[2], Tk = k.shape()[1];
#pragma omp parallel
  {
    std::vector<T> p(size_t(kBlock * Tk)), ds(size_t(kBlock * Tk));
#pragma omp for schedule(dynamic)
    for (int64_t h = 0; h < G; ++h)
      attention_backward_head(dq.data<T>() + h * n * f, dk.data<T>() + h * Tk * f, dv.data<T>() + h * Tk * f,
                              q.data<T>() + h * n * f, k.data<T>() + h * Tk * f, v.data<T>() + h * Tk * f,
                              y.data<T>() + h * n * f, lse.data<T>() + h * n, dy.data<T>() + h * n * f, n, Tk, f, g,
                              p.data(), ds.data());
  }
}

}  // namespace

void attention(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
               const AttnGeometry& g) {
  PONDER_DISPATCH_FLOAT(q.dtype(), "attention", [&] { attention_t<scalar_t>(y, lse, q, k, v, g); });
}

void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy, const AttnGeometry& g) {
  PONDER_DISPATCH_FLOAT(q.dtype(), "attention_backward",
                        [&] { attention_backward_t<scalar_t>(dq, dk, dv, q, k, v, y, lse, dy, g); });
}

}  // namespace ponder::cpu
