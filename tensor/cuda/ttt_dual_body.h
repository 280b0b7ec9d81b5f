// The body of the CUDA TTT-Linear dual-form kernels (tensor/cuda/ttt_dual.cu), one head per thread block, written
// as phases separated by block barriers: phase(h, tid, nt) does thread tid's share of one step of the head, and a
// phase reads only what earlier phases wrote. Plain C++ with PONDER_HD on every function, so the same code runs
// on the GPU (a kernel calls the phases with __syncthreads() between them) and on the CPU, where tests/test_cuda.cpp
// runs the phases thread by thread and compares them with the CPU kernel (tensor/cpu/ttt_dual.cpp) in float64 on
// any machine. The steps and their order are the CPU kernel's (and autograd/compose.cpp's composition, the op's
// definition); the row formulas are staged over column chunks in tensor/cuda/ttt_dual_rows.h.
//
// Shapes per head: W (f, f), bias (1, f), q, k, v (b, f), eta (b, b); saved Z, G, zb (b, f) and S = q·kᵀ (b, b).
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/cuda/row_geom.h"
#include "tensor/cuda/ttt_dual_loops.h"
#include "tensor/cuda/ttt_dual_rows.h"

namespace ponder::cuda::dual {

using cuda::RowGeom;  // tensor/cuda/row_geom.h
using cuda::gamma_offset;

// Where head g of an operand starts, (g / n1)·s0 + (g % n1)·s1 (the operand's leading axes merged into two:
// tensor/kernels.h's dual_head_view), and how far apart its rows are (rs; W, bias and η have rows c apart).
struct HeadLayout {
  int64_t n1 = 1, s0 = 0, s1 = 0, rs = 0;
};
PONDER_HD inline int64_t head_at(const HeadLayout& l, int64_t g) { return (g / l.n1) * l.s0 + (g % l.n1) * l.s1; }
// Contiguous heads of r rows of c.
PONDER_HD inline HeadLayout dense(int64_t r, int64_t c) { return {1, r * c, 0, c}; }
// A (n0, n1, r, c) head view's layout (V: a tensor with shape() and strides()).
template <class V>
HeadLayout layout_of(const V& v) {
  return {v.shape()[1], v.strides()[0], v.strides()[1], v.strides()[2]};
}

PONDER_HD constexpr int64_t saved_size(int64_t b, int64_t f) { return 3 * b * f + b * b; }  // = kDualSaved
// Scratch per head, in elements of T (the saved intermediates' place included unless they have their own) and in
// doubles.
PONDER_HD constexpr int64_t scratch_t(int64_t b, int64_t f, bool saved = false) {
  return (saved ? 0 : saved_size(b, f)) + 8 * b * f + 3 * b * b + 2 * f * (f + 1);
}
// A block's shared memory when it holds one head's scratch: the T part, rounded up to 16 bytes, then the doubles.
PONDER_HD constexpr int64_t block_doubles_at(int64_t b, int64_t f, bool saved, int64_t t_bytes) {
  return (scratch_t(b, f, saved) * t_bytes + 15) / 16 * 16;
}
// Doubles per head: the row stages' partial sums (kSlots, b, chunks(f)), the rows' γ offsets (b), and the
// backward's per-row dγ, dβ terms (b, f) each.
PONDER_HD constexpr int64_t scratch_d(int64_t b, int64_t f) { return kSlots * b * chunks(f) + b + 2 * b * f; }
PONDER_HD constexpr int64_t block_bytes(int64_t b, int64_t f, bool saved, int64_t t_bytes) {
  return block_doubles_at(b, f, saved, t_bytes) + scratch_d(b, f) * int64_t(sizeof(double));
}

// All the operands of the launch (G heads), as flat arrays; the phases find head g's part.
template <class T>
struct Args {
  const T *W, *bias, *q, *k, *v, *eta, *gamma, *beta;
  HeadLayout lW, lbias, lq, lk, lv, leta;  // where each head's part of W … eta is (q, k, v: gathered first)
  T* saved;     // (G, saved_size): written by the forward, read by the backward; null: recomputed
  T* scratch;   // (G, scratch_t), or one head's (scratch_t) when block_scratch
  double* dscr;  // (G, scratch_d), or one head's when block_scratch
  // Each block's own scratch (the GPU's shared memory): every head's pointers start at `scratch`. The forward then
  // keeps its intermediates there too (saved null) and its last phase copies them to saved_out (G, saved_size).
  bool block_scratch = false;
  T* saved_out = nullptr;
  int phases = -1;  // < 0: all; n ≥ 0: the kernels run only the first n phases (timing a phase by difference)
  RowGeom rows;
  int64_t b, f, P;  // P = γ's numel
  double eps;
  // forward output (G, b + f + 1, f); backward: the upstream of its three parts as head views (dout's rows may lie
  // apart, as q's: a slice of the sequence's gradient; dW', dbias' rows f apart) and the eight gradients
  T* y;
  const T *dout, *dW2u, *db2u;
  HeadLayout ldout, ldW2u, ldb2u;
  T *dW, *db, *dq, *dk, *dv, *deta;
  double* parts;  // (G, 2, P): dγ, dβ of each head, zeroed by the caller
};

// The block's own scratch (Args::block_scratch): on the GPU the launch's dynamic shared memory, the T part and then
// the doubles at block_doubles_at; on the CPU (the tests) the buffers Args points at. Read here rather than written
// into Args by the kernel, which would copy the kernel's parameters to local memory.
template <class T>
PONDER_HD T* block_t(const Args<T>& a) {
#ifdef __CUDA_ARCH__
  extern __shared__ __align__(16) unsigned char dual_smem[];
  (void)a;
  return reinterpret_cast<T*>(dual_smem);
#else
  return a.scratch;
#endif
}
template <class T>
PONDER_HD double* block_d(const Args<T>& a) {
#ifdef __CUDA_ARCH__
  extern __shared__ __align__(16) unsigned char dual_smem[];
  return reinterpret_cast<double*>(dual_smem + block_doubles_at(a.b, a.f, a.saved != nullptr, int64_t(sizeof(T))));
#else
  return a.dscr;
#endif
}

// Head g's pointers.
template <class T>
struct Head {
  const T *W, *bias, *eta, *gamma, *beta;
  const T *qsrc, *ksrc, *vsrc;  // the operands' rows, qrs … apart: gathered into q, k (and t) by phase 0
  int64_t qrs, krs, vrs;
  const T *q, *k;        // q, k (b, f) in the scratch
  T *qg, *kg;            // the same, writable
  T *z, *g, *zb, *s;     // saved
  T *t, *e, *m;          // v − k (b, f); E = tril(η), M = E⊙S + E (b, b)
  T *dzb, *dm, *dg, *pk, *dp, *dz;  // backward (b, f), dm (b, b)
  T *wt, *dw2t;          // Wᵀ and dW'ᵀ (f, f), rows f + 1 apart (ft): the backward's products read them along
                         // rows, so a warp's lanes read consecutive addresses, and the transposing writes of
                         // consecutive lanes fall in different shared-memory banks
  int64_t ft;
  double *part, *roff;   // the row stages' partial sums and the rows' γ offsets (tensor/cuda/ttt_dual_rows.h)
  double *rg, *rb;       // per-row dγ, dβ contributions (b, f) each
  int64_t b, f, row0;    // row0: g·b, the first of this head's rows of xq
  double eps;
};

template <class T>
PONDER_HD Head<T> head(const Args<T>& a, int64_t g) {
  const int64_t b = a.b, f = a.f;
  Head<T> h;
  h.W = a.W + head_at(a.lW, g);
  h.bias = a.bias + head_at(a.lbias, g);
  h.eta = a.eta + head_at(a.leta, g);
  h.qsrc = a.q + head_at(a.lq, g);
  h.ksrc = a.k + head_at(a.lk, g);
  h.vsrc = a.v + head_at(a.lv, g);
  h.qrs = a.lq.rs;
  h.krs = a.lk.rs;
  h.vrs = a.lv.rs;
  h.gamma = a.gamma;
  h.beta = a.beta;
  T* sc = a.block_scratch ? block_t(a) : a.scratch + g * scratch_t(b, f, a.saved != nullptr);
  T* sv = a.saved ? a.saved + g * saved_size(b, f) : sc;  // without saved tensors, their place is the scratch's
  h.z = sv;
  h.g = sv + b * f;
  h.zb = sv + 2 * b * f;
  h.s = sv + 3 * b * f;
  T* rest = a.saved ? sc : sc + saved_size(b, f);
  h.t = rest;
  h.e = rest + b * f;
  h.m = h.e + b * b;
  h.dm = h.m + b * b;
  h.dzb = h.dm + b * b;
  h.dg = h.dzb + b * f;
  h.pk = h.dg + b * f;
  h.dp = h.pk + b * f;
  h.dz = h.dp + b * f;
  h.qg = h.dz + b * f;
  h.kg = h.qg + b * f;
  h.q = h.qg;
  h.k = h.kg;
  h.ft = f + 1;
  h.wt = h.kg + b * f;
  h.dw2t = h.wt + f * h.ft;
  double* d = a.block_scratch ? block_d(a) : a.dscr + g * scratch_d(b, f);
  h.part = d;
  h.roff = d + kSlots * b * chunks(f);
  h.rg = h.roff + b;
  h.rb = h.rg + b * f;
  h.b = b;
  h.f = f;
  h.row0 = g * b;
  h.eps = a.eps;
  return h;
}

// The rows' γ, β offsets, once per launch (gamma_offset divides 64-bit integers per axis). H: a head with b, row0 and
// roff (this body's Head, or TTT-MLP's in ttt_mlp_dual_body.h).
template <class H>
PONDER_HD void row_offsets(const H& h, const RowGeom& rg, int tid, int nt) {
  for (int64_t i = tid; i < h.b; i += nt) h.roff[i] = double(gamma_offset(rg, h.row0 + i));
}

// ---- forward phases

// The init of S sums that start at zero (products(), sums()).
template <int S = 1>
struct ZeroSums {
  template <class T>
  PONDER_HD void operator()(int64_t, int64_t, T* a) const {
    for (int s = 0; s < S; ++s) a[s] = 0;
  }
};

// Z = k·W + bias, zb = q·W + bias (M·G comes off later), S = q·kᵀ.
template <int U, class T>
PONDER_HD void fwd_products(const Head<T>& h, int tid, int nt) {
  const int64_t b = h.b, f = h.f;
  products<U, T, 2>(
      b, f, f, tid, nt, [&](int64_t, int64_t c, T* a) { a[0] = a[1] = h.bias[c]; },
      [&](int s, int64_t i, int64_t r) { return (s == 0 ? h.k : h.q)[i * f + r]; },
      [&](int, int64_t r, int64_t c) { return h.W[r * f + c]; },
      [&](int64_t i, int64_t c, const T* a) {
        h.z[i * f + c] = a[0];
        h.zb[i * f + c] = a[1];
      });
  products<U, T, 1>(
      b, b, f, tid, nt, ZeroSums<>{}, [&](int, int64_t i, int64_t c) { return h.q[i * f + c]; },
      [&](int, int64_t c, int64_t j) { return h.k[j * f + c]; },
      [&](int64_t i, int64_t j, const T* a) { h.s[i * b + j] = a[0]; });
}

// Wᵀ and dW'ᵀ for the backward's products (its first phase).
template <class T>
struct Pair {
  T a, b;
};
template <class T>
PONDER_HD void transposes(const Head<T>& h, const T* dW2, int tid, int nt) {
  const int64_t f = h.f;
  moves(
      f * f, tid, nt, [&](int64_t x) { return Pair<T>{h.W[x], dW2[x]}; },
      [&](int64_t x, const Pair<T>& v) {
        h.wt[(x % f) * h.ft + x / f] = v.a;
        h.dw2t[(x % f) * h.ft + x / f] = v.b;
      });
}

// q, k from the operands' rows into the scratch, and t = v − k: every later phase reads q, k and t there, and the
// operands may be views whose rows lie apart (slices of the (B, H, N, f) projections), never copied on the host.
template <class T>
struct Triple {
  T q, k, v;
};
template <class T>
PONDER_HD void gather(const Head<T>& h, int tid, int nt) {
  const int64_t f = h.f;
  moves(
      h.b * f, tid, nt,
      [&](int64_t x) {
        const int64_t i = x / f, c = x % f;
        return Triple<T>{h.qsrc[i * h.qrs + c], h.ksrc[i * h.krs + c], h.vsrc[i * h.vrs + c]};
      },
      [&](int64_t x, const Triple<T>& v) {
        h.qg[x] = v.q;
        h.kg[x] = v.k;
        h.t[x] = v.v - v.k;
      });
}

// The backward's upstream dout (b, f) from its rows, rs apart, into dp, which nothing reads or writes before
// bwd_update (phase 14): phases 9–11 read it there, and the caller's dout needs no packing copy.
template <class T>
PONDER_HD void gather_dout(const Head<T>& h, const T* src, int64_t rs, int tid, int nt) {
  const int64_t f = h.f;
  moves(
      h.b * f, tid, nt, [&](int64_t x) { return src[(x / f) * rs + x % f]; }, [&](int64_t x, T v) { h.dp[x] = v; });
}

// E, M from η and S (the backward needs them too, with S saved).
template <class T>
PONDER_HD void cheap_parts(const Head<T>& h, int tid, int nt) {
  const int64_t b = h.b;
  for (int64_t x = tid; x < b * b; x += nt) {
    const int64_t i = x / b, j = x % b;
    h.e[x] = j <= i ? h.eta[x] : T(0);
    h.m[x] = h.e[x] * h.s[x] + h.e[x];
  }
}
// zb −= M·G
template <int U, class T>
PONDER_HD void fwd_zb(const Head<T>& h, int tid, int nt) {
  const int64_t b = h.b, f = h.f;
  products<U, T, 1>(
      b, f, b, tid, nt, ZeroSums<>{}, [&](int, int64_t i, int64_t j) { return h.m[i * b + j]; },
      [&](int, int64_t j, int64_t c) { return h.g[j * f + c]; },
      [&](int64_t i, int64_t c, const T* a) { h.zb[i * f + c] -= a[0]; });
}

// W' = W − (ηl⊙k)ᵀ·G; bias' = bias − Σ_j ηl_j·G_j (ηl the last row of η), into y's last f + 1 rows.
template <int U, class T>
PONDER_HD void fwd_update(const Head<T>& h, T* y, int tid, int nt) {
  const int64_t b = h.b, f = h.f;
  const T* el = h.eta + (b - 1) * b;
  T *W2 = y + b * f, *b2 = W2 + f * f;
  products<U, T, 1>(
      f, f, b, tid, nt, ZeroSums<>{}, [&](int, int64_t r, int64_t j) { return el[j] * h.k[j * f + r]; },
      [&](int, int64_t j, int64_t c) { return h.g[j * f + c]; },
      [&](int64_t r, int64_t c, const T* a) { W2[r * f + c] = h.W[r * f + c] - a[0]; });
  sums<U == kMma ? 1 : U, T, 1>(
      1, f, b, tid, nt, ZeroSums<>{}, [&](int64_t, int64_t c, int64_t j, T* a) { a[0] += el[j] * h.g[j * f + c]; },
      [&](int64_t, int64_t c, const T* a) { b2[c] = h.bias[c] - a[0]; });
}

// ---- backward phases (tensor/cpu/ttt_dual.cpp's backward_head, step by step). Head outputs of head g:
template <class T>
struct Out {
  T *dW, *db, *dq, *dk, *dv, *deta;
};
template <class T>
PONDER_HD Out<T> head_out(const Args<T>& a, int64_t g) {
  const int64_t b = a.b, f = a.f;
  return {a.dW + g * f * f, a.db + g * f, a.dq + g * b * f, a.dk + g * b * f, a.dv + g * b * f, a.deta + g * b * b};
}

// out[i, r] = init[i, r] + (a·Wᵀ)[i, r] = init + Σ_c a[i, c]·W[r, c] for a (b, f), read through the transposed copy.
template <int U, class T, class Init, class Store>
PONDER_HD void times_wt(const Head<T>& h, const T* a, int tid, int nt, Init init, Store store) {
  const int64_t f = h.f;
  products<U, T, 1>(
      h.b, f, f, tid, nt, init, [&](int, int64_t i, int64_t c) { return a[i * f + c]; },
      [&](int, int64_t c, int64_t r) { return h.wt[c * h.ft + r]; }, store);
}

// dq = dO + dzb·Wᵀ; dM = −dzb·Gᵀ.
template <int U, class T>
PONDER_HD void bwd_dq_dm(const Head<T>& h, const T* dy, const Out<T>& o, int tid, int nt) {
  const int64_t b = h.b, f = h.f;
  times_wt<U>(h, h.dzb, tid, nt, ZeroSums<>{},
              [&](int64_t i, int64_t r, const T* a) { o.dq[i * f + r] = dy[i * f + r] + a[0]; });
  products<U, T, 1>(
      b, b, f, tid, nt, ZeroSums<>{}, [&](int, int64_t i, int64_t c) { return h.dzb[i * f + c]; },
      [&](int, int64_t c, int64_t j) { return h.g[j * f + c]; },
      [&](int64_t i, int64_t j, const T* a) { h.dm[i * b + j] = -a[0]; });
}

// deta = tril(dM⊙(S + 1)); dS = dM⊙E (in dm).
template <class T>
PONDER_HD void bwd_deta(const Head<T>& h, const Out<T>& o, int tid, int nt) {
  const int64_t b = h.b;
  for (int64_t x = tid; x < b * b; x += nt) {
    const int64_t i = x / b, j = x % b;
    o.deta[x] = j <= i ? h.dm[x] * (h.s[x] + T(1)) : T(0);
    h.dm[x] *= h.e[x];
  }
}

// dq += dS·k; dk = dSᵀ·q; dW = dW' + qᵀ·dzb; dG = −Mᵀ·dzb; P = ηl⊙k.
template <int U, class T>
PONDER_HD void bwd_products(const Head<T>& h, const T* dW2, const Out<T>& o, int tid, int nt) {
  const int64_t b = h.b, f = h.f;
  const T* el = h.eta + (b - 1) * b;
  products<U, T, 3>(
      b, f, b, tid, nt, ZeroSums<3>{},
      [&](int s, int64_t i, int64_t j) { return s == 0 ? h.dm[i * b + j] : (s == 1 ? h.dm : h.m)[j * b + i]; },
      [&](int s, int64_t j, int64_t c) { return (s == 0 ? h.k : s == 1 ? h.q : h.dzb)[j * f + c]; },
      [&](int64_t i, int64_t c, const T* a) {
        const int64_t x = i * f + c;
        o.dq[x] += a[0];
        o.dk[x] = a[1];
        h.dg[x] = -a[2];
        h.pk[x] = el[i] * h.k[x];
      });
  products<U, T, 1>(
      f, f, b, tid, nt, ZeroSums<>{}, [&](int, int64_t r, int64_t i) { return h.q[i * f + r]; },
      [&](int, int64_t i, int64_t c) { return h.dzb[i * f + c]; },
      [&](int64_t r, int64_t c, const T* a) { o.dW[r * f + c] = dW2[r * f + c] + a[0]; });
}

// dG −= P·dW'; dP = −G·dW'ᵀ.
template <int U, class T>
PONDER_HD void bwd_update(const Head<T>& h, const T* dW2, int tid, int nt) {
  const int64_t f = h.f;
  products<U, T, 2>(
      h.b, f, f, tid, nt, ZeroSums<2>{}, [&](int s, int64_t j, int64_t r) { return (s == 0 ? h.pk : h.g)[j * f + r]; },
      [&](int s, int64_t r, int64_t c) { return s == 0 ? dW2[r * f + c] : h.dw2t[r * h.ft + c]; },
      [&](int64_t j, int64_t c, const T* a) {
        h.dg[j * f + c] -= a[0];
        h.dp[j * f + c] = -a[1];
      });
}

// dG −= ηl_j·dbias'; dk += ηl_j·dP; the sums Σ_c (k⊙dP − G⊙dbias') of rows j into slot kF, then added to
// deta[b−1, j] by last_row_eta.
template <class T>
PONDER_HD void bwd_last_row(const Head<T>& h, const T* db2, const Out<T>& o, int tid, int nt) {
  const T* el = h.eta + (h.b - 1) * h.b;
  row_items(h, tid, nt, [&](int64_t j, int64_t ch) {
    double del = 0;
    PONDER_CHUNK_COLUMNS(h, ch, c) {
      const int64_t jc = j * h.f + c;
      h.dg[jc] -= el[j] * db2[c];
      o.dk[jc] += el[j] * h.dp[jc];
      del += double(h.k[jc]) * double(h.dp[jc]) - double(h.g[jc]) * double(db2[c]);
    }
    part(h, kF, j, ch) = del;
  });
}
template <class T>
PONDER_HD void last_row_eta(const Head<T>& h, const Out<T>& o, int tid, int nt) {
  for (int64_t j = tid; j < h.b; j += nt) o.deta[(h.b - 1) * h.b + j] += T(total(h, kF, j));
}

// dk += −dv + dz·Wᵀ; dW += kᵀ·dz; dbias = dbias' + Σ_i (dzb + dz).
template <int U, class T>
PONDER_HD void bwd_inner_products(const Head<T>& h, const T* db2, const Out<T>& o, int tid, int nt) {
  const int64_t b = h.b, f = h.f;
  times_wt<U>(h, h.dz, tid, nt, ZeroSums<>{}, [&](int64_t i, int64_t r, const T* a) {
    const int64_t x = i * f + r;
    o.dk[x] = o.dk[x] - o.dv[x] + a[0];
  });
  products<U, T, 1>(
      f, f, b, tid, nt, ZeroSums<>{}, [&](int, int64_t r, int64_t i) { return h.k[i * f + r]; },
      [&](int, int64_t i, int64_t c) { return h.dz[i * f + c]; },
      [&](int64_t r, int64_t c, const T* a) { o.dW[r * f + c] += a[0]; });
  sums<U == kMma ? 1 : U, T, 1>(
      1, f, b, tid, nt, [&](int64_t, int64_t c, T* a) { a[0] = db2[c]; },
      [&](int64_t, int64_t c, int64_t i, T* a) { a[0] += h.dzb[i * f + c] + h.dz[i * f + c]; },
      [&](int64_t, int64_t c, const T* a) { o.db[c] = a[0]; });
}

// This head's dγ, dβ: the rows' contributions summed in row order at their γ offsets, one thread per column. H as
// for row_offsets, with f, rg and rb.
template <class H>
PONDER_HD void bwd_gamma_parts(const H& h, int64_t P, double* parts, int tid, int nt) {
  const int64_t f = h.f;
  for (int64_t c = tid; c < f; c += nt)
    for (int64_t i = 0; i < h.b; ++i) {
      const int64_t o = roff(h, i) + c;
      parts[o] += h.rg[i * f + c];
      parts[P + o] += h.rb[i * f + c];
    }
}

// dγ, dβ from the heads' parts in two deterministic stages (one thread per element of γ summing all G heads in
// order left 3 blocks of threads waiting on G loads each). Stage 1, item x = (q, j) of head_chunks(G, chunk)·P:
// heads q·chunk … (q + 1)·chunk − 1 summed in order into sums (Q, 2, P). Stage 2, element j: the Q chunks' sums in
// order (sum_gamma_parts on sums with G = Q).
PONDER_HD constexpr int64_t head_chunks(int64_t G, int64_t chunk) { return (G + chunk - 1) / chunk; }
PONDER_HD inline void sum_gamma_chunk(const double* parts, int64_t G, int64_t P, int64_t chunk, double* sums,
                                      int64_t x) {
  const int64_t q = x / P, j = x % P, g1 = (q + 1) * chunk < G ? (q + 1) * chunk : G;
  double sg = 0, sb = 0;
  for (int64_t g = q * chunk; g < g1; ++g) {
    sg += parts[g * 2 * P + j];
    sb += parts[g * 2 * P + P + j];
  }
  sums[q * 2 * P + j] = sg;
  sums[q * 2 * P + P + j] = sb;
}
PONDER_HD inline void gamma_column(const double* parts, int64_t G, int64_t P, int64_t j, double& sg, double& sb) {
  sg = 0, sb = 0;
  for (int64_t g = 0; g < G; ++g) {
    sg += parts[g * 2 * P + j];
    sb += parts[g * 2 * P + P + j];
  }
}
template <class T>
PONDER_HD void sum_gamma_parts(const double* parts, int64_t G, int64_t P, T* dgam, T* dbet, int64_t j) {
  double sg, sb;
  gamma_column(parts, G, P, j, sg, sb);
  dgam[j] = T(sg);
  dbet[j] = T(sb);
}

// ---- the scan (Backend::ttt_linear_scan): one launch runs units lo … hi of every head, each unit as the one-unit
// kernel runs it on the launch's Args moved to that unit (unit_args). A block keeps its head: unit u + 1's phase 0
// reads the W and bias its own unit u wrote to Y, visible after the barrier that ends unit u.
template <class T>
struct Scan {
  int64_t units = 1, lo = 0, hi = 0;  // the sequence's n units; this launch's first and last
  int64_t G = 0;
  int64_t sq = 0, sk = 0, sv = 0, seta = 0, sdout = 0;  // elements between units of q, k, v, η and dout
  T *Y = nullptr, *S = nullptr;  // (n, G, b + f + 1, f) outputs, (n, G, saved_size) intermediates
  T *cW = nullptr, *cb = nullptr;  // backward: two slots of every head's dW (2, G, f, f) and dbias (2, G, 1, f),
                                   // unit u writing slot u % 2 and reading unit u + 1's (unit 0 writes Args' dW, db)
};

// a (unit 0's Args: the start's W and bias, the gradients' unit-0 parts, parts of unit lo) moved to unit u.
template <class T>
PONDER_HD Args<T> unit_args(Args<T> a, const Scan<T>& s, int64_t u, bool forward) {
  const int64_t G = s.G, b = a.b, f = a.f, ys = (b + f + 1) * f;
  a.q += u * s.sq, a.k += u * s.sk, a.v += u * s.sv, a.eta += u * s.seta;
  if (u > 0) {
    const T* prev = s.Y + (u - 1) * G * ys;
    a.W = prev + b * f, a.bias = prev + (b + f) * f;
    a.lW = a.lbias = HeadLayout{1, ys, 0, f};
  }
  T* saved = s.S + u * G * saved_size(b, f);
  if (forward) {
    a.y = s.Y + u * G * ys;
    (a.block_scratch ? a.saved_out : a.saved) = saved;
    return a;
  }
  a.saved = saved;
  a.dout += u * s.sdout;
  if (u + 1 < s.units) {
    a.dW2u = s.cW + ((u + 1) & 1) * G * f * f, a.db2u = s.cb + ((u + 1) & 1) * G * f;
    a.ldW2u = dense(f, f), a.ldb2u = dense(1, f);
  }
  if (u > 0) a.dW = s.cW + (u & 1) * G * f * f, a.db = s.cb + (u & 1) * G * f;
  a.dq += u * G * b * f, a.dk += u * G * b * f, a.dv += u * G * b * f, a.deta += u * G * b * b;
  a.parts += (u - s.lo) * G * 2 * a.P;
  return a;
}

// dγ, dβ of the launch's units: stage 1 sums each unit's heads in chunks (item x of units · head_chunks · P, as
// sum_gamma_chunk), stage 2 (element j) each unit's chunks in order, rounded to T as the one-unit backward rounds
// them, then added from unit hi down to lo onto the sums of the units after them (unit n − 1's start the sums).
PONDER_HD inline void sum_gamma_unit_chunk(const double* parts, int64_t G, int64_t P, int64_t chunk, double* sums,
                                           int64_t x) {
  const int64_t per = head_chunks(G, chunk) * P, i = x / per;
  sum_gamma_chunk(parts + i * G * 2 * P, G, P, chunk, sums + i * head_chunks(G, chunk) * 2 * P, x % per);
}
template <class T>
PONDER_HD void add_gamma_units(const double* sums, int64_t Q, int64_t P, const Scan<T>& s, T* dgam, T* dbet,
                               int64_t j) {
  for (int64_t u = s.hi; u >= s.lo; --u) {
    double sg, sb;
    gamma_column(sums + (u - s.lo) * Q * 2 * P, Q, P, j, sg, sb);
    const T g = T(sg), e = T(sb);
    dgam[j] = u + 1 == s.units ? g : T(dgam[j] + g);
    dbet[j] = u + 1 == s.units ? e : T(dbet[j] + e);
  }
}

// ---- the phase lists: run(phase index) for phases 0 … count − 1 with a block barrier after each.
constexpr int kForwardPhases = 11, kBackwardPhases = 22;

// Forward phases 2–6 (the backward's too when nothing was saved): E and M, G = ln_l2_grad(Z, t) in stages, zb −= M·G.
template <int U, class T>
PONDER_HD void inner_grad_phase(const Head<T>& h, int phase, int tid, int nt) {
  switch (phase) {
    case 2:
      cheap_parts(h, tid, nt);
      stage_sum(h, h.z, tid, nt);
      break;
    case 3: stage_var(h, h.z, tid, nt); break;
    case 4: stage_l2_sums(h, h.z, h.t, static_cast<const T*>(nullptr), tid, nt); break;
    case 5: stage_l2_grad(h, h.z, h.t, h.g, tid, nt); break;
    case 6: fwd_zb<U>(h, tid, nt); break;
    default: break;
  }
}

// rows: a.rows, or the kernel parameter's where a is a copy (a scan's unit_args), which indexing the geometry's
// arrays would otherwise keep in local memory.
template <int U, class T>
PONDER_HD void forward_phase(const Args<T>& a, const RowGeom& rows, int64_t g, int phase, int tid, int nt) {
  const Head<T> h = head(a, g);
  T* y = a.y + g * (a.b + a.f + 1) * a.f;
  switch (phase) {
    case 0:
      row_offsets(h, rows, tid, nt);
      gather(h, tid, nt);
      break;
    case 1: fwd_products<U>(h, tid, nt); break;
    case 7:  // W', bias', and the output norm's statistics
      fwd_update<U>(h, y, tid, nt);
      stage_sum(h, h.zb, tid, nt);
      break;
    case 8: stage_var(h, h.zb, tid, nt); break;
    case 9: stage_affine(h, h.zb, h.q, y, tid, nt); break;  // out = q + LN_{γ,β}(zb)
    case 10:  // with block scratch, the intermediates (Z, G, zb, S: contiguous from z) to the saved tensor
      if (a.saved_out)
        for (int64_t x = tid; x < saved_size(a.b, a.f); x += nt) a.saved_out[g * saved_size(a.b, a.f) + x] = h.z[x];
      break;
    default: inner_grad_phase<U>(h, phase, tid, nt); break;
  }
}

// Without saved intermediates the backward recomputes them first (phases 1–6: the forward's); with them, phase 2
// only rebuilds E and M.
template <int U, class T>
PONDER_HD void backward_phase(const Args<T>& a, const RowGeom& rows, int64_t g, int phase, int tid, int nt) {
  const Head<T> h = head(a, g);
  const Out<T> o = head_out(a, g);
  const T *dW2 = a.dW2u + head_at(a.ldW2u, g), *db2 = a.db2u + head_at(a.ldb2u, g);
  const T* dy = h.dp;  // dout, gathered there by phase 0
  switch (phase) {
    case 0:
      row_offsets(h, rows, tid, nt);
      gather(h, tid, nt);
      transposes(h, dW2, tid, nt);
      gather_dout(h, a.dout + head_at(a.ldout, g), a.ldout.rs, tid, nt);
      break;
    case 1:
      if (!a.saved) fwd_products<U>(h, tid, nt);
      break;
    case 2: case 3: case 4: case 5: case 6:
      if (!a.saved) inner_grad_phase<U>(h, phase, tid, nt);
      else if (phase == 2) cheap_parts(h, tid, nt);
      break;
    case 7: stage_sum(h, h.zb, tid, nt); break;  // dzb = ln_affine_backward(zb, γ, dO), rows' dγ, dβ into rg, rb
    case 8: stage_var(h, h.zb, tid, nt); break;
    case 9: stage_affine_bwd_sums(h, h.zb, dy, tid, nt); break;
    case 10: stage_affine_bwd(h, h.zb, dy, h.dzb, h.rg, h.rb, tid, nt); break;
    case 11: bwd_dq_dm<U>(h, dy, o, tid, nt); break;
    case 12: bwd_deta(h, o, tid, nt); break;
    case 13: bwd_products<U>(h, dW2, o, tid, nt); break;
    case 14: bwd_update<U>(h, dW2, tid, nt); break;
    case 15: bwd_last_row(h, db2, o, tid, nt); break;
    case 16:  // dz, dv = ln_l2_grad_vjp(Z, t, γ, β, dG) in stages, dγ, dβ added to the rows'
      last_row_eta(h, o, tid, nt);
      stage_sum(h, h.z, tid, nt);
      break;
    case 17: stage_var(h, h.z, tid, nt); break;
    case 18: stage_l2_sums(h, h.z, h.t, static_cast<const T*>(h.dg), tid, nt); break;
    case 19: stage_vjp_sums(h, h.z, h.t, static_cast<const T*>(h.dg), tid, nt); break;
    case 20: stage_vjp_out(h, h.z, h.t, static_cast<const T*>(h.dg), h.dz, o.dv, h.rg, h.rb, tid, nt); break;
    case 21:  // the head's dγ, dβ from the rows' terms (complete after phase 20) beside the last products
      bwd_inner_products<U>(h, db2, o, tid, nt);
      bwd_gamma_parts(h, a.P, a.parts + g * 2 * a.P, tid, nt);
      break;
    default: break;
  }
}

template <int U, class T>
PONDER_HD void forward_phase(const Args<T>& a, int64_t g, int phase, int tid, int nt) {
  forward_phase<U>(a, a.rows, g, phase, tid, nt);
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

}  // namespace ponder::cuda::dual
