// The body of the CUDA TTT-MLP dual-form kernels (tensor/cuda/ttt_mlp_dual.cu): one head per thread block, as
// phases with a block barrier after each, written like the TTT-Linear body (tensor/cuda/ttt_dual_body.h, whose row
// stages and loops it shares). Plain C++ with PONDER_HD, so tests/test_cuda.cpp runs the phases thread by thread on
// the CPU and compares them with the CPU kernel (tensor/cpu/ttt_mlp_dual.cpp) in float64 on any machine. The steps
// are the CPU kernel's, one phase per step that reads what an earlier step wrote; a head's intermediates live in
// global memory (at the 125M shape, f 64 and h 256, one head's W1 and W2 alone are 128 KB in float32).
//
// Shapes per head: W1 (f, h), b1 (h), W2 (h, f), b2 (f), q, k, v (b, f), η (b, b), all contiguous; the saved
// intermediates in tensor/backend.h's kMlpDualSaved order: Z1, X2 = gelu(Z1), D1 = gelu'(Z1), P = G2·W2ᵀ, G1 = P⊙D1,
// Zb1, Xb2 = gelu(Zb1), Db1 = gelu'(Zb1) (b, h); Z2, G2, Zb2 (b, f); S1 = q·kᵀ, S2 = Xb2·X2ᵀ (b, b).
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/cuda/row_geom.h"
#include "tensor/cuda/ttt_dual_body.h"

namespace ponder::cuda::mlp {

using dual::chunks;
using dual::kSlots;

PONDER_HD constexpr int64_t saved_size(int64_t b, int64_t f, int64_t h) { return 8 * b * h + 3 * b * f + 2 * b * b; }
// Scratch per head in T: t, dzb2, dg2, dz2, dpx1 (b, f); E, M1, M2, dM (b, b); dxb2, dx2, dg1, tmp, dpx2 (b, h); and
// the saved intermediates' place when the backward recomputes them.
PONDER_HD constexpr int64_t scratch_t(int64_t b, int64_t f, int64_t h, bool saved) {
  return 5 * b * f + 4 * b * b + 5 * b * h + (saved ? 0 : saved_size(b, f, h));
}
// Doubles per head: the row stages' partial sums, the rows' γ offsets, per-row dγ, dβ terms (b, f) and the two
// updates' sums for η's last row (2b).
PONDER_HD constexpr int64_t scratch_d(int64_t b, int64_t f) { return kSlots * b * chunks(f) + b + 2 * b * f + 2 * b; }

// gelu_tanh and its first two derivatives (autograd/ops_elementwise.cpp's formulas), in double.
PONDER_HD inline double gelu_t(double x) { return ::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)); }
PONDER_HD inline double gelu0(double x) { return 0.5 * x * (1 + gelu_t(x)); }
PONDER_HD inline double gelu1(double x) {
  const double t = gelu_t(x);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}
PONDER_HD inline double gelu2(double x) {
  const double c = 0.7978845608028654, a = 0.044715, t = gelu_t(x), du = c * (1 + 3 * a * x * x);
  return (1 - t * t) * (du - x * t * du * du + 3 * c * a * x * x);
}

// The launch's operands (G heads, each contiguous), flat; the phases find head g's part.
template <class T>
struct Args {
  const T *W1, *b1, *W2, *b2, *q, *k, *v, *eta, *gamma, *beta;
  T* saved;      // (G, saved_size): written by the forward; null in a backward that recomputes them
  T* scratch;    // (G, scratch_t)
  double* dscr;  // (G, scratch_d)
  RowGeom rows;
  int64_t b, f, h, P;  // P = γ's numel
  double eps;
  T *out, *W1o, *b1o, *W2o, *b2o;                  // forward results
  const T *dO, *dW1u, *db1u, *dW2u, *db2u;         // backward upstream
  T *dW1, *db1, *dW2, *db2, *dq, *dk, *dv, *deta;  // backward results
  double* parts;                                   // (G, 2, P): dγ, dβ of each head, zeroed by the caller
};

