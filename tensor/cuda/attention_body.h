// The body of the CUDA attention kernels (tensor/cuda/attention.cu): causal softmax attention per head as the
// CPU kernel computes it (tensor/cpu/attention.cpp; the map: tensor/kernels.def), in tiles of kRows queries and kKeys
// keys. One thread block per tile runs phases with a block barrier after each: phase(a, block, ph, tid, nt) does
// thread tid's share of one step, reading only what earlier phases wrote. Plain C++ with PONDER_HD, so
// tests/test_cuda.cpp runs the phases thread by thread on the CPU against the CPU kernel on any machine.
//
// Forward (one block per query tile): each key tile its rows see is loaded, scored, and folded into a running
// softmax (max m, sum l, the output rescaled by exp(m_old − m_new)), as flash attention does; no (n × T) tensor is
// stored. Backward, without atomics so results repeat bit for bit: dq by one block per query tile (over the key
// tiles its rows see), dk and dv by one block per key tile (over the query tiles that see its keys), each
// recomputing the probabilities from the saved log-normalisers. Every sum runs in a fixed order.
//
// Shapes per head: q, y, dy, dq (n, f); k, v, dk, dv (Tk, f); lse (n). Tiles sit in the block's scratch (the
// GPU's shared memory) with rows f + 1 apart, so a warp reading one column of 32 rows hits 32 banks.
#pragma once
#include <cmath>
#include <cstdint>

#include "tensor/cuda/host_device.h"

