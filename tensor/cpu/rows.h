// Row computations shared by the fused row kernels (tensor/cpu/norm.cpp) and the fused TTT dual form
// (tensor/cpu/ttt_dual.cpp): one home for each row formula, in double precision over interleaved lanes with a fixed
// order of summation, so results do not depend on the thread count or on which kernel calls them.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ponder::cpu::rows {

// Rows are processed kLanes = 8 elements at a time in double-precision vectors (AVX-512: one instruction each;
// two AVX2 ones elsewhere), with a scalar tail; a lambda written for `auto` operands serves both. Sums keep two
// vector accumulators and fold them in a fixed order, so a build's results do not depend on the thread count.
// Builds for different instruction sets may differ in the last bits: GCC contracts a·b + c into one FMA where the
// target's code allows, and that differs between AVX-512 and AVX2 code (with -ffp-contract=off they agree).
constexpr int64_t kLanes = 8;
using vd = double __attribute__((vector_size(8 * kLanes)));
using vf = float __attribute__((vector_size(4 * kLanes)));
struct Vec {};
struct One {};

template <class T>
vd ld(const T* p, int64_t i, Vec) {
  if constexpr (std::is_same_v<T, double>) {
    vd v;
    std::memcpy(&v, p + i, sizeof v);
    return v;
  } else {
#if defined(__AVX512F__)  // one conversion; GCC splits __builtin_convertvector into four, with shuffles
    // The masked form with all lanes on compiles to the same vcvtps2pd; GCC 12's plain _mm512_cvtps_pd starts
    // from an undefined register and warns (-Wmaybe-uninitialized) wherever it is inlined.
    return vd(_mm512_mask_cvtps_pd(_mm512_setzero_pd(), __mmask8(0xFF), _mm256_loadu_ps(p + i)));
#else
    vf f;
    std::memcpy(&f, p + i, sizeof f);
    return __builtin_convertvector(f, vd);
#endif
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
#if defined(__AVX512F__)
    _mm256_storeu_ps(p + i, _mm512_mask_cvtpd_ps(_mm256_setzero_ps(), __mmask8(0xFF), __m512d(v)));  // as above
#else
    const vf f = __builtin_convertvector(v, vf);
    std::memcpy(p + i, &f, sizeof f);
#endif
  }
}
template <class T>
void st(T* p, int64_t i, double v, One) {
  p[i] = T(v);
}

// The lanes of a vector added in a fixed tree, ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), by two
// vector additions of shuffled copies (lane by lane GCC emits seven scalar additions and eleven extractions).
inline double fold(vd a) {
  static_assert(kLanes == 8, "the shuffles below pair 8 lanes");
#if defined(__clang__)
  a += __builtin_shufflevector(a, a, 1, 0, 3, 2, 5, 4, 7, 6);  // lane 2k: a[2k] + a[2k + 1]
  a += __builtin_shufflevector(a, a, 2, 3, 0, 1, 6, 7, 4, 5);  // lanes 0 and 4: the two halves' sums
#else
  using vi = int64_t __attribute__((vector_size(8 * kLanes)));
  a += __builtin_shuffle(a, vi{1, 0, 3, 2, 5, 4, 7, 6});
  a += __builtin_shuffle(a, vi{2, 3, 0, 1, 6, 7, 4, 5});
#endif
  return a[0] + a[4];
}

