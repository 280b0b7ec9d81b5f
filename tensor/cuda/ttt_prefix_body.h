// The body of the CUDA prefix-mode kernels (tensor/cuda/ttt_prefix.cu): K closed-form inner steps on one unit, as
// the CPU kernel computes them (tensor/cpu/ttt_prefix.cpp; the map: tensor/backend.h's PrefixOperands), one thread
// block per head, written as phases with a block barrier after each: phase(a, g, ph, tid, nt) does thread tid's
// share of one step of head g and reads only what earlier phases wrote. Plain C++ with PONDER_HD, so
// tests/test_cuda.cpp runs the phases thread by thread on the CPU against the CPU kernel on any machine.
//
// A step reads, for every causal pair p = (j, i) (j ≤ i, j-major), Z_p = Z0_j + Σ_{j' ≤ i} (−M)[j][j']·A_(j', i):
// the CPU kernel spreads A to a (b × b·f) grid for one GEMM; here each element of Z sums its i + 1 terms directly
// (the GEMM's other products multiply zeros). The LN+L2 gradients of the pairs' rows use the TTT-Linear kernel's
// row stages (tensor/cuda/ttt_dual_rows.h) over P = b(b + 1)/2 rows, the targets copied to one row per pair. A
// head's intermediates and the saved steps live in global memory. dγ and dβ are summed per head in row order and
// then over heads in order (sum_head_gamma_parts), so results do not depend on scheduling.
#pragma once
#include <cstdint>

#include "tensor/cuda/row_geom.h"
#include "tensor/cuda/ttt_dual_rows.h"

