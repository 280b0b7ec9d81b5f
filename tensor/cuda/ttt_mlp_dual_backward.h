// The CUDA TTT-MLP dual form's backward phases (tensor/cpu/ttt_mlp_dual.cpp's backward_head, step by step), on the
// steps of tensor/cuda/ttt_mlp_dual_body.h. Without saved intermediates the backward first runs the forward's
// phases 0–13 (kRecomputePhases) into its scratch. dγ, dβ: each row's terms in rg, rb, then per head at the rows' γ
// offsets (the last phase), then over heads by the TTT-Linear kernels' two sums.
#pragma once
#include "tensor/cuda/ttt_mlp_dual_body.h"

namespace ponder::cuda::mlp {

// The forward's phases that compute the saved intermediates; the backward's own.
constexpr int kRecomputePhases = 14, kBackwardPhases = 24;

// Phases 0–13: the output norm's backward and the two combines (Zb2 through layer 2, then Zb1 through layer 1).
template <int U, class T>
PONDER_HD void backward_combines(const Args<T>& a, const RowGeom& rows, const Head<T>& d, int64_t g, int phase,
                                 int tid, int nt) {
  const int64_t b = d.b, f = d.f, h = d.hw;
  T *dq = a.dq + g * b * f, *dk = a.dk + g * b * f, *deta = a.deta + g * b * b;
  T *dW1 = a.dW1 + g * f * h, *dW2 = a.dW2 + g * h * f;
  const T *dO = a.dO + g * b * f, *db1u = a.db1u + g * h;
  switch (phase) {
    case 0:
      dual::row_offsets(d, rows, tid, nt);
      cheap_parts(d, tid, nt);
      m_from(d, d.s1, d.m1, tid, nt);
      m_from(d, d.s2, d.m2, tid, nt);
      each(b * b, tid, nt, [&](int64_t x) { deta[x] = T(0); });
      each(b * f, tid, nt, [&](int64_t x) { dq[x] = dO[x]; });
      each(f * h, tid, nt, [&](int64_t x) { dW1[x] = a.dW1u[g * f * h + x]; });
      each(h * f, tid, nt, [&](int64_t x) { dW2[x] = a.dW2u[g * h * f + x]; });
      break;
    case 1: dual::stage_sum(d, d.zb2, tid, nt); break;  // dZb2 = LN's backward for dO; the rows' dγ, dβ terms
    case 2: dual::stage_var(d, d.zb2, tid, nt); break;
    case 3: dual::stage_affine_bwd_sums(d, d.zb2, dO, tid, nt); break;
    case 4: dual::stage_affine_bwd(d, d.zb2, dO, d.dzb2, d.rg, d.rb, tid, nt); break;
    case 5: combine_a<U>(d, h, f, d.dzb2, d.xb2, d.W2, d.g2, d.dxb2, false, dW2, tid, nt); break;
    case 6: combine_b(d, d.s2, deta, tid, nt); break;
    case 7: combine_c<U>(d, h, f, d.dzb2, d.xb2, d.x2, d.m2, d.dxb2, d.dx2, d.dg2, tid, nt); break;
    case 8: each(b * h, tid, nt, [&](int64_t x) { d.dxb2[x] *= d.db1[x]; }); break;  // dZb1, in place
    case 9:
      combine_a<U>(d, f, h, d.dxb2, d.q, d.W1, d.g1, dq, true, dW1, tid, nt);
      prod<U, T>(1, h, b, tid, nt, [&](int64_t, int64_t c) { return db1u[c]; }, [](int64_t, int64_t) { return T(1); },
              [&](int64_t j, int64_t c) { return d.dxb2[j * h + c]; },
              [&](int64_t, int64_t c, T s) { a.db1[g * h + c] = s; });
      break;
    case 10: combine_b(d, d.s1, deta, tid, nt); break;
    case 11: combine_c<U>(d, f, h, d.dxb2, d.q, d.k, d.m1, dq, dk, d.dg1, tid, nt); break;
    case 12:  // through the two updates
      back_update_a<U>(d, f, h, d.k, d.g1, a.dW1u + g * f * h, db1u, d.dg1, d.dpx1, tid, nt);
      back_update_a<U>(d, h, f, d.x2, d.g2, a.dW2u + g * h * f, a.db2u + g * f, d.dg2, d.dpx2, tid, nt);
      break;
    case 13:
      back_update_b(d, f, h, d.k, d.g1, db1u, d.dpx1, dk, d.del, tid, nt);
      back_update_b(d, h, f, d.x2, d.g2, a.db2u + g * f, d.dpx2, d.dx2, d.del + b, tid, nt);
      break;
    default: break;
  }
}

// Phases 14–23: G1 = P⊙gelu'(Z1) and P = G2·W2ᵀ, then G2's VJP, then Z2 and Z1.
template <int U, class T>
PONDER_HD void backward_inner(const Args<T>& a, const Head<T>& d, int64_t g, int phase, int tid, int nt) {
  const int64_t b = d.b, f = d.f, h = d.hw;
  T *dk = a.dk + g * b * f, *dv = a.dv + g * b * f, *dW1 = a.dW1 + g * f * h, *dW2 = a.dW2 + g * h * f;
  T* deta_last = a.deta + g * b * b + (b - 1) * b;
  switch (phase) {
    case 14:  // the updates' sums into η's last row; dZ1's part through P (tmp), dP = dG1⊙gelu'(Z1)
      each(b, tid, nt, [&](int64_t j) {
        deta_last[j] += T(d.del[j]);
        deta_last[j] += T(d.del[b + j]);
      });
      each(b * h, tid, nt, [&](int64_t x) {
        d.tmp[x] = d.dg1[x] * d.p[x] * T(gelu2(double(d.z1[x])));
        d.dg1[x] *= d.d1[x];
      });
      break;
    case 15:  // dG2 += dP·W2; dW2 += dPᵀ·G2
      prod<U, T>(b, f, h, tid, nt, [&](int64_t i, int64_t c) { return d.dg2[i * f + c]; },
              [&](int64_t i, int64_t k) { return d.dg1[i * h + k]; }, [&](int64_t k, int64_t c) { return d.W2[k * f + c]; },
              [&](int64_t i, int64_t c, T s) { d.dg2[i * f + c] = s; });
      prod<U, T>(h, f, b, tid, nt, [&](int64_t r, int64_t c) { return dW2[r * f + c]; },
              [&](int64_t r, int64_t j) { return d.dg1[j * h + r]; }, [&](int64_t j, int64_t c) { return d.g2[j * f + c]; },
              [&](int64_t r, int64_t c, T s) { dW2[r * f + c] = s; });
      break;
    case 16: dual::stage_sum(d, d.z2, tid, nt); break;  // dZ2, dv = G2's VJP; dγ, dβ terms added to the rows'
    case 17: dual::stage_var(d, d.z2, tid, nt); break;
    case 18: dual::stage_l2_sums(d, d.z2, d.t, static_cast<const T*>(d.dg2), tid, nt); break;
    case 19: dual::stage_vjp_sums(d, d.z2, d.t, static_cast<const T*>(d.dg2), tid, nt); break;
    case 20: dual::stage_vjp_out(d, d.z2, d.t, static_cast<const T*>(d.dg2), d.dz2, dv, d.rg, d.rb, tid, nt); break;
    case 21:  // dk −= dv; db2 = db2' + Σ_j (dZb2 + dZ2); Z2 = X2·W2 + b2: dX2 += dZ2·W2ᵀ; dW2 += X2ᵀ·dZ2 (reads no dk)
      each(b * f, tid, nt, [&](int64_t x) { dk[x] -= dv[x]; });
      prod<U, T>(1, f, b, tid, nt, [&](int64_t, int64_t c) { return a.db2u[g * f + c]; }, [](int64_t, int64_t) { return T(1); },
              [&](int64_t j, int64_t c) { return d.dzb2[j * f + c] + d.dz2[j * f + c]; },
              [&](int64_t, int64_t c, T s) { a.db2[g * f + c] = s; });
      prod<U, T>(b, h, f, tid, nt, [&](int64_t i, int64_t r) { return d.dx2[i * h + r]; },
              [&](int64_t i, int64_t c) { return d.dz2[i * f + c]; }, [&](int64_t c, int64_t r) { return d.W2[r * f + c]; },
              [&](int64_t i, int64_t r, T s) { d.dx2[i * h + r] = s; });
      prod<U, T>(h, f, b, tid, nt, [&](int64_t r, int64_t c) { return dW2[r * f + c]; },
              [&](int64_t r, int64_t j) { return d.x2[j * h + r]; }, [&](int64_t j, int64_t c) { return d.dz2[j * f + c]; },
              [&](int64_t r, int64_t c, T s) { dW2[r * f + c] = s; });
      break;
    case 22: each(b * h, tid, nt, [&](int64_t x) { d.tmp[x] += d.dx2[x] * d.d1[x]; }); break;  // dZ1 in full
    case 23:  // Z1 = k·W1 + b1: dk += dZ1·W1ᵀ; dW1 += kᵀ·dZ1; db1 += Σ_j dZ1; the head's dγ, dβ from the rows' terms
      prod<U, T>(b, f, h, tid, nt, [&](int64_t i, int64_t c) { return dk[i * f + c]; },
              [&](int64_t i, int64_t k) { return d.tmp[i * h + k]; }, [&](int64_t k, int64_t c) { return d.W1[c * h + k]; },
              [&](int64_t i, int64_t c, T s) { dk[i * f + c] = s; });
      prod<U, T>(f, h, b, tid, nt, [&](int64_t r, int64_t c) { return dW1[r * h + c]; },
              [&](int64_t r, int64_t j) { return d.k[j * f + r]; }, [&](int64_t j, int64_t c) { return d.tmp[j * h + c]; },
              [&](int64_t r, int64_t c, T s) { dW1[r * h + c] = s; });
      prod<U, T>(1, h, b, tid, nt, [&](int64_t, int64_t c) { return a.db1[g * h + c]; }, [](int64_t, int64_t) { return T(1); },
              [&](int64_t j, int64_t c) { return d.tmp[j * h + c]; }, [&](int64_t, int64_t c, T s) { a.db1[g * h + c] = s; });
      dual::bwd_gamma_parts(d, a.P, a.parts + g * 2 * a.P, tid, nt);
      break;
    default: break;
  }
}

// rows as for forward_phase.
template <int U, class T>
PONDER_HD void backward_phase(const Args<T>& a, const RowGeom& rows, int64_t g, int phase, int tid, int nt) {
  const Head<T> d = head(a, g);
  phase < 14 ? backward_combines<U>(a, rows, d, g, phase, tid, nt) : backward_inner<U>(a, d, g, phase, tid, nt);
}
template <int U, class T>
PONDER_HD void backward_phase(const Args<T>& a, int64_t g, int phase, int tid, int nt) {
  backward_phase<U>(a, a.rows, g, phase, tid, nt);
}

// A scan's phase of unit u: the one-unit phase on the launch's Args moved to unit u (unit_args).
template <int U, class T>
PONDER_HD void scan_forward_phase(const Args<T>& a, const Scan<T>& s, int64_t u, int64_t g, int phase, int tid,
                                  int nt) {
  forward_phase<U>(unit_args(a, s, u, true), a.rows, g, phase, tid, nt);
}
template <int U, class T>
PONDER_HD void scan_backward_phase(const Args<T>& a, const Scan<T>& s, int64_t u, int64_t g, int phase, int tid,
                                   int nt) {
  backward_phase<U>(unit_args(a, s, u, false), a.rows, g, phase, tid, nt);
}

}  // namespace ponder::cuda::mlp