// Head g's pointers. b, f, eps, part, roff, rg, rb, gamma and beta are what the row stages read.
template <class T>
struct Head {
  const T *W1, *b1, *W2, *b2, *q, *k, *v, *eta, *gamma, *beta;
  T *z1, *x2, *d1, *p, *g1, *zb1, *xb2, *db1, *z2, *g2, *zb2, *s1, *s2;  // saved
  T *t, *dzb2, *dg2, *dz2, *dpx1, *e, *m1, *m2, *dm, *dxb2, *dx2, *dg1, *tmp, *dpx2;
  double *part, *roff, *rg, *rb, *del;
  int64_t b, f, hw, row0;  // hw: the hidden width h
  double eps;
};

// Points each of the N pointers at the next `len` elements of s; returns where the next would start.
template <class T, int N>
PONDER_HD T* carve(T* s, T** const (&ptrs)[N], int64_t len) {
  for (int i = 0; i < N; ++i) *ptrs[i] = s, s += len;
  return s;
}

template <class T>
PONDER_HD Head<T> head(const Args<T>& a, int64_t g) {
  const int64_t b = a.b, f = a.f, h = a.h;
  Head<T> d;
  d.W1 = a.W1 + g * f * h, d.b1 = a.b1 + g * h, d.W2 = a.W2 + g * h * f, d.b2 = a.b2 + g * f;
  d.q = a.q + g * b * f, d.k = a.k + g * b * f, d.v = a.v + g * b * f, d.eta = a.eta + g * b * b;
  d.gamma = a.gamma, d.beta = a.beta;
  T* sc = a.scratch + g * scratch_t(b, f, h, a.saved != nullptr);
  T* sv = a.saved ? a.saved + g * saved_size(b, f, h) : sc + (5 * b * f + 4 * b * b + 5 * b * h);
  T** const bh[8] = {&d.z1, &d.x2, &d.d1, &d.p, &d.g1, &d.zb1, &d.xb2, &d.db1};
  T** const bf[3] = {&d.z2, &d.g2, &d.zb2};
  T** const bb[2] = {&d.s1, &d.s2};
  carve(carve(carve(sv, bh, b * h), bf, b * f), bb, b * b);
  T** const sf[5] = {&d.t, &d.dzb2, &d.dg2, &d.dz2, &d.dpx1};
  T** const sb[4] = {&d.e, &d.m1, &d.m2, &d.dm};
  T** const sh[5] = {&d.dxb2, &d.dx2, &d.dg1, &d.tmp, &d.dpx2};
  carve(carve(carve(sc, sf, b * f), sb, b * b), sh, b * h);
  double* x = a.dscr + g * scratch_d(b, f);
  d.part = x;
  d.roff = x + kSlots * b * chunks(f);
  d.rg = d.roff + b;
  d.rb = d.rg + b * f;
  d.del = d.rb + b * f;
  d.b = b, d.f = f, d.hw = h, d.row0 = g * b, d.eps = a.eps;
  return d;
}

// store(i, c, init(i, c) + Σ_k a(i, k)·m(k, c)) over a rows × cols grid, K terms each: in k order at one output per
// thread (U = 1), or on the tensor cores where the grid fits their tiles (U = dual::kMma, float32; dual::products).
template <int U, class T, class Init, class A, class M, class Store>
PONDER_HD void prod(int64_t rows, int64_t cols, int64_t K, int tid, int nt, Init init, A a, M m, Store store) {
  static_assert(U == 1 || U == dual::kMma, "TTT-MLP's products run at U = 1 or on the tensor cores");
  dual::products<U, T, 1>(
      rows, cols, K, tid, nt, [&](int64_t i, int64_t c, T* s) { s[0] = init(i, c); },
      [&](int, int64_t i, int64_t k) { return a(i, k); }, [&](int, int64_t k, int64_t c) { return m(k, c); },
      [&](int64_t i, int64_t c, const T* s) { store(i, c, s[0]); });
}
// fn(x) for thread tid's share of x < n.
template <class F>
PONDER_HD void each(int64_t n, int tid, int nt, F fn) {
  for (int64_t x = tid; x < n; x += nt) fn(x);
}

// ---- forward

