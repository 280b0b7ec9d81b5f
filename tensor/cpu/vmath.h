// Float32 exp, tanh and the maps built on them (sigmoid, silu, gelu_tanh) over 8 lanes at a time, with
// GCC/Clang vector extensions: libm's expf and tanhf are scalar calls (5–25 ns each) and dominated the
// SwiGLU and gate activations. Range reduction and polynomials are Cephes' (expf, tanhf), within 2 ulp of
// the correctly rounded value for normal results; exp flushes results below FLT_MIN to 0. NaN and ±inf
// inputs give what std::exp / std::tanh give. A single value goes through the same lanes (one_f32), so
// every layout of a tensor gets the same bits. Float64 kernels keep the library functions.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

namespace ponder::cpu::vmath {

using vf = float __attribute__((vector_size(32)));
using vi = int32_t __attribute__((vector_size(32)));
constexpr int kLanes = 8;

inline vf splat(float v) { return vf{v, v, v, v, v, v, v, v}; }

// IEEE square root of each lane (exact, as std::sqrt).
inline vf sqrt_v(vf x) {
#if defined(__AVX__)
  return __builtin_ia32_sqrtps256(x);
#else
  for (int i = 0; i < kLanes; ++i) x[i] = __builtin_sqrtf(x[i]);
  return x;
#endif
}

inline vf exp_v(vf x) {
  const vf lo = splat(-87.3365448f), hi = splat(88.7228390f);  // exp(lo) = FLT_MIN, exp(hi) ≈ FLT_MAX
  const vi below = x < lo, above = x > hi, nan = x != x;
  const vf xc = below ? lo : (above ? hi : x);
  // xc = n·ln2 + r with n = floor(xc·log2(e) + 1/2), |r| ≤ ln2/2; ln2 split in two for an exact n·ln2.
  const vf t = xc * 1.44269504088896341f + 0.5f;
  const vi ti = __builtin_convertvector(t, vi);                   // toward zero
  const vi n = ti + (__builtin_convertvector(ti, vf) > t);       // floor: minus 1 where truncation rounded up
  const vf nf = __builtin_convertvector(n, vf);
  vf r = xc - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const vf y = p * r * r + r + 1.0f;
  // 2^n as two factors 2^(n/2)·2^(n−n/2): n runs from −126 to 128, beyond one float exponent.
  const vi n1 = n >> 1, n2 = n - n1;
  vf v = y * (vf)((n1 + 127) << 23) * (vf)((n2 + 127) << 23);
  v = below ? splat(0.0f) : v;
  v = above ? splat(std::numeric_limits<float>::infinity()) : v;
  return nan ? x : v;
}

inline vf tanh_v(vf x) {
  const vi neg = x < 0.0f;
  const vf ax = neg ? -x : x;
  // |x| < 0.625: odd polynomial; otherwise 1 − 2/(e^{2|x|} + 1) with the sign put back (tanh(10) rounds to 1).
  const vf z = x * x;
  vf p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const vf small = p * z * x + x;
  const vf e = exp_v(2.0f * (ax < 10.0f ? ax : splat(10.0f)));
  const vf mag = 1.0f - 2.0f / (e + 1.0f);
  const vf large = neg ? -mag : mag;
  vf v = ax < 0.625f ? small : large;
  v = ax == 0.0f ? x : v;  // keeps the sign of zero
  return x != x ? x : v;
}

inline vf sigmoid_v(vf x) { return 1.0f / (1.0f + exp_v(-x)); }
inline vf silu_v(vf x) { return x / (1.0f + exp_v(-x)); }
// 0.5·x·(1 + tanh(u)) = x·σ(2u): the same function without the cancellation of 1 + tanh(u) for u ≪ 0.
inline vf gelu_tanh_v(vf x) {
  const float c2 = 2 * 0.7978845608028654f;  // 2·sqrt(2/pi)
  return x / (1.0f + exp_v(-c2 * (x + 0.044715f * x * x * x)));
}

// d/dx gelu_tanh = σ(2u) + 2x·σ(2u)(1 − σ(2u))·u', u = c(x + a·x³), u' = c(1 + 3a·x²): the usual
// ½(1 + tanh u) + ½x(1 − tanh² u)·u' with 1 + tanh u = 2σ(2u), which does not cancel for u ≪ 0.
inline vf gelu_tanh_grad_v(vf x) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  const vf x2 = x * x;
  const vf s = sigmoid_v(2.0f * c * (x + a * x2 * x));
  return s + 2.0f * x * s * (1.0f - s) * (c * (1.0f + 3.0f * a * x2));
}
// gelu_tanh(x) and its derivative from one sigmoid (the two maps above, sharing σ(2u)).
inline vf gelu_tanh_and_grad_v(vf x, vf& d) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  const vf x2 = x * x;
  const vf s = sigmoid_v(2.0f * c * (x + a * x2 * x));
  d = s + 2.0f * x * s * (1.0f - s) * (c * (1.0f + 3.0f * a * x2));
  return x * s;
}
// d²/dx² gelu_tanh = (1 − tanh² u)·(u' − x·tanh u·u'² + 3ca·x²) (autograd/ops_elementwise.cpp), with tanh u = 2σ(2u) − 1
// and 1 − tanh² u = 4σ(2u)(1 − σ(2u)).
inline vf gelu_tanh_grad2_v(vf x) {
  const float c = 0.7978845608028654f, a = 0.044715f;
  const vf x2 = x * x;
  const vf s = sigmoid_v(2.0f * c * (x + a * x2 * x)), du = c * (1.0f + 3.0f * a * x2);
  return 4.0f * s * (1.0f - s) * (du - x * (2.0f * s - 1.0f) * du * du + 3.0f * c * a * x2);
}
// d/dx silu = σ(x)·(1 + x·(1 − σ(x))).
inline vf silu_grad_v(vf x) {
  const vf s = sigmoid_v(x);
  return s * (1.0f + x * (1.0f - s));
}
// silu(x) and its derivative from one exp: the same operations as silu_v and silu_grad_v (which both divide by
// 1 + exp(−x)), so the same bits, for half the exps.
inline vf silu_and_grad_v(vf x, vf& d) {
  const vf e1 = 1.0f + exp_v(-x), s = 1.0f / e1;
  d = s * (1.0f + x * (1.0f - s));
  return x / e1;
}

