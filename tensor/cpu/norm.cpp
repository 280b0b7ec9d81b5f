// Fused row kernels over the last axis (tensor/backend.h): layer norm, its backward and the VJP of that
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

namespace ponder::cpu {
namespace {

// Rows are processed four elements at a time in double-precision vectors (AVX2: one instruction each),
// with a scalar tail; a lambda written for `auto` operands serves both. Sums keep two vector
// accumulators and fold them in a fixed order.
using vd = double __attribute__((vector_size(32)));
using vf4 = float __attribute__((vector_size(16)));
struct Vec {};
struct One {};

template <class T>
vd ld(const T* p, int64_t i, Vec) {
  if constexpr (std::is_same_v<T, double>) {
    vd v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  } else {
    vf4 f;
    std::memcpy(&f, p + i, sizeof f);
    return __builtin_convertvector(f, vd);
  }
}
template <class T>
double ld(const T* p, int64_t i, One) {
  return double(p[i]);
}
template <class T>
void st(T* p, int64_t i, vd v, Vec) {
  if constexpr (std::is_same_v<T, double>) {
    std::memcpy(p + i, &v, sizeof v);
  } else {
    const vf4 f = __builtin_convertvector(v, vf4);
    std::memcpy(p + i, &f, sizeof f);
  }
}
template <class T>
void st(T* p, int64_t i, double v, One) {
  p[i] = T(v);
}

// Σ_i f(i) over a row, f(i, Vec{}) giving elements i..i+3 and f(i, One{}) element i.
template <class F>
double vsum(int64_t D, F f) {
  vd a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= D; i += 8) {
    a += f(i, Vec{});
    b += f(i + 4, Vec{});
  }
  for (; i + 4 <= D; i += 4) a += f(i, Vec{});
  a += b;
  double t = (a[0] + a[1]) + (a[2] + a[3]);
  for (; i < D; ++i) t += f(i, One{});
  return t;
}

// f(i, Vec{}) and f(i, One{}) over a row, for writes.
template <class F>
void vfor(int64_t D, F f) {
  int64_t i = 0;
  for (; i + 4 <= D; i += 4) f(i, Vec{});
  for (; i < D; ++i) f(i, One{});
}

// Runs fn(offset, D) over the rows of a (…, D) tensor, in parallel when the tensor is large.
template <class Fn>
void for_rows(const Tensor& x, Fn fn) {
  const int64_t D = x.shape().back(), rows = D ? x.numel() / D : 0;
#pragma omp parallel for schedule(static) if (rows > 1 && x.numel() >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) fn(r * D, D);
}

// Mean and 1/sqrt(var + eps) of one row.
template <class T>
void ln_stats(const T* p, int64_t D, double eps, double& mu, double& s) {
  mu = vsum(D, [&](int64_t i, auto t) { return ld(p, i, t); }) / double(D);
  const double var = vsum(D, [&](int64_t i, auto t) {
    const auto c = ld(p, i, t) - mu;
    return c * c;
  });
  s = 1.0 / std::sqrt(var / double(D) + eps);
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
    const double m1 = vsum(D, [&](int64_t i, auto t) { return ld(q, i, t); }) / double(D);
    const double m2 = vsum(D, [&](int64_t i, auto t) { return ld(q, i, t) * ((ld(p, i, t) - mu) * s); }) / double(D);
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
    const double m1 = vsum(D, [&](int64_t i, auto t) { return ld(q, i, t); }) / double(D);
    const double m2 = vsum(D, [&](int64_t i, auto t) { return ld(q, i, t) * xh(i, t); }) / double(D);
    auto z = [&](int64_t i, auto t) { return s * (ld(q, i, t) - m1 - xh(i, t) * m2); };
    const double a = vsum(D, [&](int64_t i, auto t) { return ld(g, i, t); }) / double(D);
    const double b = vsum(D, [&](int64_t i, auto t) { return ld(g, i, t) * xh(i, t); }) / double(D);
    const double c = vsum(D, [&](int64_t i, auto t) { return ld(g, i, t) * z(i, t); }) / double(D);
    // dv = s·(dz − a − x̂·b);  dx̂ = −s·(m2·dz + b·v);  dx = s·(dx̂ − mean dx̂ − x̂·mean(dx̂⊙x̂)) − s·c·x̂
    auto dxh = [&](int64_t i, auto t) { return -s * (m2 * ld(g, i, t) + b * ld(q, i, t)); };
    const double e = vsum(D, dxh) / double(D);
    const double f = vsum(D, [&](int64_t i, auto t) { return dxh(i, t) * xh(i, t); }) / double(D);
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
// fixed blocks of kRowBlock rows, each with its own double accumulators, added up in block order.

constexpr int64_t kRowBlock = 32;

// fn(row offset o, D, row r, acc) for every row, acc = n_acc·P doubles of the row's block; then
// outs[k][j] = Σ_blocks acc_block[k·P + j].
template <class T, class Fn>
void rows_into(const Tensor& x, int64_t P, std::initializer_list<T*> outs, Fn fn) {
  const int64_t D = x.shape().back(), rows = D ? x.numel() / D : 0;
  const int64_t blocks = (rows + kRowBlock - 1) / kRowBlock, n_acc = int64_t(outs.size());
  std::vector<double> part(size_t(std::max<int64_t>(blocks, 1) * n_acc * P), 0.0);
#pragma omp parallel for schedule(static) if (blocks > 1 && x.numel() >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    double* acc = part.data() + blk * n_acc * P;
    for (int64_t r = blk * kRowBlock; r < std::min(rows, (blk + 1) * kRowBlock); ++r) fn(r * D, D, r, acc);
  }
  int64_t k = 0;
  for (T* out : outs) {
    for (int64_t j = 0; j < P; ++j) {
      double sum = 0;
      for (int64_t blk = 0; blk < blocks; ++blk) sum += part[size_t((blk * n_acc + k) * P + j)];
      out[j] = T(sum);
    }
    ++k;
  }
}

// acc[i] += v over a row, for the vector and the scalar step.
inline void acc_add(double* acc, int64_t i, vd v, Vec) {
  vd a;
  std::memcpy(&a, acc + i, sizeof a);
  a += v;
  std::memcpy(acc + i, &a, sizeof a);
}
inline void acc_add(double* acc, int64_t i, double v, One) { acc[i] += v; }

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
    const T *p = px + o, *gm = pgam + goff[o / D], *bt = pbet + goff[o / D];
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, ld(gm, i, t) * ((ld(p, i, t) - mu) * s) + ld(bt, i, t), t); });
  });
}

