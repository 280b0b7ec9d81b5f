// Prefix mode's K closed-form inner steps on one unit (tensor/backend.h, PrefixOperands), forward and backward, one
// head per task. Its definition is the composition compose::ttt_prefix_steps (autograd/compose.cpp), which
// tests/test_ops.cpp and the op table compare it with; docs/ttt.md §3.3 derives it. A step reads, for every position
// i at once, Z_i = Z0 − M·A_i at the causal pairs (j ≤ i): the packed A (P × f, one row per pair) is spread to a
// (b × b·f) grid, one GEMM with −M gives every position's Z, and the LN+L2 gradient of each pair's row is weighted
// by η and added to A. The composition does the same with index ops, a batched product and element-wise passes over
// (B, H, P, f) tensors; here a head's buffers stay in cache. Heads run in parallel; dγ and dβ are summed per head
// and then over heads in order, so results do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/head_sums.h"
#include "tensor/cpu/rows.h"

namespace ponder::cpu {
namespace prefix_steps {  // named: a unity build puts ttt_dual.cpp's Head and Work beside these
namespace {

// One head's operands and sizes. Pair p = (j, i), j ≤ i, in j-major order: pj[p] = j, pi[p] = i.
template <class T>
struct Head {
  const T *z0, *t, *neg_m, *w;  // (b, f), (b, f), (b, b), (P)
  const T *gamma, *beta;
  const int64_t* goff;  // this head's b row offsets into γ, β
  const int64_t *pj, *pi;
  int64_t b, f, P;
  int steps;
  double eps;
};

// The pair tables of a unit of b positions, shared by every head.
struct Pairs {
  std::vector<int64_t> j, i;
  explicit Pairs(int64_t b) {
    for (int64_t jj = 0; jj < b; ++jj)
      for (int64_t ii = jj; ii < b; ++ii) {
        j.push_back(jj);
        i.push_back(ii);
      }
  }
};

template <class T>
Head<T> head(const PrefixOperands& o, const Pairs& pp, int64_t g) {
  const int64_t b = o.z0.shape()[1], f = o.z0.shape()[2], P = kPrefixPairs(b);
  return {o.z0.data<T>() + g * b * f, o.t.data<T>() + g * b * f, o.neg_m.data<T>() + g * b * b,
          o.w.data<T>() + g * P,      o.gamma.data<T>(),          o.beta.data<T>(),
          o.rows.goff.data() + g * b, pp.j.data(),                pp.i.data(),
          b,                          f,                          P,
          o.steps,                    o.eps};
}

// A thread's buffers, kept between calls (the kernel runs once per unit per layer).
template <class T>
struct Work {
  std::vector<T> grid, y, da, dg, dz, dt;  // grid, y: (b, b·f); the rest (P, f)
  std::vector<double> scratch;
  int64_t b = -1, f = -1;
  void size(int64_t b_, int64_t f_) {
    if (b_ == b && f_ == f) return;
    b = b_, f = f_;
    for (auto* x : {&grid, &y}) x->assign(size_t(b * b * f), T(0));
    for (auto* x : {&da, &dg, &dz, &dt}) x->assign(size_t(kPrefixPairs(b) * f), T(0));
    scratch.resize(size_t(rows::kLnL2GradVjpScratch * f));
  }
};
template <class T>
Work<T>& work(int64_t b, int64_t f) {
  thread_local Work<T> w;
  w.size(b, f);
  return w;
}

// grid (b, b·f) ← A spread to its pairs: row j, columns i·f … i·f + f − 1 hold A's pair (j, i); zero elsewhere.
template <class T>
void spread(const Head<T>& h, const T* a, T* grid) {
  std::fill(grid, grid + h.b * h.b * h.f, T(0));
  for (int64_t p = 0; p < h.P; ++p) std::copy(a + p * h.f, a + (p + 1) * h.f, grid + (h.pj[p] * h.b + h.pi[p]) * h.f);
}

// The first step: g1 (b, f) the b rows' LN+L2 gradients, a = η-weighted g1 at the pairs.
template <class T>
void first_step(const Head<T>& h, T* a, T* g1, double* scratch) {
  const int64_t f = h.f;
  for (int64_t j = 0; j < h.b; ++j)
    rows::ln_l2_grad(h.z0 + j * f, h.t + j * f, h.gamma + h.goff[j], h.beta + h.goff[j], g1 + j * f, f, h.eps,
                     scratch);
  for (int64_t p = 0; p < h.P; ++p)
    for (int64_t c = 0; c < f; ++c) a[p * f + c] = h.w[p] * g1[h.pj[p] * f + c];
}

// A later step: from a (kept in aprev), Z = Z0 − M·A at the pairs, gh its gradients, a += η⊙gh.
template <class T>
void later_step(const Head<T>& h, T* a, T* aprev, T* Z, T* gh, Work<T>& wk) {
  const int64_t b = h.b, f = h.f;
  std::copy(a, a + h.P * f, aprev);
  spread(h, aprev, wk.grid.data());
  gemm(false, false, b, b * f, b, h.neg_m, b, wk.grid.data(), b * f, T(0), wk.y.data(), b * f);
  for (int64_t p = 0; p < h.P; ++p) {
    const int64_t j = h.pj[p];
    const T *z0 = h.z0 + j * f, *y = wk.y.data() + (j * b + h.pi[p]) * f;
    for (int64_t c = 0; c < f; ++c) Z[p * f + c] = z0[c] + y[c];
    rows::ln_l2_grad(Z + p * f, h.t + j * f, h.gamma + h.goff[j], h.beta + h.goff[j], gh + p * f, f, h.eps,
                     wk.scratch.data());
    for (int64_t c = 0; c < f; ++c) a[p * f + c] += h.w[p] * gh[p * f + c];
  }
}

template <class T>
void forward_t(const Tensor& a, const Tensor& saved, const PrefixOperands& o) {
  const int64_t G = o.z0.shape()[0], b = o.z0.shape()[1], f = o.z0.shape()[2], P = kPrefixPairs(b);
  const int64_t S = kPrefixSaved(b, f, o.steps);
  const Pairs pp(b);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < G; ++g) {
    const Head<T> h = head<T>(o, pp, g);
    Work<T>& wk = work<T>(b, f);
    T *ag = a.data<T>() + g * P * f, *sv = saved.data<T>() + g * S;
    first_step(h, ag, sv, wk.scratch.data());
    T* cur = sv + b * f;
    for (int k = 2; k <= o.steps; ++k, cur += 3 * P * f) later_step(h, ag, cur, cur + P * f, cur + 2 * P * f, wk);
  }
}

// Σ_c x[c]·y[c] over a row of f, summed as the row kernels sum (double lanes, a fixed order): a float loop that
// adds into one scalar does not vectorise.
template <class T>
T dot(const T* x, const T* y, int64_t f) {
  return T(rows::vsum(f, [&](int64_t c, auto t) { return rows::ld(x, c, t) * rows::ld(y, c, t); }));
}

// One head's outputs: dz0, dt (b, f), dneg_m (b, b), dw (P); ag, ab its dγ, dβ accumulators.
template <class T>
struct HeadGrads {
  T *dz0, *dt, *dnm, *dw;
  double *ag, *ab;
};

// The VJP of a later step for dA (the gradient of the A it produced), with the step's saved aprev, Z and gh:
// dA becomes the gradient of aprev; dz0, dt, dneg_m, dw, dγ, dβ accumulate.
template <class T>
void later_step_back(const Head<T>& h, const T* aprev, const T* Z, const T* gh, T* dA, const HeadGrads<T>& d,
                     Work<T>& wk) {
  const int64_t b = h.b, f = h.f;
  T *dg = wk.dg.data(), *dz = wk.dz.data(), *dtp = wk.dt.data(), *dY = wk.y.data();
  for (int64_t p = 0; p < h.P; ++p) {
    const int64_t j = h.pj[p];
    d.dw[p] += dot(gh + p * f, dA + p * f, f);
    for (int64_t c = 0; c < f; ++c) dg[p * f + c] = h.w[p] * dA[p * f + c];
    rows::ln_l2_grad_vjp(Z + p * f, h.t + j * f, h.gamma + h.goff[j], h.beta + h.goff[j], dg + p * f, dz + p * f,
                         dtp + p * f, d.ag + h.goff[j], d.ab + h.goff[j], f, h.eps, wk.scratch.data());
    for (int64_t c = 0; c < f; ++c) {
      d.dt[j * f + c] += dtp[p * f + c];
      d.dz0[j * f + c] += dz[p * f + c];
    }
  }
  spread(h, dz, dY);  // dZ on the (b, b·f) grid of the step's product
  spread(h, aprev, wk.grid.data());
  gemm(false, true, b, b, b * f, dY, b * f, wk.grid.data(), b * f, T(1), d.dnm, b);  // d(−M) += dY·gridᵀ
  gemm(true, false, b, b * f, b, h.neg_m, b, dY, b * f, T(0), wk.grid.data(), b * f);  // dgrid = (−M)ᵀ·dY
  for (int64_t p = 0; p < h.P; ++p) {
    const T* src = wk.grid.data() + (h.pj[p] * b + h.pi[p]) * f;
    for (int64_t c = 0; c < f; ++c) dA[p * f + c] += src[c];
  }
}

// The VJP of the first step for dA: dz0, dt, dw, dγ, dβ accumulate.
template <class T>
void first_step_back(const Head<T>& h, const T* g1, const T* dA, const HeadGrads<T>& d, Work<T>& wk) {
  const int64_t b = h.b, f = h.f;
  T *dg1 = wk.dg.data(), *dz = wk.dz.data(), *dtp = wk.dt.data();
  std::fill(dg1, dg1 + b * f, T(0));
  for (int64_t p = 0; p < h.P; ++p) {
    const int64_t j = h.pj[p];
    d.dw[p] += dot(g1 + j * f, dA + p * f, f);
    for (int64_t c = 0; c < f; ++c) dg1[j * f + c] += h.w[p] * dA[p * f + c];
  }
  for (int64_t j = 0; j < b; ++j) {
    rows::ln_l2_grad_vjp(h.z0 + j * f, h.t + j * f, h.gamma + h.goff[j], h.beta + h.goff[j], dg1 + j * f,
                         dz + j * f, dtp + j * f, d.ag + h.goff[j], d.ab + h.goff[j], f, h.eps, wk.scratch.data());
    for (int64_t c = 0; c < f; ++c) {
      d.dt[j * f + c] += dtp[j * f + c];
      d.dz0[j * f + c] += dz[j * f + c];
    }
  }
}

template <class T>
void backward_head(const Head<T>& h, const T* sv, const T* da, const HeadGrads<T>& d, Work<T>& wk) {
  const int64_t b = h.b, f = h.f, P = h.P;
  std::fill(d.dz0, d.dz0 + b * f, T(0));
  std::fill(d.dt, d.dt + b * f, T(0));
  std::fill(d.dnm, d.dnm + b * b, T(0));
  std::fill(d.dw, d.dw + P, T(0));
  T* dA = wk.da.data();
  std::copy(da, da + P * f, dA);
  for (int k = h.steps; k >= 2; --k) {
    const T* cur = sv + b * f + 3 * int64_t(k - 2) * P * f;
    later_step_back(h, cur, cur + P * f, cur + 2 * P * f, dA, d, wk);
  }
  first_step_back(h, sv, dA, d, wk);
}

template <class T>
void backward_t(const std::array<Tensor, 6>& out, const PrefixOperands& o, const Tensor& saved, const Tensor& da) {
  const int64_t G = o.z0.shape()[0], b = o.z0.shape()[1], f = o.z0.shape()[2], P = kPrefixPairs(b);
  const int64_t S = kPrefixSaved(b, f, o.steps), Pg = o.gamma.numel();
  const Pairs pp(b);
  thread_local std::vector<double> own_parts;  // dγ, dβ of each head, reused between calls
  std::vector<double>& parts = own_parts;      // the calling thread's, shared with the workers
  parts.assign(size_t(G * 2 * Pg), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < G; ++g) {
    const Head<T> h = head<T>(o, pp, g);
    double* acc = parts.data() + g * 2 * Pg;
    const HeadGrads<T> d{out[0].data<T>() + g * b * f, out[1].data<T>() + g * b * f, out[2].data<T>() + g * b * b,
                         out[3].data<T>() + g * P,     acc,                          acc + Pg};
    backward_head(h, saved.data<T>() + g * S, da.data<T>() + g * P * f, d, work<T>(b, f));
  }
  sum_head_parts(parts.data(), G, Pg, out[4].data<T>(), out[5].data<T>());
}

}  // namespace
}  // namespace prefix_steps

void ttt_prefix_steps(const Tensor& a, const Tensor& saved, const PrefixOperands& o) {
  PONDER_DISPATCH_FLOAT(o.z0.dtype(), "ttt_prefix_steps", [&] { prefix_steps::forward_t<scalar_t>(a, saved, o); });
}

void ttt_prefix_steps_backward(const std::array<Tensor, 6>& g, const PrefixOperands& o, const Tensor& saved,
                               const Tensor& da) {
  PONDER_DISPATCH_FLOAT(o.z0.dtype(), "ttt_prefix_steps_backward",
                        [&] { prefix_steps::backward_t<scalar_t>(g, o, saved, da); });
}

}  // namespace ponder::cpu