// N sums in one pass over a row: f(i, Vec{}) returns the N terms of elements i..i+kLanes−1 as an array of N
// vectors, f(i, One{}) those of element i as an array of N doubles; f may also write element i's outputs. Each sum
// keeps two vector accumulators, folds them in a fixed tree and adds the scalar tail in order. Rows are short (the
// head size), so reading them once for several sums instead of once per sum is what makes a row kernel fast.
template <size_t N, class F>
std::array<double, N> vsums(int64_t D, F f) {
  vd a[N], b[N];
  for (size_t k = 0; k < N; ++k) a[k] = b[k] = vd{};
  int64_t i = 0;
  for (; i + 2 * kLanes <= D; i += 2 * kLanes) {
    const auto x = f(i, Vec{}), y = f(i + kLanes, Vec{});
    for (size_t k = 0; k < N; ++k) {
      a[k] += x[k];
      b[k] += y[k];
    }
  }
  for (; i + kLanes <= D; i += kLanes) {
    const auto x = f(i, Vec{});
    for (size_t k = 0; k < N; ++k) a[k] += x[k];
  }
  std::array<double, N> t;
  for (size_t k = 0; k < N; ++k) t[k] = fold(a[k] + b[k]);
  for (; i < D; ++i) {
    const auto x = f(i, One{});
    for (size_t k = 0; k < N; ++k) t[k] += x[k];
  }
  return t;
}

// Σ_i f(i) over a row, f(i, Vec{}) giving elements i..i+kLanes−1 and f(i, One{}) element i.
template <class F>
double vsum(int64_t D, F f) {
  return vsums<1>(D, [&](int64_t i, auto t) {
    const auto v = f(i, t);
    return std::array<decltype(v), 1>{v};
  })[0];
}

