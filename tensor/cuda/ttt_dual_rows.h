// The row formulas of the CUDA TTT-Linear dual-form kernels (tensor/cuda/ttt_dual_body.h): the layer norms over a
// head's f columns, their inner-loss gradient and its VJP (tensor/cpu/rows.h's formulas, in double), as stages that
// every thread of a block runs, a block barrier after each. One thread per row left 15 of 256 threads working
// through long serial loops: those phases were half of the backward kernel's time at the 125M shape.
//
// A stage's work item (i, j) is row i's column chunk j: columns j, j + nc, j + 2·nc, … for nc = chunks(f), so the
// threads of a warp read neighbouring columns. An item writes its partial sums to slots; a later stage gets row i's
// total of a slot by adding its nc partials in chunk order, so results do not depend on the number of threads.
// Plain C++ with PONDER_HD, run on the CPU by tests/test_cuda.cpp like the rest of the body. `H` is the body's
// Head<T>: b, f, eps, the slots `part` (kSlots, b, nc), the rows' γ/β offsets `roff` (b; doubles holding exact
// integers) and γ, β.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/cuda/host_device.h"

namespace ponder::cuda::dual {

constexpr int64_t kChunk = 8;  // columns per work item
// Partial-sum slots, named as in ln_l2_grad_vjp below; kF also carries the backward's last-row sums, which are read
// before the VJP's sums (stage_vjp_sums) write it.
enum Slot : int { kSum, kVar, kM1, kM2, kA, kB, kC, kE, kF, kSlots };
PONDER_HD constexpr int64_t chunks(int64_t f) { return (f + kChunk - 1) / kChunk; }

// fn(i, j) for thread tid's work items.
template <class H, class F>
PONDER_HD void row_items(const H& h, int tid, int nt, F fn) {
  const int64_t nc = chunks(h.f);
  for (int64_t x = tid; x < h.b * nc; x += nt) fn(x / nc, x % nc);
}
template <class H>
PONDER_HD double& part(const H& h, int s, int64_t i, int64_t j) {
  return h.part[(s * h.b + i) * chunks(h.f) + j];
}
template <class H>
PONDER_HD double total(const H& h, int s, int64_t i) {
  const int64_t nc = chunks(h.f);
  const double* q = h.part + (s * h.b + i) * nc;
  double a = 0;
  for (int64_t j = 0; j < nc; ++j) a += q[j];
  return a;
}
template <class H>
PONDER_HD double mean(const H& h, int s, int64_t i) {
  return total(h, s, i) / double(h.f);
}
template <class H>
PONDER_HD int64_t roff(const H& h, int64_t i) {
  return int64_t(h.roff[i]);
}
#define PONDER_CHUNK_COLUMNS(h, j, c) for (int64_t c = (j), nc_ = chunks((h).f); c < (h).f; c += nc_)

// ---- a layer norm's statistics over the rows of p: Σp (kSum), then Σ(p − μ)² (kVar); then μ and s = 1/σ.
template <class H, class T>
PONDER_HD void stage_sum(const H& h, const T* p, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    double a = 0;
    PONDER_CHUNK_COLUMNS(h, j, c) a += double(p[i * h.f + c]);
    part(h, kSum, i, j) = a;
  });
}
template <class H, class T>
PONDER_HD void stage_var(const H& h, const T* p, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const double mu = mean(h, kSum, i);
    double a = 0;
    PONDER_CHUNK_COLUMNS(h, j, c) a += (double(p[i * h.f + c]) - mu) * (double(p[i * h.f + c]) - mu);
    part(h, kVar, i, j) = a;
  });
}
struct Norm {
  double mu, s;
  PONDER_HD double hat(double x) const { return (x - mu) * s; }
};
template <class H>
PONDER_HD Norm norm_of(const H& h, int64_t i) {
  return {mean(h, kSum, i), 1.0 / ::sqrt(mean(h, kVar, i) + h.eps)};  // :: : ponder::sqrt is the tensor op
}

// ---- out = γ⊙x̂ + β + add (the dual form's output with its residual), after the statistics of p.
template <class H, class T>
PONDER_HD void stage_affine(const H& h, const T* p, const T* add, T* out, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const Norm n = norm_of(h, i);
    const T *gm = h.gamma + roff(h, i), *bt = h.beta + roff(h, i);
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const int64_t e = i * h.f + c;
      out[e] = T(double(gm[c]) * n.hat(double(p[e])) + double(bt[c])) + add[e];
    }
  });
}

// ---- its backward for upstream q: m1 = Σ q⊙γ, m2 = Σ q⊙γ⊙x̂; then dx = s·(q⊙γ − m1 − x̂·m2), and the row's dγ, dβ
// terms ag = q⊙x̂, ab = q (stored, not added).
template <class H, class T>
PONDER_HD void stage_affine_bwd_sums(const H& h, const T* p, const T* q, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const Norm n = norm_of(h, i);
    const T* gm = h.gamma + roff(h, i);
    double m1 = 0, m2 = 0;
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const int64_t e = i * h.f + c;
      const double gg = double(q[e]) * double(gm[c]);
      m1 += gg;
      m2 += gg * n.hat(double(p[e]));
    }
    part(h, kM1, i, j) = m1;
    part(h, kM2, i, j) = m2;
  });
}
template <class H, class T>
PONDER_HD void stage_affine_bwd(const H& h, const T* p, const T* q, T* dx, double* ag, double* ab, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const Norm n = norm_of(h, i);
    const double m1 = mean(h, kM1, i), m2 = mean(h, kM2, i);
    const T* gm = h.gamma + roff(h, i);
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const int64_t e = i * h.f + c;
      const double x = n.hat(double(p[e])), gi = double(q[e]), gg = gi * double(gm[c]);
      dx[e] = T(n.s * (gg - m1 - x * m2));
      ag[e] = gi * x;
      ab[e] = gi;
    }
  });
}

