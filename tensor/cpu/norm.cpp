// Fused row kernels over the last axis (tensor/kernels.def): layer norm, its backward and the VJP of that
// backward, RMS norm and its backward. Each row is handled by one thread in double precision, with sums
// taken over interleaved lanes in a fixed order, so results do not depend on the thread count.
// Their definitions are the compositions in autograd/compose.cpp, which tests/test_ops.cpp compares them with.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/rows.h"

namespace ponder::cpu {
namespace {

using rows::ld;
using rows::st;
using rows::vsum;
using rows::vsums;
using rows::vfor;
using rows::ln_stats;
using rows::acc_add;
using rows::Vec;
using rows::One;

// Runs fn(offset, D) over the rows of a (…, D) tensor, in parallel when the tensor is large.
template <class Fn>
void for_rows(const Tensor& x, Fn fn) {
  const int64_t D = x.shape().back(), rows = D ? x.numel() / D : 0;
#pragma omp parallel for schedule(static) if (rows > 1 && x.numel() >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) fn(r * D, D);
}

template <class T>
void layer_norm_rows_t(const Tensor& out, const Tensor& x, double eps) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T* p = px + o;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, (ld(p, i, t) - mu) * s, t); });
  });
}

template <class T>
void layer_norm_backward_t(const Tensor& out, const Tensor& x, const Tensor& v, double eps) {
  const T *px = x.data<T>(), *pv = v.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T *p = px + o, *q = pv + o;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    const auto m = vsums<2>(D, [&](int64_t i, auto t) {
      const auto qi = ld(q, i, t);
      return std::array<decltype(qi), 2>{qi, qi * ((ld(p, i, t) - mu) * s)};
    });
    const double m1 = m[0] / double(D), m2 = m[1] / double(D);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, s * (ld(q, i, t) - m1 - (ld(p, i, t) - mu) * s * m2), t); });
  });
}

template <class T>
void layer_norm_vjp_t(const Tensor& dx, const Tensor& dv, const Tensor& x, const Tensor& v, const Tensor& dz,
                      double eps) {
  const T *px = x.data<T>(), *pv = v.data<T>(), *pz = dz.data<T>();
  T *pdx = dx.data<T>(), *pdv = dv.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T *p = px + o, *q = pv + o, *g = pz + o;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    auto xh = [&](int64_t i, auto t) { return (ld(p, i, t) - mu) * s; };
    const auto m = vsums<4>(D, [&](int64_t i, auto t) {  // the means of v, v⊙x̂, dz and dz⊙x̂
      const auto h = xh(i, t), qi = ld(q, i, t), gi = ld(g, i, t);
      return std::array<decltype(h), 4>{qi, qi * h, gi, gi * h};
    });
    const double m1 = m[0] / double(D), m2 = m[1] / double(D), a = m[2] / double(D), b = m[3] / double(D);
    auto z = [&](int64_t i, auto t) { return s * (ld(q, i, t) - m1 - xh(i, t) * m2); };
    const double c = vsum(D, [&](int64_t i, auto t) { return ld(g, i, t) * z(i, t); }) / double(D);
    // dv = s·(dz − a − x̂·b);  dx̂ = −s·(m2·dz + b·v);  dx = s·(dx̂ − mean dx̂ − x̂·mean(dx̂⊙x̂)) − s·c·x̂
    auto dxh = [&](int64_t i, auto t) { return -s * (m2 * ld(g, i, t) + b * ld(q, i, t)); };
    const auto ef = vsums<2>(D, [&](int64_t i, auto t) {
      const auto d = dxh(i, t);
      return std::array<decltype(d), 2>{d, d * xh(i, t)};
    });
    const double e = ef[0] / double(D), f = ef[1] / double(D);
    vfor(D, [&](int64_t i, auto t) {
      const auto h = xh(i, t);
      st(pdv + o, i, s * (ld(g, i, t) - a - h * b), t);
      st(pdx + o, i, s * (dxh(i, t) - e - h * f) - s * c * h, t);
    });
  });
}

template <class T>
double rms_scale(const T* p, int64_t D, double eps) {
  const double ss = vsum(D, [&](int64_t i, auto t) {
    const auto v = ld(p, i, t);
    return v * v;
  });
  return 1.0 / std::sqrt(ss / double(D) + eps);
}

template <class T>
void rms_norm_rows_t(const Tensor& out, const Tensor& x, double eps) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T* p = px + o;
    const double r = rms_scale(p, D, eps);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, ld(p, i, t) * r, t); });
  });
}

template <class T>
void rms_norm_backward_t(const Tensor& out, const Tensor& x, const Tensor& g, double eps) {
  const T *px = x.data<T>(), *pg = g.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T *p = px + o, *q = pg + o;
    const double r = rms_scale(p, D, eps);
    const double m = vsum(D, [&](int64_t i, auto t) { return ld(q, i, t) * (ld(p, i, t) * r); }) / double(D);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, r * (ld(q, i, t) - ld(p, i, t) * r * m), t); });
  });
}

