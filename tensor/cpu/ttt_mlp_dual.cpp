// TTT-MLP's dual form on one mini-batch (tensor/backend.h, MlpDualOperands), forward and backward, one head per
// task. Its definition is the composition compose::ttt_mlp_dual (autograd/compose.cpp), which tests/test_ops.cpp and
// the op table compare it with; docs/ttt.md §1.7–§1.8 derive it. The composition runs about forty engine ops per
// mini-batch over (B, H, b, 4f) tensors, each with its backward; here a head's products are small GEMMs on buffers
// that stay in cache, and the row steps are the row kernels' functions (tensor/cpu/rows.h). Heads run in parallel;
// dγ and dβ are summed per head and then over heads in order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/head_sums.h"
#include "tensor/cpu/rows.h"
#include "tensor/cpu/vmath.h"

namespace ponder::cpu {
namespace mlp_dual {  // named: a unity build puts the other head kernels' Head and Work beside these
namespace {

// gelu_tanh and its first two derivatives (autograd/ops_elementwise.cpp's formulas), in double.
constexpr double kC = 0.7978845608028654, kA = 0.044715;  // sqrt(2/π) and the cubic term's weight
inline double gelu(double x) { return 0.5 * x * (1 + std::tanh(kC * (x + kA * x * x * x))); }
inline double gelu1(double x) {
  const double t = std::tanh(kC * (x + kA * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kC * (1 + 3 * kA * x * x);
}
inline double gelu2(double x) {  // (1 − t²)·(u' − x·t·u'² + 3ca·x²), u' = c(1 + 3a·x²)
  const double x2 = x * x, t = std::tanh(kC * (x + kA * x2 * x)), du = kC * (1 + 3 * kA * x2);
  return (1 - t * t) * (du - x * t * du * du + 3 * kC * kA * x2);
}

// The element-wise gelu steps over n contiguous values: float32 eight lanes at a time (tensor/cpu/vmath.h; libm's
// tanhf per element cost more than a head's products), float64 through the library functions above.
// y = gelu(x) and d = gelu'(x).
template <class T>
void gelu_and_grad(const T* x, T* y, T* d, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    vmath::blocks(n, [&](int64_t i, int64_t m) {
      vmath::vf dv;
      vmath::store_n(y + i, vmath::gelu_tanh_and_grad_v(vmath::load_n(x + i, m), dv), m);
      vmath::store_n(d + i, dv, m);
    });
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]), d[i] = gelu1(x[i]);
  }
}
// y = a⊙b (y may be a).
template <class T>
void times(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
// y = a⊙p⊙gelu''(x).
template <class T>
void times_gelu2(const T* x, const T* a, const T* p, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    vmath::blocks(n, [&](int64_t i, int64_t m) {
      const vmath::vf v = vmath::load_n(a + i, m) * vmath::load_n(p + i, m);
      vmath::store_n(y + i, v * vmath::gelu_tanh_grad2_v(vmath::load_n(x + i, m)), m);
    });
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] * p[i] * gelu2(x[i]);
  }
}

// One head's operands and sizes: W1 (f, h), b1 (h), W2 (h, f), b2 (f), q, k, v (b, f), η (b, b), all contiguous.
template <class T>
struct Head {
  const T *W1, *b1, *W2, *b2, *q, *k, *v, *eta, *gamma, *beta;
  const int64_t* goff;  // this head's b row offsets into γ, β
  int64_t b, f, h;
  double eps;
};

template <class T>
Head<T> head(const MlpDualOperands& o, int64_t g) {
  const int64_t b = o.xq.shape()[1], f = o.xq.shape()[2], h = o.W1.shape()[2];
  return {o.W1.data<T>() + g * f * h, o.b1.data<T>() + g * h,      o.W2.data<T>() + g * h * f,
          o.b2.data<T>() + g * f,     o.xq.data<T>() + g * b * f,  o.xk.data<T>() + g * b * f,
          o.xv.data<T>() + g * b * f, o.eta.data<T>() + g * b * b, o.gamma.data<T>(),
          o.beta.data<T>(),           o.rows.goff.data() + g * b,  b,
          f,                          h,                           o.eps};
}

// The forward's intermediates of one head, in the saved tensor's order (kMlpDualSaved): Z1, X2 = gelu(Z1), D1 =
// gelu'(Z1), P = G2·W2ᵀ, G1 = P⊙D1, Zb1, Xb2 = gelu(Zb1), Db1 = gelu'(Zb1) (b, h); Z2, G2 = ∇ℓ(Z2), Zb2 (b, f);
// S1 = q·kᵀ, S2 = Xb2·X2ᵀ (b, b). gelu and gelu' share one exponential, and the backward reads them.
template <class T>
struct Saved {
  T *z1, *x2, *d1, *p, *g1, *zb1, *xb2, *db1, *z2, *g2, *zb2, *s1, *s2;
  Saved(T* s, int64_t b, int64_t f, int64_t h) {
    T** bh[] = {&z1, &x2, &d1, &p, &g1, &zb1, &xb2, &db1};
    for (T** x : bh) *x = s, s += b * h;
    T** bf[] = {&z2, &g2, &zb2};
    for (T** x : bf) *x = s, s += b * f;
    s1 = s;
    s2 = s + b * b;
  }
};

// A thread's buffers, kept between calls (the kernel runs once per mini-batch per layer).
template <class T>
struct Work {
  std::vector<T> own, t, e, m1, m2, bh1, bh2, bh3, bh4, bf1, bf2, bf3, bb;
  std::vector<double> scratch;
  int64_t b = -1, f = -1, h = -1;
  void size(int64_t b_, int64_t f_, int64_t h_) {
    if (b_ == b && f_ == f && h_ == h) return;
    b = b_, f = f_, h = h_;
    own.assign(size_t(kMlpDualSaved(b, f, h)), T(0));
    for (auto* x : {&t, &bf1, &bf2, &bf3}) x->assign(size_t(b * f), T(0));
    for (auto* x : {&e, &m1, &m2, &bb}) x->assign(size_t(b * b), T(0));
    for (auto* x : {&bh1, &bh2, &bh3, &bh4}) x->assign(size_t(b * h), T(0));
    scratch.resize(size_t(rows::kLnL2GradVjpScratch * std::max(f, h)));
  }
};
template <class T>
Work<T>& work(int64_t b, int64_t f, int64_t h) {
  thread_local Work<T> w;
  w.size(b, f, h);
  return w;
}

// out (r, c) rows ← bias (c).
template <class T>
void rows_of(T* out, const T* bias, int64_t r, int64_t c) {
  for (int64_t i = 0; i < r; ++i) std::copy(bias, bias + c, out + i * c);
}

// t = v − k, E = tril(η), M1 = E⊙S1 + E, M2 = E⊙S2 + E (S1, S2 from s).
template <class T>
void cheap_parts(const Head<T>& hd, const Saved<T>& s, Work<T>& w) {
  const int64_t b = hd.b, f = hd.f;
  for (int64_t x = 0; x < b * f; ++x) w.t[size_t(x)] = hd.v[x] - hd.k[x];
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < b; ++j) {
      const size_t ij = size_t(i * b + j);
      w.e[ij] = j <= i ? hd.eta[ij] : T(0);
      w.m1[ij] = w.e[ij] * s.s1[ij] + w.e[ij];
      w.m2[ij] = w.e[ij] * s.s2[ij] + w.e[ij];
    }
}