template <class T>
void layer_norm_affine_backward_t(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                  const Tensor& gamma, const Tensor& g, const int64_t* goff, double eps) {
  const T *px = x.data<T>(), *pgam = gamma.data<T>(), *pg = g.data<T>();
  T* pdx = dx.data<T>();
  const int64_t P = gamma.numel();
  rows_into<T>(x, P, {dgamma.data<T>(), dbeta.data<T>()}, [&](int64_t o, int64_t D, int64_t r, double* acc) {
    const T *p = px + o, *q = pg + o, *gm = pgam + goff[r];
    double* ag = acc + goff[r];
    double* ab = acc + P + goff[r];
    double* xh = scratch(2 * D);
    double* gg = xh + D;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    // x̂ and g⊙γ kept; dγ += g⊙x̂, dβ += g
    vfor(D, [&](int64_t i, auto t) {
      const auto h = (ld(p, i, t) - mu) * s, gi = ld(q, i, t);
      st(xh, i, h, t);
      st(gg, i, gi * ld(gm, i, t), t);
      acc_add(ag, i, gi * h, t);
      acc_add(ab, i, gi, t);
    });
    const double m1 = vsum(D, [&](int64_t i, auto t) { return ld(gg, i, t); }) / double(D);
    const double m2 = vsum(D, [&](int64_t i, auto t) { return ld(gg, i, t) * ld(xh, i, t); }) / double(D);
    vfor(D, [&](int64_t i, auto t) { st(pdx + o, i, s * (ld(gg, i, t) - m1 - ld(xh, i, t) * m2), t); });
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
    const T *p = pz + o, *q = pt + o, *gm = pgam + goff[o / D], *bt = pbet + goff[o / D];
    double* xh = scratch(2 * D);
    double* gy = xh + D;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    vfor(D, [&](int64_t i, auto t) {  // x̂ and gy = (γ⊙x̂ + β − t)⊙γ
      const auto h = (ld(p, i, t) - mu) * s, g = ld(gm, i, t);
      st(xh, i, h, t);
      st(gy, i, (g * h + ld(bt, i, t) - ld(q, i, t)) * g, t);
    });
    const double m1 = vsum(D, [&](int64_t i, auto t) { return ld(gy, i, t); }) / double(D);
    const double m2 = vsum(D, [&](int64_t i, auto t) { return ld(gy, i, t) * ld(xh, i, t); }) / double(D);
    vfor(D, [&](int64_t i, auto t) { st(po + o, i, s * (ld(gy, i, t) - m1 - ld(xh, i, t) * m2), t); });
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
    const T *p = pz + o, *q = pt + o, *gm = pgam + goff[row], *bt = pbet + goff[row], *wr = pw + o;
    double* ag = acc + goff[row];
    double* ab = acc + P + goff[row];
    double* xh = scratch(5 * D);
    double *rr = xh + D, *gy = xh + 2 * D, *dg = xh + 3 * D, *dx = xh + 4 * D;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    // x̂, r = γ⊙x̂ + β − t and gy = r⊙γ, kept for the passes below
    vfor(D, [&](int64_t i, auto t) {
      const auto h = (ld(p, i, t) - mu) * s;
      const auto ri = ld(gm, i, t) * h + ld(bt, i, t) - ld(q, i, t);
      st(xh, i, h, t);
      st(rr, i, ri, t);
      st(gy, i, ri * ld(gm, i, t), t);
    });
    const double m1 = vsum(D, [&](int64_t i, auto t) { return ld(gy, i, t); }) / double(D);
    const double m2 = vsum(D, [&](int64_t i, auto t) { return ld(gy, i, t) * ld(xh, i, t); }) / double(D);
    const double a = vsum(D, [&](int64_t i, auto t) { return ld(wr, i, t); }) / double(D);
    const double b = vsum(D, [&](int64_t i, auto t) { return ld(wr, i, t) * ld(xh, i, t); }) / double(D);
    // c = mean(w⊙out), out = s·(gy − m1 − x̂·m2) the forward result
    const double c = vsum(D, [&](int64_t i, auto t) {
                       return ld(wr, i, t) * (s * (ld(gy, i, t) - m1 - ld(xh, i, t) * m2));
                     }) / double(D);
    // dgy = s·(w − a − x̂·b); dx̂ = −s·(m2·w + b·gy) + dgy⊙γ²
    vfor(D, [&](int64_t i, auto t) {
      const auto g = ld(gm, i, t), wi = ld(wr, i, t);
      const auto d = s * (wi - a - ld(xh, i, t) * b);
      st(dg, i, d, t);
      st(dx, i, -s * (m2 * wi + b * ld(gy, i, t)) + d * g * g, t);
    });
    const double e = vsum(D, [&](int64_t i, auto t) { return ld(dx, i, t); }) / double(D);
    const double f = vsum(D, [&](int64_t i, auto t) { return ld(dx, i, t) * ld(xh, i, t); }) / double(D);
    // dz = s·(dx̂ − mean dx̂ − x̂·mean(dx̂⊙x̂)) − s·c·x̂; dt = −dgy⊙γ; dγ += dgy⊙(r + γ⊙x̂); dβ += dgy⊙γ
    vfor(D, [&](int64_t i, auto t) {
      const auto h = ld(xh, i, t), g = ld(gm, i, t), d = ld(dg, i, t);
      st(pdz + o, i, s * (ld(dx, i, t) - e - h * f) - s * c * h, t);
      st(pdt + o, i, -(d * g), t);
      acc_add(ag, i, d * (ld(rr, i, t) + g * h), t);
      acc_add(ab, i, d * g, t);
    });
  });
}

}  // namespace