// t = v − k and E = tril(η); M = E⊙S + E for a given S is m_from's.
template <class T>
PONDER_HD void cheap_parts(const Head<T>& d, int tid, int nt) {
  const int64_t b = d.b;
  each(b * d.f, tid, nt, [&](int64_t x) { d.t[x] = d.v[x] - d.k[x]; });
  each(b * b, tid, nt, [&](int64_t x) { d.e[x] = x % b <= x / b ? d.eta[x] : T(0); });
}
template <class T>
PONDER_HD void m_from(const Head<T>& d, const T* s, T* m, int tid, int nt) {
  each(d.b * d.b, tid, nt, [&](int64_t x) {
    const T e = x % d.b <= x / d.b ? d.eta[x] : T(0);  // E again: this phase may be the one that writes it
    m[x] = e * s[x] + e;
  });
}
// y, dy = gelu(x), gelu'(x) over n values.
template <class T>
PONDER_HD void gelu_pair(const T* x, T* y, T* dy, int64_t n, int tid, int nt) {
  each(n, tid, nt, [&](int64_t i) {
    y[i] = T(gelu0(double(x[i])));
    dy[i] = T(gelu1(double(x[i])));
  });
}

// W' = W − (ηl⊙x)ᵀ·g (r × c) and bias' = bias − Σ_j ηl_j·g_j for one layer: x (b, r), g (b, c).
template <int U, class T>
PONDER_HD void update(const Head<T>& d, const T* W, const T* bias, const T* x, const T* g, int64_t r, int64_t c,
                      T* Wo, T* bo, int tid, int nt) {
  const int64_t b = d.b;
  const T* el = d.eta + (b - 1) * b;
  prod<U, T>(
      r, c, b, tid, nt, [&](int64_t, int64_t) { return T(0); }, [&](int64_t i, int64_t j) { return el[j] * x[j * r + i]; },
      [&](int64_t j, int64_t cc) { return g[j * c + cc]; }, [&](int64_t i, int64_t cc, T s) { Wo[i * c + cc] = W[i * c + cc] - s; });
  prod<U, T>(
      1, c, b, tid, nt, [&](int64_t, int64_t) { return T(0); }, [&](int64_t, int64_t j) { return el[j]; },
      [&](int64_t j, int64_t cc) { return g[j * c + cc]; }, [&](int64_t, int64_t cc, T s) { bo[cc] = bias[cc] - s; });
}