// Everything up to Zb2 (the saved intermediates), and t, E, M1, M2 in w.
template <class T>
void forward_parts(const Head<T>& hd, const Saved<T>& s, Work<T>& w) {
  const int64_t b = hd.b, f = hd.f, h = hd.h;
  rows_of(s.z1, hd.b1, b, h);
  gemm(false, false, b, h, f, hd.k, f, hd.W1, h, T(1), s.z1, h);  // Z1 = k·W1 + b1
  gelu_and_grad(s.z1, s.x2, s.d1, b * h);
  rows_of(s.z2, hd.b2, b, f);
  gemm(false, false, b, f, h, s.x2, h, hd.W2, f, T(1), s.z2, f);  // Z2 = X2·W2 + b2
  gemm(false, true, b, b, f, hd.q, f, hd.k, f, T(0), s.s1, b);     // S1 = q·kᵀ
  std::fill(s.s2, s.s2 + b * b, T(0));  // S2 is not known yet: M2 is set once it is
  cheap_parts(hd, s, w);
  for (int64_t i = 0; i < b; ++i)
    rows::ln_l2_grad(s.z2 + i * f, w.t.data() + i * f, hd.gamma + hd.goff[i], hd.beta + hd.goff[i], s.g2 + i * f, f,
                     hd.eps, w.scratch.data());
  gemm(false, true, b, h, f, s.g2, f, hd.W2, f, T(0), s.p, h);  // P = G2·W2ᵀ
  times(s.p, s.d1, s.g1, b * h);
  rows_of(s.zb1, hd.b1, b, h);
  gemm(false, false, b, h, f, hd.q, f, hd.W1, h, T(1), s.zb1, h);
  gemm(false, false, b, h, b, w.m1.data(), b, s.g1, h, T(1), s.zb1, h, T(-1));  // Zb1 = q·W1 + b1 − M1·G1
  gelu_and_grad(s.zb1, s.xb2, s.db1, b * h);
  gemm(false, true, b, b, h, s.xb2, h, s.x2, h, T(0), s.s2, b);  // S2 = Xb2·X2ᵀ
  for (int64_t x = 0; x < b * b; ++x) w.m2[size_t(x)] = w.e[size_t(x)] * s.s2[x] + w.e[size_t(x)];
  rows_of(s.zb2, hd.b2, b, f);
  gemm(false, false, b, f, h, s.xb2, h, hd.W2, f, T(1), s.zb2, f);
  gemm(false, false, b, f, b, w.m2.data(), b, s.g2, f, T(1), s.zb2, f, T(-1));  // Zb2 = Xb2·W2 + b2 − M2·G2
}