// The first m ≤ 8 floats at p in a vector (zeros after them), and back.
// (A full block is one fixed-size copy, a single vector move; a variable size would copy element by element.)
inline vf load_n(const float* p, int64_t m) {
  vf v = splat(0.0f);
  if (m == kLanes) {
    std::memcpy(&v, p, sizeof v);
  } else {
    std::memcpy(&v, p, size_t(m) * sizeof(float));
  }
  return v;
}
inline void store_n(float* p, vf v, int64_t m) {
  if (m == kLanes) {
    std::memcpy(p, &v, sizeof v);
  } else {
    std::memcpy(p, &v, size_t(m) * sizeof(float));
  }
}
// f(i, m) for the blocks of m ≤ 8 lanes that cover [0, n), 8 at a time.
template <class F>
void blocks(int64_t n, F f) {
  for (int64_t i = 0; i < n; i += kLanes) f(i, n - i < kLanes ? n - i : int64_t(kLanes));
}

// y[i] = f(x[i]) for n contiguous floats, 8 at a time; the tail goes through a zero-padded vector.
template <class F>
void map_f32(float* y, const float* x, int64_t n, F f) {
  blocks(n, [&](int64_t i, int64_t m) { store_n(y + i, f(load_n(x + i, m)), m); });
}

template <class F>
float one_f32(float x, F f) {
  return f(splat(x))[0];
}

}  // namespace ponder::cpu::vmath