constexpr int kForwardPhases = 17;
// Phases 0–13 compute the saved intermediates (the backward's recomputation runs them too); 14–16 the results.
// rows: a.rows, or the kernel parameter's where a is a copy (a scan's unit_args), which indexing the geometry's
// arrays would otherwise keep in local memory.
template <int U, class T>
PONDER_HD void forward_phase(const Args<T>& a, const RowGeom& rows, int64_t g, int phase, int tid, int nt) {
  const Head<T> d = head(a, g);
  const int64_t b = d.b, f = d.f, h = d.hw;
  auto zero = [](int64_t, int64_t) { return T(0); };
  switch (phase) {
    case 0:  // γ offsets, t, E; Z1 = k·W1 + b1; S1 = q·kᵀ
      dual::row_offsets(d, rows, tid, nt);
      cheap_parts(d, tid, nt);
      prod<U, T>(b, h, f, tid, nt, [&](int64_t, int64_t c) { return d.b1[c]; }, [&](int64_t i, int64_t k) { return d.k[i * f + k]; },
              [&](int64_t k, int64_t c) { return d.W1[k * h + c]; }, [&](int64_t i, int64_t c, T s) { d.z1[i * h + c] = s; });
      prod<U, T>(b, b, f, tid, nt, zero, [&](int64_t i, int64_t k) { return d.q[i * f + k]; },
              [&](int64_t k, int64_t j) { return d.k[j * f + k]; }, [&](int64_t i, int64_t j, T s) { d.s1[i * b + j] = s; });
      break;
    case 1:
      gelu_pair(d.z1, d.x2, d.d1, b * h, tid, nt);
      m_from(d, d.s1, d.m1, tid, nt);
      break;
    case 2:  // Z2 = X2·W2 + b2
      prod<U, T>(b, f, h, tid, nt, [&](int64_t, int64_t c) { return d.b2[c]; }, [&](int64_t i, int64_t k) { return d.x2[i * h + k]; },
              [&](int64_t k, int64_t c) { return d.W2[k * f + c]; }, [&](int64_t i, int64_t c, T s) { d.z2[i * f + c] = s; });
      break;
    case 3: dual::stage_sum(d, d.z2, tid, nt); break;  // G2 = ∇ℓ(Z2, t) in stages
    case 4: dual::stage_var(d, d.z2, tid, nt); break;
    case 5: dual::stage_l2_sums(d, d.z2, d.t, static_cast<const T*>(nullptr), tid, nt); break;
    case 6: dual::stage_l2_grad(d, d.z2, d.t, d.g2, tid, nt); break;
    case 7:  // P = G2·W2ᵀ
      prod<U, T>(b, h, f, tid, nt, zero, [&](int64_t i, int64_t k) { return d.g2[i * f + k]; },
              [&](int64_t k, int64_t c) { return d.W2[c * f + k]; }, [&](int64_t i, int64_t c, T s) { d.p[i * h + c] = s; });
      break;
    case 8: each(b * h, tid, nt, [&](int64_t x) { d.g1[x] = d.p[x] * d.d1[x]; }); break;
    case 9:  // Zb1 = q·W1 + b1 − M1·G1: terms k < f from q·W1, then b from M1·G1
      prod<U, T>(b, h, f + b, tid, nt, [&](int64_t, int64_t c) { return d.b1[c]; },
              [&](int64_t i, int64_t k) { return k < f ? d.q[i * f + k] : -d.m1[i * b + k - f]; },
              [&](int64_t k, int64_t c) { return k < f ? d.W1[k * h + c] : d.g1[(k - f) * h + c]; },
              [&](int64_t i, int64_t c, T s) { d.zb1[i * h + c] = s; });
      break;
    case 10: gelu_pair(d.zb1, d.xb2, d.db1, b * h, tid, nt); break;
    case 11:  // S2 = Xb2·X2ᵀ
      prod<U, T>(b, b, h, tid, nt, zero, [&](int64_t i, int64_t k) { return d.xb2[i * h + k]; },
              [&](int64_t k, int64_t j) { return d.x2[j * h + k]; }, [&](int64_t i, int64_t j, T s) { d.s2[i * b + j] = s; });
      break;
    case 12: m_from(d, d.s2, d.m2, tid, nt); break;
    case 13:  // Zb2 = Xb2·W2 + b2 − M2·G2
      prod<U, T>(b, f, h + b, tid, nt, [&](int64_t, int64_t c) { return d.b2[c]; },
              [&](int64_t i, int64_t k) { return k < h ? d.xb2[i * h + k] : -d.m2[i * b + k - h]; },
              [&](int64_t k, int64_t c) { return k < h ? d.W2[k * f + c] : d.g2[(k - h) * f + c]; },
              [&](int64_t i, int64_t c, T s) { d.zb2[i * f + c] = s; });
      break;
    case 14:  // the updates, and out = q + LN(Zb2) in stages
      update<U>(d, d.W1, d.b1, d.k, d.g1, f, h, a.W1o + g * f * h, a.b1o + g * h, tid, nt);
      update<U>(d, d.W2, d.b2, d.x2, d.g2, h, f, a.W2o + g * h * f, a.b2o + g * f, tid, nt);
      dual::stage_sum(d, d.zb2, tid, nt);
      break;
    case 15: dual::stage_var(d, d.zb2, tid, nt); break;
    case 16: dual::stage_affine(d, d.zb2, d.q, a.out + g * b * f, tid, nt); break;
    default: break;
  }
}
template <int U, class T>
PONDER_HD void forward_phase(const Args<T>& a, int64_t g, int phase, int tid, int nt) {
  forward_phase<U>(a, a.rows, g, phase, tid, nt);
}