// W' = W − (ηl⊙x)ᵀ·g and bias' = bias − Σ_j ηl_j·g_j for one layer: x (b, r), g (b, c), W (r, c); px (b, r) scratch.
template <class T>
void update(const T* W, const T* bias, const T* x, const T* g, const T* el, int64_t b, int64_t r, int64_t c, T* px,
            T* Wo, T* bo) {
  for (int64_t j = 0; j < b; ++j)
    for (int64_t i = 0; i < r; ++i) px[j * r + i] = el[j] * x[j * r + i];
  std::copy(W, W + r * c, Wo);
  gemm(true, false, r, c, b, px, r, g, c, T(1), Wo, c, T(-1));
  for (int64_t i = 0; i < c; ++i) {
    T acc = 0;
    for (int64_t j = 0; j < b; ++j) acc += el[j] * g[j * c + i];
    bo[i] = bias[i] - acc;
  }
}

template <class T>
void forward_t(const std::array<Tensor, 5>& y, const Tensor& saved, const MlpDualOperands& o) {
  const int64_t G = o.xq.shape()[0], b = o.xq.shape()[1], f = o.xq.shape()[2], h = o.W1.shape()[2];
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < G; ++g) {
    const Head<T> hd = head<T>(o, g);
    Work<T>& w = work<T>(b, f, h);
    const Saved<T> s(saved.defined() ? saved.data<T>() + g * kMlpDualSaved(b, f, h) : w.own.data(), b, f, h);
    forward_parts(hd, s, w);
    T* out = y[0].data<T>() + g * b * f;
    for (int64_t i = 0; i < b; ++i) {  // out = q + LN(Zb2)
      rows::ln_affine(s.zb2 + i * f, hd.gamma + hd.goff[i], hd.beta + hd.goff[i], out + i * f, f, hd.eps);
      for (int64_t c = 0; c < f; ++c) out[i * f + c] += hd.q[i * f + c];
    }
    const T* el = hd.eta + (b - 1) * b;
    update(hd.W1, hd.b1, hd.k, s.g1, el, b, f, h, w.bf1.data(), y[1].data<T>() + g * f * h, y[2].data<T>() + g * h);
    update(hd.W2, hd.b2, s.x2, s.g2, el, b, h, f, w.bh1.data(), y[3].data<T>() + g * h * f, y[4].data<T>() + g * f);
  }
}