// ---- with per-row γ, β (row r reads γ[goff[r] ...]); sums over rows into γ-shaped outputs go through
// fixed blocks of rows, each with its own double accumulators, added up in block order. Blocks hold at least
// kRowBlock rows and number at most kMaxBlocks (their accumulators are zeroed and added up on every call);
// both depend on the shape only, never on the thread count.

constexpr int64_t kRowBlock = 32, kMaxBlocks = 64;

// fn(row offset o, D, row r, acc) for every row, acc = n_acc·P doubles of the row's block; then
// outs[k][j] = Σ_blocks acc_block[k·P + j].
template <class T, class Fn>
void rows_into(const Tensor& x, int64_t P, std::initializer_list<T*> outs, Fn fn) {
  const int64_t D = x.shape().back(), rows = D ? x.numel() / D : 0;
  const int64_t per = std::max(kRowBlock, (rows + kMaxBlocks - 1) / kMaxBlocks);
  const int64_t blocks = (rows + per - 1) / per, n_acc = int64_t(outs.size());
  std::vector<double> part(size_t(std::max<int64_t>(blocks, 1) * n_acc * P), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1 && x.numel() >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* acc = part.data() + blk * n_acc * P;
    for (int64_t r = blk * per; r < std::min(rows, (blk + 1) * per); ++r) fn(r * D, D, r, acc);
  }
  T* const* out = outs.begin();
#pragma omp parallel for schedule(static) if (n_acc * P * blocks >= kParallelMin)
  for (int64_t kj = 0; kj < n_acc * P; ++kj) {
    const int64_t k = kj / P, j = kj % P;
    double sum = 0;
    for (int64_t blk = 0; blk < blocks; ++blk) sum += part[size_t((blk * n_acc + k) * P + j)];
    out[k][j] = T(sum);
  }
}

// Per-thread scratch of at least n doubles (rows of intermediates, kept instead of recomputed).
double* scratch(int64_t n) {
  thread_local std::vector<double> buf;
  if (int64_t(buf.size()) < n) buf.resize(size_t(n));
  return buf.data();
}

template <class T>
void layer_norm_affine_t(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const int64_t* goff, double eps) {
  const T *px = x.data<T>(), *pgam = gamma.data<T>(), *pbet = beta.data<T>();
  T* po = out.data<T>();
  const int64_t D = x.shape().back();
  for_rows(x, [&](int64_t o, int64_t) {
    rows::ln_affine(px + o, pgam + goff[o / D], pbet + goff[o / D], po + o, D, eps);
  });
}

template <class T>
void layer_norm_affine_backward_t(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                  const Tensor& gamma, const Tensor& g, const int64_t* goff, double eps) {
  const T *px = x.data<T>(), *pgam = gamma.data<T>(), *pg = g.data<T>();
  T* pdx = dx.data<T>();
  const int64_t P = gamma.numel();
  rows_into<T>(x, P, {dgamma.data<T>(), dbeta.data<T>()}, [&](int64_t o, int64_t D, int64_t r, double* acc) {
    rows::ln_affine_backward(px + o, pgam + goff[r], pg + o, pdx + o, acc + goff[r], acc + P + goff[r], D, eps,
                             scratch(rows::kLnAffineBackwardScratch * D));
  });
}

template <class T>
void rms_norm_affine_t(const Tensor& out, const Tensor& x, const Tensor& w, const int64_t* goff, double eps) {
  const T *px = x.data<T>(), *pw = w.data<T>();
  T* po = out.data<T>();
  const int64_t D = x.shape().back();
  for_rows(x, [&](int64_t o, int64_t) {
    const T *p = px + o, *wr = pw + goff[o / D];
    const double r = rms_scale(p, D, eps);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, ld(wr, i, t) * (ld(p, i, t) * r), t); });
  });
}

template <class T>
void rms_norm_affine_backward_t(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                                const int64_t* goff, double eps) {
  const T *px = x.data<T>(), *pw = w.data<T>(), *pg = g.data<T>();
  T* pdx = dx.data<T>();
  const int64_t P = w.numel();
  rows_into<T>(x, P, {dw.data<T>()}, [&](int64_t o, int64_t D, int64_t r, double* acc) {
    const T *p = px + o, *q = pg + o, *wr = pw + goff[r];
    double* aw = acc + goff[r];
    const double rs = rms_scale(p, D, eps);
    // dw += g⊙y; dx = r·(g⊙w − y·mean(g⊙w⊙y))
    const double m = vsum(D, [&](int64_t i, auto t) {
                       const auto y = ld(p, i, t) * rs, gi = ld(q, i, t);
                       acc_add(aw, i, gi * y, t);
                       return gi * ld(wr, i, t) * y;
                     }) / double(D);
    vfor(D, [&](int64_t i, auto t) { st(pdx + o, i, rs * (ld(q, i, t) * ld(wr, i, t) - ld(p, i, t) * rs * m), t); });
  });
}