// ---- the scan (Backend::ttt_mlp_scan): one launch runs units lo … hi of every head, each unit as the one-unit
// kernel runs it on the launch's Args moved to that unit (unit_args). Every operand and result is units-first
// (n, G, …) and contiguous, so unit u's head g is entry u·G + g. A block keeps its head: unit u + 1's phase 0 reads
// the weights its own unit u wrote, visible after the barrier that ends unit u.
template <class T>
struct Scan {
  int64_t units = 1, lo = 0, hi = 0;  // the sequence's n units; this launch's first and last
  int64_t G = 0;
  T *out = nullptr, *W1 = nullptr, *b1 = nullptr, *W2 = nullptr, *b2 = nullptr;  // (n, G, …) results
  T* S = nullptr;                                                                  // (n, G, saved_size)
  // backward: two slots of every head's weight gradients (2, G, …), unit u writing slot u % 2 and reading unit
  // u + 1's (unit 0 writes Args' dW1 … db2)
  T *cW1 = nullptr, *cb1 = nullptr, *cW2 = nullptr, *cb2 = nullptr;
};

// a (unit 0's Args: the start's weights, the results' and gradients' unit-0 parts, parts of unit lo) moved to unit u.
template <class T>
PONDER_HD Args<T> unit_args(Args<T> a, const Scan<T>& s, int64_t u, bool forward) {
  const int64_t U = u * s.G, b = a.b, f = a.f, h = a.h;
  a.q += U * b * f, a.k += U * b * f, a.v += U * b * f, a.eta += U * b * b;
  if (u > 0) {
    const int64_t p = (u - 1) * s.G;
    a.W1 = s.W1 + p * f * h, a.b1 = s.b1 + p * h, a.W2 = s.W2 + p * h * f, a.b2 = s.b2 + p * f;
  }
  a.saved = s.S + U * saved_size(b, f, h);
  if (forward) {
    a.out = s.out + U * b * f, a.W1o = s.W1 + U * f * h, a.b1o = s.b1 + U * h, a.W2o = s.W2 + U * h * f;
    a.b2o = s.b2 + U * f;
    return a;
  }
  a.dO += U * b * f;
  if (u + 1 < s.units) {
    const int64_t slot = ((u + 1) & 1) * s.G;
    a.dW1u = s.cW1 + slot * f * h, a.db1u = s.cb1 + slot * h, a.dW2u = s.cW2 + slot * h * f, a.db2u = s.cb2 + slot * f;
  }
  if (u > 0) {
    const int64_t slot = (u & 1) * s.G;
    a.dW1 = s.cW1 + slot * f * h, a.db1 = s.cb1 + slot * h, a.dW2 = s.cW2 + slot * h * f, a.db2 = s.cb2 + slot * f;
  }
  a.dq += U * b * f, a.dk += U * b * f, a.dv += U * b * f, a.deta += U * b * b;
  a.parts += (u - s.lo) * s.G * 2 * a.P;
  return a;
}

// ---- the backward's steps (its phases: tensor/cuda/ttt_mlp_dual_backward.h)