// One head's upstream (dout (b, f), dW1' (f, h), db1' (h), dW2' (h, f), db2' (f)) and outputs (dW1, db1, dW2, db2,
// dq, dk, dv, dη).
template <class T>
struct HeadGrads {
  const T *dO, *dW1u, *db1u, *dW2u, *db2u;
  T *dW1, *db1, *dW2, *db2, *dq, *dk, *dv, *deta;
};

// Through Zb = X·W + bias − M·G, M = E⊙S + E, S = X·Yᵀ, for dZb (b, c): dX += dZb·Wᵀ + dS·Y, dY = dSᵀ·X (set),
// dW += Xᵀ·dZb, dG = −Mᵀ·dZb (set), dη += tril(dM⊙(S + 1)), with dM = −dZb·Gᵀ and dS = dM⊙E. X, Y (b, r).
template <class T>
void back_combine(int64_t b, int64_t r, int64_t c, const T* dzb, const T* X, const T* Y, const T* W, const T* G,
                  const T* S, const T* M, const T* E, T* dX, T* dY, T* dW, T* dG, T* deta, T* dm) {
  gemm(false, true, b, r, c, dzb, c, W, c, T(1), dX, r);
  gemm(true, false, r, c, b, X, r, dzb, c, T(1), dW, c);
  gemm(false, true, b, b, c, dzb, c, G, c, T(0), dm, b, T(-1));
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      const int64_t ij = i * b + j;
      deta[ij] += dm[ij] * (S[ij] + T(1));
      dm[ij] *= E[ij];  // dS
    }
  for (int64_t i = 0; i < b; ++i) std::fill(dm + i * b + i + 1, dm + (i + 1) * b, T(0));
  gemm(false, false, b, r, b, dm, b, Y, r, T(1), dX, r);
  gemm(true, false, b, r, b, dm, b, X, r, T(0), dY, r);
  gemm(true, false, b, c, b, M, b, dzb, c, T(0), dG, c, T(-1));
}

// Through W' = W − (ηl⊙x)ᵀ·g and bias' = bias − Σ_j ηl_j·g_j for upstream dWu (r, c), dbu (c): dg, dx, dηl
// accumulate (dW and dbias take dWu, dbu directly). px, dpx (b, r) scratch.
template <class T>
void back_update(int64_t b, int64_t r, int64_t c, const T* x, const T* g, const T* el, const T* dWu, const T* dbu,
                 T* dg, T* dx, T* del, T* px, T* dpx) {
  for (int64_t j = 0; j < b; ++j)
    for (int64_t i = 0; i < r; ++i) px[j * r + i] = el[j] * x[j * r + i];
  gemm(false, false, b, c, r, px, r, dWu, c, T(1), dg, c, T(-1));
  gemm(false, true, b, r, c, g, c, dWu, c, T(0), dpx, r, T(-1));
  for (int64_t j = 0; j < b; ++j) {
    T d = 0;
    for (int64_t i = 0; i < r; ++i) {
      dx[j * r + i] += el[j] * dpx[j * r + i];
      d += x[j * r + i] * dpx[j * r + i];
    }
    for (int64_t i = 0; i < c; ++i) {
      dg[j * c + i] -= el[j] * dbu[i];
      d -= g[j * c + i] * dbu[i];
    }
    del[j] += d;
  }
}