// ---- the inner loss's gradient: with r = γ⊙x̂ + β − t and y = r⊙γ, m1 = Σ y, m2 = Σ y⊙x̂; out = s·(y − m1 − x̂·m2).
// With `w` (the VJP's upstream) the same pass also sums a = Σ w, b = Σ w⊙x̂.
template <class H, class T>
PONDER_HD void stage_l2_sums(const H& h, const T* z, const T* t, const T* w, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const Norm n = norm_of(h, i);
    const T *gm = h.gamma + roff(h, i), *bt = h.beta + roff(h, i);
    double m1 = 0, m2 = 0, a = 0, b = 0;
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const int64_t e = i * h.f + c;
      const double x = n.hat(double(z[e])), g = double(gm[c]);
      const double y = (g * x + double(bt[c]) - double(t[e])) * g;
      m1 += y;
      m2 += y * x;
      if (w) {
        a += double(w[e]);
        b += double(w[e]) * x;
      }
    }
    part(h, kM1, i, j) = m1;
    part(h, kM2, i, j) = m2;
    if (w) {
      part(h, kA, i, j) = a;
      part(h, kB, i, j) = b;
    }
  });
}
template <class H, class T>
PONDER_HD void stage_l2_grad(const H& h, const T* z, const T* t, T* out, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const Norm n = norm_of(h, i);
    const double m1 = mean(h, kM1, i), m2 = mean(h, kM2, i);
    const T *gm = h.gamma + roff(h, i), *bt = h.beta + roff(h, i);
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const int64_t e = i * h.f + c;
      const double x = n.hat(double(z[e])), g = double(gm[c]);
      out[e] = T(n.s * ((g * x + double(bt[c]) - double(t[e])) * g - m1 - x * m2));
    }
  });
}

// ---- the VJP of the inner gradient for upstream w (after stage_l2_sums with w): per element, with the row's means,
// dgy = s·(w − a − x̂·b) and dx̂ = −s·(m2·w + b·r·γ) + dgy·γ²; c = mean of w·s·(y − m1 − x̂·m2) (kC); e, f = means of
// dx̂ and dx̂·x̂ (kE, kF); then dz = s·(dx̂ − e − x̂·f) − s·c·x̂, dt = −dgy·γ, and the row's dγ += dgy·(r + γ·x̂),
// dβ += dgy·γ.
template <class H, class T>
struct VjpTerms {
  const H& h;
  const T *z, *t, *w;
  int64_t i;
  Norm n;
  double m1, m2, a, b;
  const T *gm, *bt;
  PONDER_HD VjpTerms(const H& h_, const T* z_, const T* t_, const T* w_, int64_t i_)
      : h(h_), z(z_), t(t_), w(w_), i(i_), n(norm_of(h_, i_)), m1(mean(h_, kM1, i_)), m2(mean(h_, kM2, i_)),
        a(mean(h_, kA, i_)), b(mean(h_, kB, i_)), gm(h_.gamma + roff(h_, i_)), bt(h_.beta + roff(h_, i_)) {}
  PONDER_HD double x(int64_t c) const { return n.hat(double(z[i * h.f + c])); }
  PONDER_HD double r(int64_t c, double xc) const { return double(gm[c]) * xc + double(bt[c]) - double(t[i * h.f + c]); }
  PONDER_HD double dgy(int64_t c, double xc) const { return n.s * (double(w[i * h.f + c]) - a - xc * b); }
  PONDER_HD double dxh(int64_t c, double xc) const {
    const double g = double(gm[c]);
    return -n.s * (m2 * double(w[i * h.f + c]) + b * r(c, xc) * g) + dgy(c, xc) * g * g;
  }
};
// The VJP's row sums c (kC), e and f (kE, kF) in one pass over the item's columns; each sum adds its terms in column
// order as the two stages it replaces did, so the bits are theirs with one barrier and one VjpTerms fewer.
template <class H, class T>
PONDER_HD void stage_vjp_sums(const H& h, const T* z, const T* t, const T* w, int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const VjpTerms<H, T> v(h, z, t, w, i);
    double c_sum = 0, e = 0, f = 0;
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const double xc = v.x(c), d = v.dxh(c, xc);
      c_sum += double(w[i * h.f + c]) * (v.n.s * (v.r(c, xc) * double(v.gm[c]) - v.m1 - xc * v.m2));
      e += d;
      f += d * xc;
    }
    part(h, kC, i, j) = c_sum;
    part(h, kE, i, j) = e;
    part(h, kF, i, j) = f;
  });
}
template <class H, class T>
PONDER_HD void stage_vjp_out(const H& h, const T* z, const T* t, const T* w, T* dz, T* dt, double* ag, double* ab,
                             int tid, int nt) {
  row_items(h, tid, nt, [&](int64_t i, int64_t j) {
    const VjpTerms<H, T> v(h, z, t, w, i);
    const double cm = mean(h, kC, i), em = mean(h, kE, i), fm = mean(h, kF, i), s = v.n.s;
    PONDER_CHUNK_COLUMNS(h, j, c) {
      const int64_t e = i * h.f + c;
      const double xc = v.x(c), g = double(v.gm[c]), d = v.dgy(c, xc);
      dz[e] = T(s * (v.dxh(c, xc) - em - xc * fm) - s * cm * xc);
      dt[e] = T(-(d * g));
      ag[e] += d * (v.r(c, xc) + g * xc);
      ab[e] += d * g;
    }
  });
}

}  // namespace ponder::cuda::dual