// Through Zb = X·W + bias − M·G, M = E⊙S + E, S = X·Yᵀ for dZb (b, c), X, Y (b, r), part 1: dX ← dZb·Wᵀ (+ the
// dX given when acc), dW += Xᵀ·dZb, dM = −dZb·Gᵀ (into d.dm).
template <int U, class T>
PONDER_HD void combine_a(const Head<T>& d, int64_t r, int64_t c, const T* dzb, const T* X, const T* W, const T* G,
                         T* dX, bool acc, T* dW, int tid, int nt) {
  const int64_t b = d.b;
  prod<U, T>(b, r, c, tid, nt, [&](int64_t i, int64_t j) { return acc ? dX[i * r + j] : T(0); },
          [&](int64_t i, int64_t k) { return dzb[i * c + k]; }, [&](int64_t k, int64_t j) { return W[j * c + k]; },
          [&](int64_t i, int64_t j, T s) { dX[i * r + j] = s; });
  prod<U, T>(r, c, b, tid, nt, [&](int64_t i, int64_t j) { return dW[i * c + j]; },
          [&](int64_t i, int64_t k) { return X[k * r + i]; }, [&](int64_t k, int64_t j) { return dzb[k * c + j]; },
          [&](int64_t i, int64_t j, T s) { dW[i * c + j] = s; });
  prod<U, T>(b, b, c, tid, nt, [](int64_t, int64_t) { return T(0); }, [&](int64_t i, int64_t k) { return dzb[i * c + k]; },
          [&](int64_t k, int64_t j) { return G[j * c + k]; }, [&](int64_t i, int64_t j, T s) { d.dm[i * b + j] = -s; });
}
// Part 2: dη += tril(dM⊙(S + 1)); dS = tril(dM)⊙E (into d.dm).
template <class T>
PONDER_HD void combine_b(const Head<T>& d, const T* S, T* deta, int tid, int nt) {
  const int64_t b = d.b;
  each(b * b, tid, nt, [&](int64_t x) {
    if (x % b <= x / b) {
      deta[x] += d.dm[x] * (S[x] + T(1));
      d.dm[x] *= d.e[x];
    } else {
      d.dm[x] = T(0);
    }
  });
}
// Part 3: dX += dS·Y, dY = dSᵀ·X, dG = −Mᵀ·dZb.
template <int U, class T>
PONDER_HD void combine_c(const Head<T>& d, int64_t r, int64_t c, const T* dzb, const T* X, const T* Y, const T* M,
                         T* dX, T* dY, T* dG, int tid, int nt) {
  const int64_t b = d.b;
  prod<U, T>(b, r, b, tid, nt, [&](int64_t i, int64_t j) { return dX[i * r + j]; },
          [&](int64_t i, int64_t k) { return d.dm[i * b + k]; }, [&](int64_t k, int64_t j) { return Y[k * r + j]; },
          [&](int64_t i, int64_t j, T s) { dX[i * r + j] = s; });
  prod<U, T>(b, r, b, tid, nt, [](int64_t, int64_t) { return T(0); }, [&](int64_t i, int64_t k) { return d.dm[k * b + i]; },
          [&](int64_t k, int64_t j) { return X[k * r + j]; }, [&](int64_t i, int64_t j, T s) { dY[i * r + j] = s; });
  prod<U, T>(b, c, b, tid, nt, [](int64_t, int64_t) { return T(0); }, [&](int64_t i, int64_t k) { return M[k * b + i]; },
          [&](int64_t k, int64_t j) { return dzb[k * c + j]; }, [&](int64_t i, int64_t j, T s) { dG[i * c + j] = -s; });
}

// Through W' = W − (ηl⊙x)ᵀ·g and bias' for upstream dWu (r, c), dbu (c), part 1: dg −= (ηl⊙x)·dWu + ηl·dbuᵀ,
// dpx = −g·dWuᵀ.
template <int U, class T>
PONDER_HD void back_update_a(const Head<T>& d, int64_t r, int64_t c, const T* x, const T* g, const T* dWu,
                             const T* dbu, T* dg, T* dpx, int tid, int nt) {
  const int64_t b = d.b;
  const T* el = d.eta + (b - 1) * b;
  prod<U, T>(b, c, r, tid, nt, [&](int64_t j, int64_t cc) { return dg[j * c + cc]; },
          [&](int64_t j, int64_t i) { return -(el[j] * x[j * r + i]); }, [&](int64_t i, int64_t cc) { return dWu[i * c + cc]; },
          [&](int64_t j, int64_t cc, T s) { dg[j * c + cc] = s - el[j] * dbu[cc]; });
  prod<U, T>(b, r, c, tid, nt, [](int64_t, int64_t) { return T(0); }, [&](int64_t j, int64_t cc) { return g[j * c + cc]; },
          [&](int64_t cc, int64_t i) { return dWu[i * c + cc]; }, [&](int64_t j, int64_t i, T s) { dpx[j * r + i] = -s; });
}
// Part 2: dx += ηl·dpx; del_j = Σ_i x·dpx − Σ_c g·dbu (one thread per row j).
template <class T>
PONDER_HD void back_update_b(const Head<T>& d, int64_t r, int64_t c, const T* x, const T* g, const T* dbu,
                             const T* dpx, T* dx, double* del, int tid, int nt) {
  const int64_t b = d.b;
  const T* el = d.eta + (b - 1) * b;
  each(b * r, tid, nt, [&](int64_t e) { dx[e] += el[e / r] * dpx[e]; });
  each(b, tid, nt, [&](int64_t j) {
    T s = 0;
    for (int64_t i = 0; i < r; ++i) s += x[j * r + i] * dpx[j * r + i];
    for (int64_t i = 0; i < c; ++i) s -= g[j * c + i] * dbu[i];
    del[j] = double(s);
  });
}

}  // namespace ponder::cuda::mlp