// out (c) = base (c) + Σ_i rows of a (b, c) [+ Σ_i rows of a2].
template <class T>
void bias_grad(const T* base, const T* a, const T* a2, int64_t b, int64_t c, T* out) {
  for (int64_t i = 0; i < c; ++i) {
    T acc = base[i];
    for (int64_t j = 0; j < b; ++j) acc += a[j * c + i] + a2[j * c + i];
    out[i] = acc;
  }
}

// One head's backward (the forward's steps in reverse); ag, ab: this head's dγ, dβ accumulators.
template <class T>
void backward_head(const Head<T>& hd, const Saved<T>& s, const HeadGrads<T>& d, Work<T>& w, double* ag, double* ab) {
  const int64_t b = hd.b, f = hd.f, h = hd.h, bh = b * h;
  const T* el = hd.eta + (b - 1) * b;
  T *dzb2 = w.bf1.data(), *dg2 = w.bf2.data(), *dz2 = w.bf3.data();
  T *dxb2 = w.bh1.data(), *dx2 = w.bh2.data(), *dg1 = w.bh3.data(), *tmp = w.bh4.data();
  std::fill(d.deta, d.deta + b * b, T(0));
  std::copy(d.dO, d.dO + b * f, d.dq);
  std::copy(d.dW1u, d.dW1u + f * h, d.dW1);
  std::copy(d.dW2u, d.dW2u + h * f, d.dW2);
  for (int64_t i = 0; i < b; ++i)  // out = q + LN(Zb2)
    rows::ln_affine_backward(s.zb2 + i * f, hd.gamma + hd.goff[i], d.dO + i * f, dzb2 + i * f, ag + hd.goff[i],
                             ab + hd.goff[i], f, hd.eps, w.scratch.data());
  std::fill(dxb2, dxb2 + bh, T(0));
  back_combine(b, h, f, dzb2, s.xb2, s.x2, hd.W2, s.g2, s.s2, w.m2.data(), w.e.data(), dxb2, dx2, d.dW2, dg2, d.deta,
               w.bb.data());
  T* dzb1 = dxb2;  // Xb2 = gelu(Zb1), in place
  times(dxb2, s.db1, dzb1, bh);
  back_combine(b, f, h, dzb1, hd.q, hd.k, hd.W1, s.g1, s.s1, w.m1.data(), w.e.data(), d.dq, d.dk, d.dW1, dg1, d.deta,
               w.bb.data());
  for (int64_t i = 0; i < h; ++i) {  // db1 = db1' + Σ dZb1 (+ Σ dZ1 at the end)
    T acc = d.db1u[i];
    for (int64_t j = 0; j < b; ++j) acc += dzb1[j * h + i];
    d.db1[i] = acc;
  }
  T* del = d.deta + (b - 1) * b;  // the updates read η's last row
  back_update(b, f, h, hd.k, s.g1, el, d.dW1u, d.db1u, dg1, d.dk, del, w.bf3.data(), tmp);  // tmp: free until below
  back_update(b, h, f, s.x2, s.g2, el, d.dW2u, d.db2u, dg2, dx2, del, tmp, w.bh1.data());
  // G1 = P⊙gelu'(Z1), P = G2·W2ᵀ: dP = dG1⊙gelu'(Z1) (into dg1), dZ1 = dG1⊙P⊙gelu''(Z1) (into tmp)
  times_gelu2(s.z1, dg1, s.p, tmp, bh);
  times(dg1, s.d1, dg1, bh);
  gemm(false, false, b, f, h, dg1, h, hd.W2, f, T(1), dg2, f);
  gemm(true, false, h, f, b, dg1, h, s.g2, f, T(1), d.dW2, f);
  for (int64_t i = 0; i < b; ++i)  // G2 = ∇ℓ(Z2, v − k), the targets t from cheap_parts
    rows::ln_l2_grad_vjp(s.z2 + i * f, w.t.data() + i * f, hd.gamma + hd.goff[i], hd.beta + hd.goff[i], dg2 + i * f,
                         dz2 + i * f, d.dv + i * f, ag + hd.goff[i], ab + hd.goff[i], f, hd.eps, w.scratch.data());
  for (int64_t x = 0; x < b * f; ++x) d.dk[x] -= d.dv[x];
  bias_grad(d.db2u, dzb2, dz2, b, f, d.db2);
  gemm(false, true, b, h, f, dz2, f, hd.W2, f, T(1), dx2, h);  // Z2 = X2·W2 + b2
  gemm(true, false, h, f, b, s.x2, h, dz2, f, T(1), d.dW2, f);
  times(dx2, s.d1, dx2, bh);  // X2 = gelu(Z1)
  for (int64_t x = 0; x < bh; ++x) tmp[x] += dx2[x];
  gemm(false, true, b, f, h, tmp, h, hd.W1, h, T(1), d.dk, f);  // Z1 = k·W1 + b1
  gemm(true, false, f, h, b, hd.k, f, tmp, h, T(1), d.dW1, h);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < b; ++j) d.db1[i] += tmp[j * h + i];
}