namespace ponder::cuda::prefix {

using cuda::gamma_offset;
using cuda::RowGeom;
namespace rows = cuda::dual;  // the row stages

template <class T>
struct Args {
  const T *z0, *t, *neg_m, *w, *gamma, *beta;  // (G, b, f), (G, b, f), (G, b, b), (G, P); γ, β as rows take them
  T *a, *saved;      // (G, P, f), (G, kPrefixSaved): written by the forward; the backward reads saved
  const T* da;       // (G, P, f): the backward's upstream
  T *dz0, *dt, *dnm, *dw;  // (G, b, f), (G, b, f), (G, b, b), (G, P)
  double* parts;     // (G, 2, Pg): each head's dγ, dβ, zeroed by the caller
  T* scratch;        // (G, scratch_t)
  double* dscr;      // (G, scratch_d)
  RowGeom geo;       // γ's offsets over the G·b rows of z0
  int64_t b, f, P, Pg;
  int steps;
  double eps;
};

PONDER_HD constexpr int64_t pairs(int64_t b) { return b * (b + 1) / 2; }  // = kPrefixPairs
PONDER_HD constexpr int64_t saved_size(int64_t b, int64_t f, int steps) {  // = kPrefixSaved
  return b * f + 3 * int64_t(steps - 1) * pairs(b) * f;
}
// Scratch per head in T: the pairs' targets, and the backward's dA, dg, dz, dt of the pairs (P × f each).
PONDER_HD constexpr int64_t scratch_t(int64_t b, int64_t f) { return 5 * pairs(b) * f; }
// In doubles: the row stages' partial sums over P rows, the γ offsets of the P pair rows and of the b rows, and the
// per-row dγ, dβ terms of P + b rows.
PONDER_HD constexpr int64_t scratch_d(int64_t b, int64_t f) {
  return rows::kSlots * pairs(b) * rows::chunks(f) + pairs(b) + b + 2 * (pairs(b) + b) * f;
}

// The first index of row j's pairs (j, j), (j, j + 1), …, (j, b − 1).
PONDER_HD inline int64_t pair_at(int64_t b, int64_t j) { return j * b - j * (j - 1) / 2; }
// Pair p's j (its row) and i (its position).
PONDER_HD inline void pair_of(int64_t b, int64_t p, int64_t& j, int64_t& i) {
  j = 0;
  while (p >= b - j) p -= b - j, ++j;
  i = j + p;
}

// What the row stages take (the `H` of tensor/cuda/ttt_dual_rows.h): `b` rows of f, their γ offsets.
template <class T>
struct Rows {
  int64_t b, f;
  double eps;
  double *part, *roff;
  const T *gamma, *beta;
};

// Head g's pointers.
template <class T>
struct Head {
  const T *z0, *t, *neg_m, *w;
  T *a, *saved, *tp, *dA, *dg, *dz, *dtp;
  Rows<T> pr, br;    // the P pair rows, the b rows of z0
  double *rg, *rb;   // (P + b, f): the pair rows' dγ, dβ terms, then the b rows'
  int64_t b, f, P;
};

template <class T>
PONDER_HD Head<T> head(const Args<T>& a, int64_t g) {
  const int64_t b = a.b, f = a.f, P = a.P;
  Head<T> h;
  h.z0 = a.z0 + g * b * f, h.t = a.t + g * b * f, h.neg_m = a.neg_m + g * b * b, h.w = a.w + g * P;
  h.a = a.a ? a.a + g * P * f : nullptr;
  h.saved = a.saved + g * saved_size(b, f, a.steps);
  T* s = a.scratch + g * scratch_t(b, f);
  h.tp = s, h.dA = s + P * f, h.dg = s + 2 * P * f, h.dz = s + 3 * P * f, h.dtp = s + 4 * P * f;
  double* d = a.dscr + g * scratch_d(b, f);
  double* roff = d + rows::kSlots * P * rows::chunks(f);
  h.pr = {P, f, a.eps, d, roff, a.gamma, a.beta};
  h.br = {b, f, a.eps, d, roff + P, a.gamma, a.beta};  // shares the partial sums: one set of rows at a time
  h.rg = roff + P + b, h.rb = h.rg + (P + b) * f;
  h.b = b, h.f = f, h.P = P;
  return h;
}

// ---- phases shared by both directions

// The rows' γ offsets and the pairs' targets (row j of t for pair (j, i)).
template <class T>
PONDER_HD void setup(const Args<T>& a, const Head<T>& h, int64_t g, int tid, int nt) {
  for (int64_t j = tid; j < h.b; j += nt) h.br.roff[j] = double(gamma_offset(a.geo, g * h.b + j));
  for (int64_t p = tid; p < h.P; p += nt) {
    int64_t j, i;
    pair_of(h.b, p, j, i);
    h.pr.roff[p] = double(gamma_offset(a.geo, g * h.b + j));
  }
  for (int64_t x = tid; x < h.P * h.f; x += nt) {
    int64_t j, i;
    pair_of(h.b, x / h.f, j, i);
    h.tp[x] = h.t[j * h.f + x % h.f];
  }
}

// The LN+L2 gradient of rows z against targets t into out: four row stages (statistics, sums, output).
template <class T>
PONDER_HD void l2_grad_stage(const Rows<T>& r, const T* z, const T* t, T* out, int stage, int tid, int nt) {
  switch (stage) {
    case 0: rows::stage_sum(r, z, tid, nt); return;
    case 1: rows::stage_var(r, z, tid, nt); return;
    case 2: rows::stage_l2_sums(r, z, t, static_cast<const T*>(nullptr), tid, nt); return;
    default: rows::stage_l2_grad(r, z, t, out, tid, nt);
  }
}
// Its VJP for upstream w: five row stages; dz, dt written, the rows' dγ, dβ terms added to ag, ab.
template <class T>
PONDER_HD void l2_vjp_stage(const Rows<T>& r, const T* z, const T* t, const T* w, T* dz, T* dt, double* ag,
                            double* ab, int stage, int tid, int nt) {
  switch (stage) {
    case 0: rows::stage_sum(r, z, tid, nt); return;
    case 1: rows::stage_var(r, z, tid, nt); return;
    case 2: rows::stage_l2_sums(r, z, t, w, tid, nt); return;
    case 3: rows::stage_vjp_sums(r, z, t, w, tid, nt); return;
    default: rows::stage_vjp_out(r, z, t, w, dz, dt, ag, ab, tid, nt);
  }
}

// Step k ≥ 2's saved A it started from, its Z and its gradients (P × f each).
template <class T>
PONDER_HD T* step_saved(const Head<T>& h, int k) {
  return h.saved + h.b * h.f + 3 * int64_t(k - 2) * h.P * h.f;
}

// ---- forward: setup, the first step (4 row stages, then A), each later step (Z, 4 row stages, A += η⊙gh)

constexpr int kFirstPhases = 5, kLaterPhases = 6;
PONDER_HD inline int forward_phases(int steps) { return 1 + kFirstPhases + kLaterPhases * (steps - 1); }

template <class T>
PONDER_HD void later_forward(const Head<T>& h, int k, int ph, int tid, int nt) {
  T *aprev = step_saved(h, k), *Z = aprev + h.P * h.f, *gh = Z + h.P * h.f;
  const int64_t b = h.b, f = h.f;
  if (ph == 0) {  // Z at the pairs from A, and A kept as the step's start
    for (int64_t x = tid; x < h.P * f; x += nt) {
      const int64_t p = x / f, c = x % f;
      int64_t j, i;
      pair_of(b, p, j, i);
      T acc = T(0);
      for (int64_t jp = 0; jp <= i; ++jp) acc += h.neg_m[j * b + jp] * h.a[(pair_at(b, jp) + i - jp) * f + c];
      Z[x] = h.z0[j * f + c] + acc;
      aprev[x] = h.a[x];
    }
  } else if (ph <= 4) {
    l2_grad_stage(h.pr, Z, h.tp, gh, ph - 1, tid, nt);
  } else {
    for (int64_t x = tid; x < h.P * f; x += nt) h.a[x] += h.w[x / f] * gh[x];
  }
}

template <class T>
PONDER_HD void forward_phase(const Args<T>& a, int64_t g, int ph, int tid, int nt) {
  const Head<T> h = head(a, g);
  if (ph == 0) return setup(a, h, g, tid, nt);
  if (ph <= 4) return l2_grad_stage(h.br, h.z0, h.t, h.saved, ph - 1, tid, nt);  // g1 = saved[0 : b·f]
  if (ph == kFirstPhases) {  // A = η-weighted g1 at the pairs
    for (int64_t x = tid; x < h.P * h.f; x += nt) {
      int64_t j, i;
      pair_of(h.b, x / h.f, j, i);
      h.a[x] = h.w[x / h.f] * h.saved[j * h.f + x % h.f];
    }
    return;
  }
  const int q = ph - 1 - kFirstPhases;
  later_forward(h, 2 + q / kLaterPhases, q % kLaterPhases, tid, nt);
}

// ---- backward: setup, each later step from the last (dw and dg, 5 row stages, then dz0, dt, d(−M) and dA), the
// first step (dw and dg1, 5 row stages, then dz0, dt and the head's dγ, dβ)

constexpr int kLaterBack = 7, kFirstBack = 7;
PONDER_HD inline int backward_phases(int steps) { return 1 + kLaterBack * (steps - 1) + kFirstBack; }

template <class T>
PONDER_HD void backward_setup(const Args<T>& a, const Head<T>& h, int64_t g, int tid, int nt) {
  setup(a, h, g, tid, nt);
  T *dz0 = a.dz0 + g * h.b * h.f, *dt = a.dt + g * h.b * h.f, *dnm = a.dnm + g * h.b * h.b, *dw = a.dw + g * h.P;
  for (int64_t x = tid; x < h.P * h.f; x += nt) h.dA[x] = a.da[g * h.P * h.f + x];
  for (int64_t x = tid; x < h.b * h.f; x += nt) dz0[x] = dt[x] = T(0);
  for (int64_t x = tid; x < h.b * h.b; x += nt) dnm[x] = T(0);
  for (int64_t p = tid; p < h.P; p += nt) dw[p] = T(0);
  for (int64_t x = tid; x < (h.P + h.b) * h.f; x += nt) h.rg[x] = h.rb[x] = 0;
}

// Σ_c x[c]·y[c] over a row of f.
template <class T>
PONDER_HD T dot(const T* x, const T* y, int64_t f) {
  double s = 0;
  for (int64_t c = 0; c < f; ++c) s += double(x[c]) * double(y[c]);
  return T(s);
}

template <class T>
PONDER_HD void later_backward(const Args<T>& a, const Head<T>& h, int64_t g, int k, int ph, int tid, int nt) {
  const T *aprev = step_saved(h, k), *Z = aprev + h.P * h.f, *gh = Z + h.P * h.f;
  const int64_t b = h.b, f = h.f, P = h.P;
  if (ph == 0) {  // dw += gh·dA, dg = η⊙dA
    for (int64_t p = tid; p < P; p += nt) a.dw[g * P + p] += dot(gh + p * f, h.dA + p * f, f);
    for (int64_t x = tid; x < P * f; x += nt) h.dg[x] = h.w[x / f] * h.dA[x];
    return;
  }
  if (ph <= 5) return l2_vjp_stage(h.pr, Z, h.tp, h.dg, h.dz, h.dtp, h.rg, h.rb, ph - 1, tid, nt);
  T *dz0 = a.dz0 + g * b * f, *dt = a.dt + g * b * f, *dnm = a.dnm + g * b * b;
  for (int64_t x = tid; x < b * f; x += nt) {  // dz0, dt of row j: its pairs' dZ, dt
    const int64_t j = x / f, c = x % f;
    for (int64_t p = pair_at(b, j); p < pair_at(b, j + 1); ++p) dz0[x] += h.dz[p * f + c], dt[x] += h.dtp[p * f + c];
  }
  for (int64_t x = tid; x < b * b; x += nt) {  // d(−M)[j][j'] += Σ_{i ≥ j, j'} dZ_(j, i)·A_(j', i)
    const int64_t j = x / b, jp = x % b;
    T acc = T(0);
    for (int64_t i = j > jp ? j : jp; i < b; ++i)
      acc += dot(h.dz + (pair_at(b, j) + i - j) * f, aprev + (pair_at(b, jp) + i - jp) * f, f);
    dnm[x] += acc;
  }
  for (int64_t x = tid; x < P * f; x += nt) {  // dA_(j', i) += Σ_{j ≤ i} (−M)[j][j']·dZ_(j, i)
    const int64_t c = x % f;
    int64_t jp, i;
    pair_of(b, x / f, jp, i);
    T acc = T(0);
    for (int64_t j = 0; j <= i; ++j) acc += h.neg_m[j * b + jp] * h.dz[(pair_at(b, j) + i - j) * f + c];
    h.dA[x] += acc;
  }
}

template <class T>
PONDER_HD void first_backward(const Args<T>& a, const Head<T>& h, int64_t g, int ph, int tid, int nt) {
  const int64_t b = h.b, f = h.f, P = h.P;
  const T* g1 = h.saved;
  if (ph == 0) {  // dw += g1_j·dA, dg1_j = Σ over row j's pairs of η⊙dA (the first b rows of dg)
    for (int64_t p = tid; p < P; p += nt) {
      int64_t j, i;
      pair_of(b, p, j, i);
      a.dw[g * P + p] += dot(g1 + j * f, h.dA + p * f, f);
    }
    for (int64_t x = tid; x < b * f; x += nt) {
      const int64_t j = x / f, c = x % f;
      T acc = T(0);
      for (int64_t p = pair_at(b, j); p < pair_at(b, j + 1); ++p) acc += h.w[p] * h.dA[p * f + c];
      h.dg[x] = acc;
    }
    return;
  }
  if (ph <= 5) return l2_vjp_stage(h.br, h.z0, h.t, h.dg, h.dz, h.dtp, h.rg + P * f, h.rb + P * f, ph - 1, tid, nt);
  T *dz0 = a.dz0 + g * b * f, *dt = a.dt + g * b * f;
  for (int64_t x = tid; x < b * f; x += nt) dz0[x] += h.dz[x], dt[x] += h.dtp[x];
}

// This head's dγ, dβ: the P pair rows' terms and then the b rows', in row order at their γ offsets.
template <class T>
PONDER_HD void gamma_parts(const Args<T>& a, const Head<T>& h, int64_t g, int tid, int nt) {
  double* parts = a.parts + g * 2 * a.Pg;
  for (int64_t c = tid; c < h.f; c += nt)
    for (int64_t r = 0; r < h.P + h.b; ++r) {
      const int64_t o = int64_t(r < h.P ? h.pr.roff[r] : h.br.roff[r - h.P]) + c;
      parts[o] += h.rg[r * h.f + c];
      parts[a.Pg + o] += h.rb[r * h.f + c];
    }
}

template <class T>
PONDER_HD void backward_phase(const Args<T>& a, int64_t g, int ph, int tid, int nt) {
  const Head<T> h = head(a, g);
  if (ph == 0) return backward_setup(a, h, g, tid, nt);
  const int later = kLaterBack * (a.steps - 1);
  if (ph <= later) {
    const int q = ph - 1;
    return later_backward(a, h, g, a.steps - q / kLaterBack, q % kLaterBack, tid, nt);
  }
  first_backward(a, h, g, ph - 1 - later, tid, nt);
  // The last phase: the rows' dγ, dβ terms are complete after the VJP's output stage, before it.
  if (ph == later + kFirstBack) gamma_parts(a, h, g, tid, nt);
}

}  // namespace ponder::cuda::prefix