void layer_norm_affine(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const int64_t* goff, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_affine", [&] { layer_norm_affine_t<scalar_t>(out, x, gamma, beta, goff, eps); });
}
void layer_norm_affine_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                const Tensor& gamma, const Tensor& g, const int64_t* goff, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_affine_backward",
                        [&] { layer_norm_affine_backward_t<scalar_t>(dx, dgamma, dbeta, x, gamma, g, goff, eps); });
}
void rms_norm_affine(const Tensor& out, const Tensor& x, const Tensor& w, const int64_t* goff, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rms_norm_affine", [&] { rms_norm_affine_t<scalar_t>(out, x, w, goff, eps); });
}
void rms_norm_affine_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                              const int64_t* goff, double eps) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rms_norm_affine_backward",
                        [&] { rms_norm_affine_backward_t<scalar_t>(dx, dw, x, w, g, goff, eps); });
}
void ln_l2_grad(const Tensor& out, const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                const int64_t* goff, double eps) {
  PONDER_DISPATCH_FLOAT(z.dtype(), "ln_l2_grad", [&] { ln_l2_grad_t<scalar_t>(out, z, t, gamma, beta, goff, eps); });
}
void ln_l2_grad_vjp(const Tensor& dz, const Tensor& dt, const Tensor& dgamma, const Tensor& dbeta, const Tensor& z,
                    const Tensor& t, const Tensor& gamma, const Tensor& beta, const Tensor& w, const int64_t* goff,
                    double eps) {
  PONDER_DISPATCH_FLOAT(z.dtype(), "ln_l2_grad_vjp",
                        [&] { ln_l2_grad_vjp_t<scalar_t>(dz, dt, dgamma, dbeta, z, t, gamma, beta, w, goff, eps); });
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
