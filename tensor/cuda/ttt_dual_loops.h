// The loops of the CUDA TTT-Linear dual-form kernels' products and copies (tensor/cuda/ttt_dual_body.h). Thread tid
// takes items x = tid, tid + nt, … several at a time. moves() loads four before storing any, so their loads are in
// flight together: the gather and transposes of phase 0 fell from 28 to 2 µs on an H200. sums() advances U outputs'
// sums side by side, each sum keeping its order (k = 0, 1, …), so values do not depend on U or the number of
// threads; with the kernels held to 128 registers, U = 1 measured fastest (bench dual: backward 147, 185 and 193 µs
// at U = 1, 2, 4), and the kernels are built for all three. Each of those loads both operands of every product it
// adds; U = kTiles takes 2 × 2 tiles of outputs, whose terms share their loads (not yet timed on a GPU); products()
// at U = kMma runs float32 products on the tensor cores (tensor/cuda/ttt_dual_mma.h, not yet timed on a GPU either).
// Plain C++ with PONDER_HD, as the body.
#pragma once
#include <cstdint>
#include <type_traits>

#include "tensor/cuda/host_device.h"
#include "tensor/cuda/ttt_dual_mma.h"

namespace ponder::cuda::dual {

constexpr int kUnroll = 4;  // moves(); sums() takes its own (the kernels are built for 1, 2, 4 and kTiles)
// sums<kTiles>: each thread's outputs in 2 × 2 tiles instead of U side by side (see tile_sums).
constexpr int kTiles = 0;
// products<kMma>: float32 products on the tensor cores in three TF32 parts (ttt_dual_mma.h); float64, and shapes the
// tiles do not fit, run as U = 1.
constexpr int kMma = -2;

// The outputs of an even rows × w grid in 2 × 2 tiles: thread item x is the tile of rows i, i + rows/2 and columns
// c, c + w/2 (i = x / (w/2), c = x % (w/2)), its four sums advanced together. Inlined, the terms of one row load
// their row's operand once for both columns and those of one column theirs once for both rows (identical loads
// with no store between them merge): per k, four loads for four products where one output at a time makes eight.
// Consecutive threads take consecutive columns. Each sum keeps its order (k = 0, 1, …), as side_sums' do.
template <class T, int S, class Init, class Term, class Store>
PONDER_HD void tile_sums(int64_t rows, int64_t w, int64_t K, int tid, int nt, Init init, Term term, Store store) {
  const int64_t hr = rows / 2, hw = w / 2;
  for (int64_t x = tid; x < hr * hw; x += nt) {
    const int64_t i = x / hw, c = x % hw;
    T acc[4][S] = {};
    PONDER_UNROLL
    for (int t = 0; t < 4; ++t) init(i + (t >> 1) * hr, c + (t & 1) * hw, acc[t]);
    for (int64_t k = 0; k < K; ++k) {
      PONDER_UNROLL
      for (int t = 0; t < 4; ++t) term(i + (t >> 1) * hr, c + (t & 1) * hw, k, acc[t]);
    }
    PONDER_UNROLL
    for (int t = 0; t < 4; ++t) store(i + (t >> 1) * hr, c + (t & 1) * hw, acc[t]);
  }
}

// Outputs (i, c) of a rows × w grid, U at a time (x, x + nt, …), S sums each over k = 0 … K − 1: init(i, c, acc)
// sets output (i, c)'s sums, term(i, c, k, acc) adds its term k, store(i, c, acc) writes it. acc is the output's T[S].
template <int U, class T, int S, class Init, class Term, class Store>
PONDER_HD void side_sums(int64_t rows, int64_t w, int64_t K, int tid, int nt, Init init, Term term, Store store) {
  const int64_t n = rows * w;
  for (int64_t x0 = tid; x0 < n; x0 += int64_t(U) * nt) {
    T acc[U][S] = {};
    int64_t i[U], c[U];
    bool on[U];
    PONDER_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t x = x0 + int64_t(u) * nt;
      on[u] = x < n;
      i[u] = on[u] ? x / w : 0;
      c[u] = on[u] ? x % w : 0;
      if (on[u]) init(i[u], c[u], acc[u]);
    }
    for (int64_t k = 0; k < K; ++k) {
      PONDER_UNROLL
      for (int u = 0; u < U; ++u)
        if (on[u]) term(i[u], c[u], k, acc[u]);
    }
    PONDER_UNROLL
    for (int u = 0; u < U; ++u)
      if (on[u]) store(i[u], c[u], acc[u]);
  }
}

// The products' loop: side_sums<U> for U = 1, 2, 4; U = kTiles: tile_sums where the grid is even and gives every
// thread a tile, else side_sums<1>. Each sum adds its terms in the same order whichever runs.
template <int U, class T, int S, class Init, class Term, class Store>
PONDER_HD void sums(int64_t rows, int64_t w, int64_t K, int tid, int nt, Init init, Term term, Store store) {
  if constexpr (U == kTiles) {
    if (rows % 2 == 0 && w % 2 == 0 && rows * w >= 4 * int64_t(nt))
      return tile_sums<T, S>(rows, w, K, tid, nt, init, term, store);
    return side_sums<1, T, S>(rows, w, K, tid, nt, init, term, store);
  } else {
    return side_sums<U, T, S>(rows, w, K, tid, nt, init, term, store);
  }
}

// A product's outputs: sum s of output (i, c) of a rows × w grid is init + Σ_k a(s, i, k)·b(s, k, c), for s = 0 …
// S − 1 (init, store as for sums). At U = kMma a float grid that fits 16 × 8 tiles, with K a multiple of 8 and whole
// warps, runs on the tensor cores (mma_sums; its sums round differently), anything else as sums<U> (U = 1 for kMma),
// whose terms are a(s, i, k) * b(s, k, c) added in k order.
template <int U, class T, int S, class Init, class A, class B, class Store>
PONDER_HD void products(int64_t rows, int64_t w, int64_t K, int tid, int nt, Init init, A a, B b, Store store) {
  if constexpr (U == kMma && std::is_same_v<T, float>)
    if (rows % 16 == 0 && w % 8 == 0 && K % 8 == 0 && nt % 32 == 0)
      return mma_sums<S>(rows, w, K, tid, nt, init, a, b, store);
  auto term = [&](int64_t i, int64_t c, int64_t k, T* acc) {
    PONDER_UNROLL
    for (int s = 0; s < S; ++s) acc[s] += a(s, i, k) * b(s, k, c);
  };
  sums<U == kMma ? 1 : U, T, S>(rows, w, K, tid, nt, init, term, store);
}

// x = tid, tid + nt, … of n, kUnroll at a time: load(x) for all of them, then store(x, value) for each.
template <class Load, class Store>
PONDER_HD void moves(int64_t n, int tid, int nt, Load load, Store store) {
  using V = decltype(load(int64_t(0)));
  for (int64_t x0 = tid; x0 < n; x0 += int64_t(kUnroll) * nt) {
    V v[kUnroll] = {};  // set before use; initialised so GCC sees it
    PONDER_UNROLL
    for (int u = 0; u < kUnroll; ++u)
      if (x0 + int64_t(u) * nt < n) v[u] = load(x0 + int64_t(u) * nt);
    PONDER_UNROLL
    for (int u = 0; u < kUnroll; ++u)
      if (x0 + int64_t(u) * nt < n) store(x0 + int64_t(u) * nt, v[u]);
  }
}

}  // namespace ponder::cuda::dual