// f(i, Vec{}) and f(i, One{}) over a row, for writes.
template <class F>
void vfor(int64_t D, F f) {
  int64_t i = 0;
  for (; i + kLanes <= D; i += kLanes) f(i, Vec{});
  for (; i < D; ++i) f(i, One{});
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

// acc[i] += v over a row, for the vector and the scalar step.
inline void acc_add(double* acc, int64_t i, vd v, Vec) {
  vd a;
  std::memcpy(&a, acc + i, sizeof a);
  a += v;
  std::memcpy(acc + i, &a, sizeof a);
}
inline void acc_add(double* acc, int64_t i, double v, One) { acc[i] += v; }


// Scratch each row function needs, in doubles per element of the row.
constexpr int64_t kLnAffineBackwardScratch = 2, kLnL2GradScratch = 2, kLnL2GradVjpScratch = 5;

// out = γ⊙x̂ + β for one row of D.
template <class T>
void ln_affine(const T* p, const T* gm, const T* bt, T* out, int64_t D, double eps) {
  double mu, s;
  ln_stats(p, D, eps, mu, s);
  vfor(D, [&](int64_t i, auto t) { st(out, i, ld(gm, i, t) * ((ld(p, i, t) - mu) * s) + ld(bt, i, t), t); });
}

// dx = layer_norm_backward(x, g⊙γ) for one row; ag += g⊙x̂ and ab += g (dγ, dβ).
template <class T>
void ln_affine_backward(const T* p, const T* gm, const T* q, T* dxo, double* ag, double* ab, int64_t D, double eps,
                        double* xh) {
  double* gg = xh + D;
  double mu, s;
  ln_stats(p, D, eps, mu, s);
  // x̂ and g⊙γ kept; dγ += g⊙x̂, dβ += g
  const auto m = vsums<2>(D, [&](int64_t i, auto t) {  // and the means of g⊙γ and g⊙γ⊙x̂
    const auto h = (ld(p, i, t) - mu) * s, gi = ld(q, i, t), y = gi * ld(gm, i, t);
    st(xh, i, h, t);
    st(gg, i, y, t);
    acc_add(ag, i, gi * h, t);
    acc_add(ab, i, gi, t);
    return std::array<decltype(h), 2>{y, y * h};
  });
  const double m1 = m[0] / double(D), m2 = m[1] / double(D);
  vfor(D, [&](int64_t i, auto t) { st(dxo, i, s * (ld(gg, i, t) - m1 - ld(xh, i, t) * m2), t); });
}

// out = layer_norm_backward(z, (γ⊙x̂ + β − t)⊙γ) for one row: ∂/∂z of ½‖γ⊙x̂ + β − t‖².
template <class T>
void ln_l2_grad(const T* p, const T* q, const T* gm, const T* bt, T* out, int64_t D, double eps, double* xh) {
  double* gy = xh + D;
  double mu, s;
  ln_stats(p, D, eps, mu, s);
  const auto m = vsums<2>(D, [&](int64_t i, auto t) {  // x̂ and gy = (γ⊙x̂ + β − t)⊙γ; Σ gy, Σ gy⊙x̂
    const auto h = (ld(p, i, t) - mu) * s, g = ld(gm, i, t);
    const auto y = (g * h + ld(bt, i, t) - ld(q, i, t)) * g;
    st(xh, i, h, t);
    st(gy, i, y, t);
    return std::array<decltype(h), 2>{y, y * h};
  });
  const double m1 = m[0] / double(D), m2 = m[1] / double(D);
  vfor(D, [&](int64_t i, auto t) { st(out, i, s * (ld(gy, i, t) - m1 - ld(xh, i, t) * m2), t); });
}

// The VJP of ln_l2_grad for one row and upstream w: dz, dt; ag += dγ, ab += dβ.
template <class T>
void ln_l2_grad_vjp(const T* p, const T* q, const T* gm, const T* bt, const T* wr, T* dzo, T* dto, double* ag,
                    double* ab, int64_t D, double eps, double* xh) {
  double *rr = xh + D, *gy = xh + 2 * D, *dg = xh + 3 * D, *dx = xh + 4 * D;
  double mu, s;
  ln_stats(p, D, eps, mu, s);
  // x̂, r = γ⊙x̂ + β − t and gy = r⊙γ, kept for the passes below
  // and the means of gy, gy⊙x̂, w and w⊙x̂
  const auto m = vsums<4>(D, [&](int64_t i, auto t) {
    const auto h = (ld(p, i, t) - mu) * s;
    const auto ri = ld(gm, i, t) * h + ld(bt, i, t) - ld(q, i, t);
    const auto y = ri * ld(gm, i, t), wi = ld(wr, i, t);
    st(xh, i, h, t);
    st(rr, i, ri, t);
    st(gy, i, y, t);
    return std::array<decltype(h), 4>{y, y * h, wi, wi * h};
  });
  const double m1 = m[0] / double(D), m2 = m[1] / double(D), a = m[2] / double(D), b = m[3] / double(D);
  // c = mean(w⊙out), out = s·(gy − m1 − x̂·m2) the forward result
  const double c = vsum(D, [&](int64_t i, auto t) {
                     return ld(wr, i, t) * (s * (ld(gy, i, t) - m1 - ld(xh, i, t) * m2));
                   }) / double(D);
  // dgy = s·(w − a − x̂·b); dx̂ = −s·(m2·w + b·gy) + dgy⊙γ²
  const auto ef = vsums<2>(D, [&](int64_t i, auto t) {  // and the means of dx̂ and dx̂⊙x̂
    const auto g = ld(gm, i, t), wi = ld(wr, i, t), h = ld(xh, i, t);
    const auto d = s * (wi - a - h * b);
    const auto x = -s * (m2 * wi + b * ld(gy, i, t)) + d * g * g;
    st(dg, i, d, t);
    st(dx, i, x, t);
    return std::array<decltype(h), 2>{x, x * h};
  });
  const double e = ef[0] / double(D), f = ef[1] / double(D);
  // dz = s·(dx̂ − mean dx̂ − x̂·mean(dx̂⊙x̂)) − s·c·x̂; dt = −dgy⊙γ; dγ += dgy⊙(r + γ⊙x̂); dβ += dgy⊙γ
  vfor(D, [&](int64_t i, auto t) {
    const auto h = ld(xh, i, t), g = ld(gm, i, t), d = ld(dg, i, t);
    st(dzo, i, s * (ld(dx, i, t) - e - h * f) - s * c * h, t);
    st(dto, i, -(d * g), t);
    acc_add(ag, i, d * (ld(rr, i, t) + g * h), t);
    acc_add(ab, i, d * g, t);
  });
}

}  // namespace ponder::cpu::rows