template <class T>
void backward_t(const std::array<Tensor, 10>& out, const MlpDualOperands& o, const Tensor& saved,
                const std::array<Tensor, 5>& dy) {
  const int64_t G = o.xq.shape()[0], b = o.xq.shape()[1], f = o.xq.shape()[2], h = o.W1.shape()[2];
  const int64_t P = o.gamma.numel();
  thread_local std::vector<double> own_parts;
  std::vector<double>& parts = own_parts;  // the calling thread's, shared with the workers
  parts.assign(size_t(G * 2 * P), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < G; ++g) {
    const Head<T> hd = head<T>(o, g);
    Work<T>& w = work<T>(b, f, h);
    const Saved<T> s(saved.defined() ? saved.data<T>() + g * kMlpDualSaved(b, f, h) : w.own.data(), b, f, h);
    if (saved.defined()) {
      cheap_parts(hd, s, w);
    } else {
      forward_parts(hd, s, w);
    }
    const HeadGrads<T> d{dy[0].data<T>() + g * b * f, dy[1].data<T>() + g * f * h, dy[2].data<T>() + g * h,
                         dy[3].data<T>() + g * h * f, dy[4].data<T>() + g * f,      out[0].data<T>() + g * f * h,
                         out[1].data<T>() + g * h,    out[2].data<T>() + g * h * f, out[3].data<T>() + g * f,
                         out[4].data<T>() + g * b * f, out[5].data<T>() + g * b * f, out[6].data<T>() + g * b * f,
                         out[7].data<T>() + g * b * b};
    double* acc = parts.data() + g * 2 * P;
    backward_head(hd, s, d, w, acc, acc + P);
  }
  sum_head_parts(parts.data(), G, P, out[8].data<T>(), out[9].data<T>());
}

}  // namespace
}  // namespace mlp_dual

void ttt_mlp_dual(const std::array<Tensor, 5>& y, const Tensor& saved, const MlpDualOperands& o) {
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_mlp_dual", [&] { mlp_dual::forward_t<scalar_t>(y, saved, o); });
}

void ttt_mlp_dual_backward(const std::array<Tensor, 10>& g, const MlpDualOperands& o, const Tensor& saved,
                           const std::array<Tensor, 5>& dy) {
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_mlp_dual_backward",
                        [&] { mlp_dual::backward_t<scalar_t>(g, o, saved, dy); });
}

}  // namespace ponder::cpu
