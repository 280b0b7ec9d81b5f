// Fused row kernels over the last axis (tensor/backend.h): layer norm, its backward and the VJP of that
// backward, RMS norm and its backward. Each row is handled by one thread in double precision, with sums
// taken over four interleaved lanes in a fixed order, so results do not depend on the thread count.
// tensor/kernels.cpp keeps the same maps composed of primitive kernels beside them (and tests compare).
#include <cmath>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"

namespace ponder::cpu {
namespace {

constexpr int kL = 4;  // lanes per running sum

double fold(const double* a) { return (a[0] + a[1]) + (a[2] + a[3]); }

// Runs fn(row) over the rows of a (…, D) tensor, in parallel when the tensor is large.
template <class Fn>
void for_rows(const Tensor& x, Fn fn) {
  const int64_t D = x.shape().back(), rows = D ? x.numel() / D : 0;
#pragma omp parallel for schedule(static) if (rows > 1 && x.numel() >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) fn(r * D, D);
}

// Mean and 1/sqrt(var + eps) of one row.
template <class T>
void ln_stats(const T* p, int64_t D, double eps, double& mu, double& s) {
  double a[kL] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kL <= D; i += kL)
    for (int j = 0; j < kL; ++j) a[j] += double(p[i + j]);
  for (int j = 0; i < D; ++i, ++j) a[j] += double(p[i]);
  mu = fold(a) / double(D);
  double q[kL] = {0, 0, 0, 0};
  i = 0;
  for (; i + kL <= D; i += kL)
    for (int j = 0; j < kL; ++j) {
      const double c = double(p[i + j]) - mu;
      q[j] += c * c;
    }
  for (int j = 0; i < D; ++i, ++j) {
    const double c = double(p[i]) - mu;
    q[j] += c * c;
  }
  s = 1.0 / std::sqrt(fold(q) / double(D) + eps);
}

// Σ f(i) over a row, with f giving one double per index.
template <class F>
double row_sum(int64_t D, F f) {
  double a[kL] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + kL <= D; i += kL)
    for (int j = 0; j < kL; ++j) a[j] += f(i + j);
  for (int j = 0; i < D; ++i, ++j) a[j] += f(i);
  return fold(a);
}

template <class T>
void layer_norm_rows_t(const Tensor& out, const Tensor& x, double eps) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T* p = px + o;
    double mu, s;
    ln_stats(p, D, eps, mu, s);
    for (int64_t i = 0; i < D; ++i) po[o + i] = T((double(p[i]) - mu) * s);
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
    const double m1 = row_sum(D, [&](int64_t i) { return double(q[i]); }) / double(D);
    const double m2 = row_sum(D, [&](int64_t i) { return double(q[i]) * (double(p[i]) - mu) * s; }) / double(D);
    for (int64_t i = 0; i < D; ++i) po[o + i] = T(s * (double(q[i]) - m1 - (double(p[i]) - mu) * s * m2));
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
    auto xh = [&](int64_t i) { return (double(p[i]) - mu) * s; };
    const double m1 = row_sum(D, [&](int64_t i) { return double(q[i]); }) / double(D);
    const double m2 = row_sum(D, [&](int64_t i) { return double(q[i]) * xh(i); }) / double(D);
    auto z = [&](int64_t i) { return s * (double(q[i]) - m1 - xh(i) * m2); };
    const double a = row_sum(D, [&](int64_t i) { return double(g[i]); }) / double(D);
    const double b = row_sum(D, [&](int64_t i) { return double(g[i]) * xh(i); }) / double(D);
    const double c = row_sum(D, [&](int64_t i) { return double(g[i]) * z(i); }) / double(D);
    // dv = s·(dz − a − x̂·b);  dx̂ = −s·(m2·dz + b·v);  dx = s·(dx̂ − mean dx̂ − x̂·mean(dx̂⊙x̂)) − s·c·x̂
    auto dxh = [&](int64_t i) { return -s * (m2 * double(g[i]) + b * double(q[i])); };
    const double e = row_sum(D, dxh) / double(D);
    const double f = row_sum(D, [&](int64_t i) { return dxh(i) * xh(i); }) / double(D);
    for (int64_t i = 0; i < D; ++i) {
      pdv[o + i] = T(s * (double(g[i]) - a - xh(i) * b));
      pdx[o + i] = T(s * (dxh(i) - e - xh(i) * f) - s * c * xh(i));
    }
  });
}

template <class T>
double rms_scale(const T* p, int64_t D, double eps) {
  return 1.0 / std::sqrt(row_sum(D, [&](int64_t i) { return double(p[i]) * double(p[i]); }) / double(D) + eps);
}

template <class T>
void rms_norm_rows_t(const Tensor& out, const Tensor& x, double eps) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T* p = px + o;
    const double r = rms_scale(p, D, eps);
    for (int64_t i = 0; i < D; ++i) po[o + i] = T(double(p[i]) * r);
  });
}

template <class T>
void rms_norm_backward_t(const Tensor& out, const Tensor& x, const Tensor& g, double eps) {
  const T *px = x.data<T>(), *pg = g.data<T>();
  T* po = out.data<T>();
  for_rows(x, [&](int64_t o, int64_t D) {
    const T *p = px + o, *q = pg + o;
    const double r = rms_scale(p, D, eps);
    const double m = row_sum(D, [&](int64_t i) { return double(q[i]) * double(p[i]) * r; }) / double(D);
    for (int64_t i = 0; i < D; ++i) po[o + i] = T(r * (double(q[i]) - double(p[i]) * r * m));
  });
}

}  // namespace

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