namespace ponder::cuda::attn {

constexpr int64_t kRows = 16;  // queries per tile
constexpr int64_t kKeys = 32;  // keys per tile

// Query i stands at t0 + i, key j at first + j; j is seen when 0 ≤ (t0 + i) − (first + j) < window (0: no bound).
struct Geo {
  double scale;
  int64_t t0, first, window;
};
struct Span {
  int64_t lo, hi;
};

// The keys [lo, hi) query i sees (tensor/cpu/attention.cpp's seen).
PONDER_HD inline Span seen(const Geo& g, int64_t i, int64_t T) {
  const int64_t lag0 = g.t0 + i - g.first, lo = g.window && lag0 - g.window + 1 > 0 ? lag0 - g.window + 1 : 0;
  const int64_t hi = lag0 + 1 < 0 ? 0 : (lag0 + 1 > T ? T : lag0 + 1);
  return {lo < T ? lo : T, hi};
}

// The queries [lo, hi) that see at least one key of [k0, k1): seen(i).hi > k0 ⟺ i ≥ k0 − t0 + first, and
// seen(i).lo < k1 ⟺ i < k1 + window − 1 − t0 + first (every i without a window); both bounds grow with i.
PONDER_HD inline Span seers(const Geo& g, int64_t k0, int64_t k1, int64_t n) {
  int64_t lo = k0 - g.t0 + g.first, hi = g.window ? k1 + g.window - 1 - g.t0 + g.first : n;
  lo = lo < 0 ? 0 : (lo > n ? n : lo);
  hi = hi > n ? n : hi;
  return {lo, hi > lo ? hi : lo};
}

template <class T>
struct Args {
  const T *q, *k, *v;  // (G, n, f), (G, Tk, f), (G, Tk, f), contiguous
  T *y, *lse;          // (G, n, f), (G, n): written by the forward, read by the backward
  const T* dy;         // (G, n, f)
  T *dq, *dk, *dv;     // the backward's results
  int64_t G, n, Tk, f;
  Geo geo;
  T* scratch;    // the CPU's stand-in for one block's shared memory (the GPU's is attn_smem below)
  double* dscr;
};

// The three kinds of block: the forward's (one per query tile), dq's (the same tiles) and dk, dv's (one per key tile).
enum class Kind { Forward, Dq, Dkv };

PONDER_HD constexpr int64_t ld(int64_t f) { return f + 1; }

// Where a kind of block keeps its tiles in the T part of its scratch (−1: it has none): q and the output o (the
// forward's, or dq) of kRows rows; dy (the backward's); k, v and dk, dv (dk, dv's) of kKeys rows; the scores s and
// dp (the backward's) of kRows × kKeys. Then kRows doubles each for m, l, the rescale factor and D = Σ dy⊙y.
struct Layout {
  int64_t q, dy, o, k, v, dk, dv, s, dp, end;
};
PONDER_HD inline Layout layout(Kind kind, int64_t f) {
  const bool back = kind != Kind::Forward, dkv = kind == Kind::Dkv;
  int64_t at = 0;
  auto take = [&](bool need, int64_t n) {
    const int64_t p = need ? at : -1;
    at += need ? n : 0;
    return p;
  };
  Layout l;
  l.q = take(true, kRows * ld(f)), l.dy = take(back, kRows * ld(f)), l.o = take(!dkv, kRows * ld(f));
  l.k = take(true, kKeys * ld(f)), l.v = take(true, kKeys * ld(f));
  l.dk = take(dkv, kKeys * ld(f)), l.dv = take(dkv, kKeys * ld(f));
  l.s = take(true, kRows * kKeys), l.dp = take(back, kRows * kKeys);
  l.end = at;
  return l;
}
PONDER_HD inline int64_t scratch_t(Kind kind, int64_t f) { return layout(kind, f).end; }
PONDER_HD inline int64_t doubles_at(Kind kind, int64_t f, int64_t t_bytes) {
  return (scratch_t(kind, f) * t_bytes + 15) / 16 * 16;
}
PONDER_HD inline int64_t block_bytes(Kind kind, int64_t f, int64_t t_bytes) {
  return doubles_at(kind, f, t_bytes) + 4 * kRows * int64_t(sizeof(double));
}

// One block's tiles.
template <class T>
struct Tiles {
  T *q, *dy, *o, *k, *v, *dk, *dv, *s, *dp;
  double *m, *l, *alpha, *d;
};

template <class T>
PONDER_HD Tiles<T> tiles(Kind kind, const Args<T>& a) {
#ifdef __CUDA_ARCH__
  extern __shared__ __align__(16) unsigned char attn_smem[];
  T* t = reinterpret_cast<T*>(attn_smem);
  double* d = reinterpret_cast<double*>(attn_smem + doubles_at(kind, a.f, int64_t(sizeof(T))));
#else
  T* t = a.scratch;
  double* d = a.dscr;
#endif
  const Layout l = layout(kind, a.f);
  auto at = [&](int64_t off) { return off < 0 ? nullptr : t + off; };
  Tiles<T> s;
  s.q = at(l.q), s.dy = at(l.dy), s.o = at(l.o), s.k = at(l.k), s.v = at(l.v), s.dk = at(l.dk), s.dv = at(l.dv);
  s.s = at(l.s), s.dp = at(l.dp);
  s.m = d, s.l = d + kRows, s.alpha = d + 2 * kRows, s.d = d + 3 * kRows;
  return s;
}

// A tile of head h: its own rows [i0, i1) (queries, or keys) and the rows [lo, hi) of the other kind that meet
// them: the keys a query tile's rows see, or the queries that see a key tile's keys.
struct Tile {
  int64_t h, i0, i1, lo, hi;
  PONDER_HD int64_t size() const { return i1 - i0; }
  PONDER_HD int64_t steps(int64_t per) const { return hi > lo ? (hi - lo + per - 1) / per : 0; }
};
// Block `block` of G heads of `extent` rows cut into tiles of `per`: its head and rows.
PONDER_HD inline Tile cut(int64_t block, int64_t extent, int64_t per) {
  const int64_t tiles = (extent + per - 1) / per, i0 = (block % tiles) * per;
  return {block / tiles, i0, i0 + per < extent ? i0 + per : extent, 0, 0};
}
template <class T>
PONDER_HD Tile query_tile(const Args<T>& a, int64_t block) {
  Tile t = cut(block, a.n, kRows);
  t.lo = seen(a.geo, t.i0, a.Tk).lo, t.hi = seen(a.geo, t.i1 - 1, a.Tk).hi;
  return t;
}
template <class T>
PONDER_HD Tile key_tile(const Args<T>& a, int64_t block) {
  Tile t = cut(block, a.Tk, kKeys);
  const Span q = seers(a.geo, t.i0, t.i1, a.n);
  t.lo = q.lo, t.hi = q.hi;
  return t;
}

// rows [r0, r0 + R) of a (·, f) operand into a tile (rows ld(f) apart); `scale` multiplies (0: zero the tile).
template <class T>
PONDER_HD void load_rows(T* tile, const T* src, int64_t R, int64_t f, int tid, int nt) {
  for (int64_t x = tid; x < R * f; x += nt) tile[(x / f) * ld(f) + x % f] = src[x];
}
template <class T>
PONDER_HD void zero_rows(T* tile, int64_t R, int64_t f, int tid, int nt) {
  for (int64_t x = tid; x < R * f; x += nt) tile[(x / f) * ld(f) + x % f] = T(0);
}
// s[r][j] = a_r·b_j over f, for R rows of a and J of b (tiles); also dp[r][j] = c_r·e_j when c.
template <class T>
PONDER_HD void scores(T* s, const T* a, const T* b, T* dp, const T* c, const T* e, int64_t R, int64_t J, int64_t f,
                      int tid, int nt) {
  for (int64_t x = tid; x < R * J; x += nt) {
    const int64_t r = x / J, j = x % J;
    T acc = T(0), acc2 = T(0);
    for (int64_t col = 0; col < f; ++col) acc += a[r * ld(f) + col] * b[j * ld(f) + col];
    s[r * kKeys + j] = acc;
    if (!c) continue;
    for (int64_t col = 0; col < f; ++col) acc2 += c[r * ld(f) + col] * e[j * ld(f) + col];
    dp[r * kKeys + j] = acc2;
  }
}

// Row r's seen keys within the key tile [k0, k0 + J), as tile columns [lo, hi).
PONDER_HD inline Span seen_in(const Geo& g, int64_t i, int64_t T, int64_t k0, int64_t J) {
  const Span sp = seen(g, i, T);
  const int64_t lo = sp.lo - k0, hi = sp.hi - k0;
  return {lo < 0 ? 0 : (lo > J ? J : lo), hi < 0 ? 0 : (hi > J ? J : hi)};
}

// Phase ph's key tile [k0, k0 + J) of a query tile (ph ≥ 1: four phases per key tile).
struct KeyStep {
  int64_t k0, J;
};
PONDER_HD inline KeyStep key_step(const Tile& qt, int ph) {
  const int64_t k0 = qt.lo + (ph - 1) / 4 * kKeys;
  return {k0, qt.hi - k0 < kKeys ? qt.hi - k0 : kKeys};
}
template <class T>
PONDER_HD void load_keys(const Tiles<T>& t, const Args<T>& a, int64_t h, const KeyStep& ks, int tid, int nt) {
  load_rows(t.k, a.k + (h * a.Tk + ks.k0) * a.f, ks.J, a.f, tid, nt);
  load_rows(t.v, a.v + (h * a.Tk + ks.k0) * a.f, ks.J, a.f, tid, nt);
}
// o[r][c] = o[r][c]·α_r (alpha null: 1) + Σ_j p[r][j]·m[j][c], for R rows of width f and J terms.
template <class T>
PONDER_HD void accumulate(T* o, const T* p, const T* m, const double* alpha, int64_t R, int64_t J, int64_t f, int tid,
                          int nt) {
  for (int64_t x = tid; x < R * f; x += nt) {
    const int64_t r = x / f, c = x % f;
    T acc = T(0);
    for (int64_t j = 0; j < J; ++j) acc += p[r * kKeys + j] * m[j * ld(f) + c];
    const T old = alpha ? T(double(o[r * ld(f) + c]) * alpha[r]) : o[r * ld(f) + c];
    o[r * ld(f) + c] = old + acc;
  }
}

// ---- forward: one block per query tile, 1 + 4 phases per key tile + 1

// The running softmax of row r over key tile [k0, k0 + J): s becomes P = exp(scale·s − m_new) (0 where unseen).
template <class T>
PONDER_HD void fold_row(const Tiles<T>& t, const Args<T>& a, const Tile& qt, int64_t r, int64_t k0, int64_t J) {
  const Span sp = seen_in(a.geo, qt.i0 + r, a.Tk, k0, J);
  T* row = t.s + r * kKeys;
  double mx = t.m[r];
  for (int64_t j = sp.lo; j < sp.hi; ++j) mx = a.geo.scale * double(row[j]) > mx ? a.geo.scale * double(row[j]) : mx;
  const double alpha = t.m[r] == mx ? 1.0 : ::exp(t.m[r] - mx);  // m = −∞ before the first seen key
  double sum = 0;
  for (int64_t j = 0; j < J; ++j) {
    const T p = j >= sp.lo && j < sp.hi ? T(::exp(a.geo.scale * double(row[j]) - mx)) : T(0);
    row[j] = p;
    sum += double(p);
  }
  t.m[r] = mx;
  t.l[r] = t.l[r] * alpha + sum;
  t.alpha[r] = alpha;
}

template <class T>
PONDER_HD void forward_phase(const Args<T>& a, int64_t block, int ph, int tid, int nt) {
  const Tile qt = query_tile(a, block);
  const Tiles<T> t = tiles(Kind::Forward, a);
  const int64_t R = qt.size(), f = a.f, last = 1 + 4 * qt.steps(kKeys);
  if (ph == 0) {
    load_rows(t.q, a.q + (qt.h * a.n + qt.i0) * f, R, f, tid, nt);
    zero_rows(t.o, R, f, tid, nt);
    for (int64_t r = tid; r < R; r += nt) t.m[r] = -INFINITY, t.l[r] = 0;
    return;
  }
  if (ph == last) {  // y = o / l, lse = m + log l
    for (int64_t x = tid; x < R * f; x += nt)
      a.y[(qt.h * a.n + qt.i0) * f + x] = T(double(t.o[(x / f) * ld(f) + x % f]) / t.l[x / f]);
    for (int64_t r = tid; r < R; r += nt) a.lse[qt.h * a.n + qt.i0 + r] = T(t.m[r] + ::log(t.l[r]));
    return;
  }
  const KeyStep ks = key_step(qt, ph);
  switch ((ph - 1) % 4) {
    case 0: load_keys(t, a, qt.h, ks, tid, nt); return;
    case 1: scores<T>(t.s, t.q, t.k, nullptr, nullptr, nullptr, R, ks.J, f, tid, nt); return;
    case 2:
      for (int64_t r = tid; r < R; r += nt) fold_row(t, a, qt, r, ks.k0, ks.J);
      return;
    default: accumulate(t.o, t.s, t.v, t.alpha, R, ks.J, f, tid, nt);  // o = o·alpha + P·v
  }
}

// ---- backward, shared steps

// D[r] = Σ_c dy⊙y of query rows [i0, i0 + R) of head h (in double, then rounded as the CPU kernel does).
template <class T>
PONDER_HD void row_dots(const Tiles<T>& t, const Args<T>& a, int64_t h, int64_t i0, int64_t R, int tid, int nt) {
  for (int64_t r = tid; r < R; r += nt) {
    const T *dy = a.dy + (h * a.n + i0 + r) * a.f, *y = a.y + (h * a.n + i0 + r) * a.f;
    double d = 0;
    for (int64_t c = 0; c < a.f; ++c) d += double(dy[c]) * double(y[c]);
    t.d[r] = double(T(d));
  }
}

// P = exp(scale·s − lse) where seen, else 0, into s; dS = scale·P⊙(dP − D) into dp: rows [i0, i0 + R) of head h
// against the key tile [k0, k0 + J).
template <class T>
PONDER_HD void probs(const Tiles<T>& t, const Args<T>& a, int64_t h, int64_t i0, int64_t R, int64_t k0, int64_t J,
                     int tid, int nt) {
  for (int64_t x = tid; x < R * J; x += nt) {
    const int64_t r = x / J, j = x % J;
    const Span sp = seen_in(a.geo, i0 + r, a.Tk, k0, J);
    const double lse = double(a.lse[h * a.n + i0 + r]);
    const T p = j >= sp.lo && j < sp.hi ? T(::exp(a.geo.scale * double(t.s[r * kKeys + j]) - lse)) : T(0);
    t.s[r * kKeys + j] = p;
    t.dp[r * kKeys + j] = T(a.geo.scale) * p * (t.dp[r * kKeys + j] - T(t.d[r]));
  }
}

// ---- dq: one block per query tile, 1 + 4 phases per key tile + 1

template <class T>
PONDER_HD void dq_phase(const Args<T>& a, int64_t block, int ph, int tid, int nt) {
  const Tile qt = query_tile(a, block);
  const Tiles<T> t = tiles(Kind::Dq, a);
  const int64_t R = qt.size(), f = a.f, last = 1 + 4 * qt.steps(kKeys), q0 = (qt.h * a.n + qt.i0) * f;
  if (ph == 0) {
    load_rows(t.q, a.q + q0, R, f, tid, nt);
    load_rows(t.dy, a.dy + q0, R, f, tid, nt);
    zero_rows(t.o, R, f, tid, nt);
    row_dots(t, a, qt.h, qt.i0, R, tid, nt);
    return;
  }
  if (ph == last) {
    for (int64_t x = tid; x < R * f; x += nt) a.dq[q0 + x] = t.o[(x / f) * ld(f) + x % f];
    return;
  }
  const KeyStep ks = key_step(qt, ph);
  switch ((ph - 1) % 4) {
    case 0: load_keys(t, a, qt.h, ks, tid, nt); return;
    case 1: scores<T>(t.s, t.q, t.k, t.dp, t.dy, t.v, R, ks.J, f, tid, nt); return;
    case 2: probs(t, a, qt.h, qt.i0, R, ks.k0, ks.J, tid, nt); return;
    default: accumulate(t.o, t.dp, t.k, static_cast<const double*>(nullptr), R, ks.J, f, tid, nt);  // dq += dS·k
  }
}

// ---- dk, dv: one block per key tile, 1 + 4 phases per query tile that sees it + 1

template <class T>
PONDER_HD void dkv_phase(const Args<T>& a, int64_t block, int ph, int tid, int nt) {
  const Tile kt = key_tile(a, block);
  const Tiles<T> t = tiles(Kind::Dkv, a);
  const int64_t J = kt.size(), f = a.f, last = 1 + 4 * kt.steps(kRows), k0 = (kt.h * a.Tk + kt.i0) * f;
  if (ph == 0) {
    load_rows(t.k, a.k + k0, J, f, tid, nt);
    load_rows(t.v, a.v + k0, J, f, tid, nt);
    zero_rows(t.dk, J, f, tid, nt);
    zero_rows(t.dv, J, f, tid, nt);
    return;
  }
  if (ph == last) {
    for (int64_t x = tid; x < J * f; x += nt) {
      a.dk[k0 + x] = t.dk[(x / f) * ld(f) + x % f];
      a.dv[k0 + x] = t.dv[(x / f) * ld(f) + x % f];
    }
    return;
  }
  const int64_t i0 = kt.lo + (ph - 1) / 4 * kRows, R = kt.hi - i0 < kRows ? kt.hi - i0 : kRows;
  switch ((ph - 1) % 4) {
    case 0:
      load_rows(t.q, a.q + (kt.h * a.n + i0) * f, R, f, tid, nt);
      load_rows(t.dy, a.dy + (kt.h * a.n + i0) * f, R, f, tid, nt);
      row_dots(t, a, kt.h, i0, R, tid, nt);
      return;
    case 1: scores<T>(t.s, t.q, t.k, t.dp, t.dy, t.v, R, J, f, tid, nt); return;
    case 2: probs(t, a, kt.h, i0, R, kt.i0, J, tid, nt); return;
    default:  // dv += Pᵀ·dy, dk += dSᵀ·q
      for (int64_t x = tid; x < J * f; x += nt) {
        const int64_t j = x / f, c = x % f;
        T av = T(0), ak = T(0);
        for (int64_t r = 0; r < R; ++r) {
          av += t.s[r * kKeys + j] * t.dy[r * ld(f) + c];
          ak += t.dp[r * kKeys + j] * t.q[r * ld(f) + c];
        }
        t.dv[j * ld(f) + c] += av;
        t.dk[j * ld(f) + c] += ak;
      }
  }
}

// ---- the three kinds of block, as the kernels and the tests run them

template <class T>
PONDER_HD int64_t blocks(Kind k, const Args<T>& a) {
  return a.G * (k == Kind::Dkv ? (a.Tk + kKeys - 1) / kKeys : (a.n + kRows - 1) / kRows);
}
template <class T>
PONDER_HD int phases(Kind k, const Args<T>& a, int64_t block) {
  return int(2 + 4 * (k == Kind::Dkv ? key_tile(a, block).steps(kRows) : query_tile(a, block).steps(kKeys)));
}
template <class T>
PONDER_HD void phase(Kind k, const Args<T>& a, int64_t block, int ph, int tid, int nt) {
  switch (k) {
    case Kind::Forward: forward_phase(a, block, ph, tid, nt); return;
    case Kind::Dq: dq_phase(a, block, ph, tid, nt); return;
    default: dkv_phase(a, block, ph, tid, nt);
  }
}

}  // namespace ponder::cuda::attn