template <class T>
void ln_l2_grad_t(const Tensor& out, const Tensor& z, const Tensor& tg, const Tensor& gamma, const Tensor& beta,
                  const int64_t* goff, double eps) {
  const T *pz = z.data<T>(), *pt = tg.data<T>(), *pgam = gamma.data<T>(), *pbet = beta.data<T>();
  T* po = out.data<T>();
  const int64_t D = z.shape().back();
  for_rows(z, [&](int64_t o, int64_t) {
    rows::ln_l2_grad(pz + o, pt + o, pgam + goff[o / D], pbet + goff[o / D], po + o, D, eps,
                     scratch(rows::kLnL2GradScratch * D));
  });
}

template <class T>
void ln_l2_grad_vjp_t(const Tensor& dz, const Tensor& dt, const Tensor& dgamma, const Tensor& dbeta, const Tensor& z,
                      const Tensor& tg, const Tensor& gamma, const Tensor& beta, const Tensor& w, const int64_t* goff,
                      double eps) {
  const T *pz = z.data<T>(), *pt = tg.data<T>(), *pgam = gamma.data<T>(), *pbet = beta.data<T>(), *pw = w.data<T>();
  T *pdz = dz.data<T>(), *pdt = dt.data<T>();
  const int64_t P = gamma.numel();
  rows_into<T>(z, P, {dgamma.data<T>(), dbeta.data<T>()}, [&](int64_t o, int64_t D, int64_t row, double* acc) {
    rows::ln_l2_grad_vjp(pz + o, pt + o, pgam + goff[row], pbet + goff[row], pw + o, pdz + o, pdt + o,
                         acc + goff[row], acc + P + goff[row], D, eps, scratch(rows::kLnL2GradVjpScratch * D));
  });
}

}  // namespace

void layer_norm_affine(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const RowOffsets& ro, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_affine", [&] { layer_norm_affine_t<scalar_t>(out, x, gamma, beta, ro.goff.data(), eps); });
}
void layer_norm_affine_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                const Tensor& gamma, const Tensor& g, const RowOffsets& ro, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_affine_backward",
                        [&] { layer_norm_affine_backward_t<scalar_t>(dx, dgamma, dbeta, x, gamma, g, ro.goff.data(), eps); });
}
void rms_norm_affine(const Tensor& out, const Tensor& x, const Tensor& w, const RowOffsets& ro, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rms_norm_affine", [&] { rms_norm_affine_t<scalar_t>(out, x, w, ro.goff.data(), eps); });
}
void rms_norm_affine_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                              const RowOffsets& ro, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rms_norm_affine_backward",
                        [&] { rms_norm_affine_backward_t<scalar_t>(dx, dw, x, w, g, ro.goff.data(), eps); });
}
void ln_l2_grad(const Tensor& out, const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                const RowOffsets& ro, double eps) {
  PONDER_DISPATCH_FLOAT(z.dtype(), "ln_l2_grad", [&] { ln_l2_grad_t<scalar_t>(out, z, t, gamma, beta, ro.goff.data(), eps); });
}
void ln_l2_grad_vjp(const Tensor& dz, const Tensor& dt, const Tensor& dgamma, const Tensor& dbeta, const Tensor& z,
                    const Tensor& t, const Tensor& gamma, const Tensor& beta, const Tensor& w, const RowOffsets& ro,
                    double eps) {
  PONDER_DISPATCH_FLOAT(z.dtype(), "ln_l2_grad_vjp",
                        [&] { ln_l2_grad_vjp_t<scalar_t>(dz, dt, dgamma, dbeta, z, t, gamma, beta, w, ro.goff.data(), eps); });
}

void layer_norm_rows(const Tensor& out, const Tensor& x, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_rows", [&] { layer_norm_rows_t<scalar_t>(out, x, eps); });
}
void layer_norm_backward(const Tensor& out, const Tensor& x, const Tensor& v, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_backward", [&] { layer_norm_backward_t<scalar_t>(out, x, v, eps); });
}
void layer_norm_vjp(const Tensor& dx, const Tensor& dv, const Tensor& x, const Tensor& v, const Tensor& dz,
                    double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_vjp", [&] { layer_norm_vjp_t<scalar_t>(dx, dv, x, v, dz, eps); });
}
void rms_norm_rows(const Tensor& out, const Tensor& x, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rms_norm_rows", [&] { rms_norm_rows_t<scalar_t>(out, x, eps); });
}
void rms_norm_backward(const Tensor& out, const Tensor& x, const Tensor& g, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rms_norm_backward", [&] { rms_norm_backward_t<scalar_t>(out, x, g, eps); });
}

}  // namespace ponder::cpu
