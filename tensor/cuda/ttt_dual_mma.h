// Tensor-core products for the CUDA TTT-Linear dual-form kernels (tensor/cuda/ttt_dual_loops.h, unroll kMma): a warp
// computes 16 × 8 tiles of outputs with mma.sync m16n8k8 on TF32 operands (sm_80 and later), float32 sums.
//
// Why three products per step ("3xTF32"): TF32 keeps 11 significant bits, and the dual form's inner gradient steps
// are where rounding compounds, so the fused kernels compute at float32 accuracy (docs/engine.md, "Mixed
// precision"). Each operand x is split into hi = tf32(x) and lo = tf32(x − hi); a·b ≈ lo_a·hi_b + hi_a·lo_b +
// hi_a·hi_b drops only lo_a·lo_b (about 2⁻²² relative), so a sum is within a few float32 roundings of the FMA
// loops' while the tensor cores do the multiply-adds, three of them per term, and every lane loads 6 operands per
// 8 × 8 × 16 step where the one-output loops load 2 per multiply-add.
//
// The same code runs on the CPU (tests/test_cuda.cpp runs the phases thread by thread there): each lane builds the
// fragments of all 32 lanes of its warp with the same coordinate functions as on the GPU and takes its own outputs
// from emulate_mma_tf32, which reads the fragments as the PTX ISA lays them out (written out separately, so a wrong
// coordinate function fails the tests there too). The emulation sums each 8-term step in double and rounds once;
// the tensor cores' own order and rounding inside a step differ, so the GPU's bits are not the CPU's.
#pragma once
#include <cstdint>
#include <cstring>

#include "tensor/cuda/host_device.h"

namespace ponder::cuda::dual {

// Fragment coordinates of mma.m16n8k8 with .tf32 operands, lane = 0 … 31, g = lane / 4, t = lane % 4 (PTX ISA,
// "Matrix Fragments for mma.m16n8k8"): A (16 × 8, row-major) register r at (g + 8·(r & 1), t + 4·(r / 2)); B (8 × 8,
// k × n) register r at (t + 4·r, g); C and D (16 × 8) register r at (g + 8·(r / 2), 2t + (r & 1)).
PONDER_HD constexpr int frag_a_row(int lane, int r) { return (lane >> 2) + 8 * (r & 1); }
PONDER_HD constexpr int frag_a_col(int lane, int r) { return (lane & 3) + 4 * (r >> 1); }
PONDER_HD constexpr int frag_b_row(int lane, int r) { return (lane & 3) + 4 * r; }
PONDER_HD constexpr int frag_b_col(int lane) { return lane >> 2; }
PONDER_HD constexpr int frag_c_row(int lane, int r) { return (lane >> 2) + 8 * (r >> 1); }
PONDER_HD constexpr int frag_c_col(int lane, int r) { return 2 * (lane & 3) + (r & 1); }

// x rounded to TF32 as cvt.rna.tf32.f32 rounds it (to nearest, ties away from zero; 10 stored mantissa bits),
// returned as a float whose low 13 bits are zero. Infinities and NaNs pass unchanged.
inline float tf32_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, sizeof u);
  return x;
}

// D = C + A·B for one m16n8k8 tile, every operand given as the 32 lanes' fragments (a[lane][r], b[lane][r],
// d[lane][r] holding C on entry), laid out as the PTX ISA's tables list them. Only lane `lane`'s four results are
// computed (each lane of the CPU emulation asks for its own). Sums of the 8 exact products in double, rounded once.
inline void emulate_mma_tf32(float (&d)[4], int lane, const float (&a)[32][4], const float (&b)[32][2]) {
  float A[16][8], B[8][8];
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    A[g][t] = a[l][0], A[g + 8][t] = a[l][1], A[g][t + 4] = a[l][2], A[g + 8][t + 4] = a[l][3];
    B[t][g] = b[l][0], B[t + 4][g] = b[l][1];
  }
  const int g = lane / 4, t = lane % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
  for (int r = 0; r < 4; ++r) {
    double s = d[r];
    for (int k = 0; k < 8; ++k) s += double(A[rows[r]][k]) * double(B[k][cols[r]]);
    d[r] = float(s);
  }
}

#ifdef __CUDA_ARCH__
__device__ inline uint32_t tf32_bits(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ inline void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// acc += A·B on this lane's fragments av, bv (float32), as three TF32 products, the small terms first.
__device__ inline void mma3(float (&acc)[4], const float (&av)[4], const float (&bv)[2]) {
  uint32_t ah[4], al[4], bh[2], bl[2];
  PONDER_UNROLL
  for (int r = 0; r < 4; ++r) ah[r] = tf32_bits(av[r]), al[r] = tf32_bits(av[r] - __uint_as_float(ah[r]));
  PONDER_UNROLL
  for (int r = 0; r < 2; ++r) bh[r] = tf32_bits(bv[r]), bl[r] = tf32_bits(bv[r] - __uint_as_float(bh[r]));
  mma_tf32(acc, al, bh);
  mma_tf32(acc, ah, bl);
  mma_tf32(acc, ah, bh);
}
#endif

// Lane `lane`'s fragments of A (rows i0 …, columns k0 …) and B (rows k0 …, columns c0 …) for sum s: av, bv.
template <class A, class B>
PONDER_HD void load_frags(int lane, int s, int64_t i0, int64_t c0, int64_t k0, A a, B b, float (&av)[4],
                          float (&bv)[2]) {
  PONDER_UNROLL
  for (int r = 0; r < 4; ++r) av[r] = a(s, i0 + frag_a_row(lane, r), k0 + frag_a_col(lane, r));
  PONDER_UNROLL
  for (int r = 0; r < 2; ++r) bv[r] = b(s, k0 + frag_b_row(lane, r), c0 + frag_b_col(lane));
}

// acc[s] += the 16 × 8 × 8 step at (i0, c0, k0) of sum s, for lane `lane` of the warp. On the CPU every lane's
// fragments are built and the three products emulated for this lane's results.
template <int S, class A, class B>
PONDER_HD void mma_step(float (&acc)[S][4], int lane, int64_t i0, int64_t c0, int64_t k0, A a, B b) {
  PONDER_UNROLL
  for (int s = 0; s < S; ++s) {
#ifdef __CUDA_ARCH__
    float av[4], bv[2];
    load_frags(lane, s, i0, c0, k0, a, b, av, bv);
    mma3(acc[s], av, bv);
#else
    float ah[32][4], al[32][4], bh[32][2], bl[32][2];
    for (int l = 0; l < 32; ++l) {
      float av[4], bv[2];
      load_frags(l, s, i0, c0, k0, a, b, av, bv);
      for (int r = 0; r < 4; ++r) ah[l][r] = tf32_round(av[r]), al[l][r] = tf32_round(av[r] - ah[l][r]);
      for (int r = 0; r < 2; ++r) bh[l][r] = tf32_round(bv[r]), bl[l][r] = tf32_round(bv[r] - bh[l][r]);
    }
    emulate_mma_tf32(acc[s], lane, al, bh);
    emulate_mma_tf32(acc[s], lane, ah, bl);
    emulate_mma_tf32(acc[s], lane, ah, bh);
#endif
  }
}

// The products' loop on the tensor cores: outputs (i, c) of a rows × w grid in 16 × 8 tiles, warp x of the block's
// nt / 32 taking tiles x, x + nt / 32, …; S sums each, sum s of output (i, c) init + Σ_k a(s, i, k)·b(s, k, c).
// init(i, c, acc) sets output (i, c)'s S sums, store(i, c, acc) writes them (acc: float[S]). Needs rows % 16, w % 8,
// K % 8 and nt % 32 all zero (products() checks) and every lane of a warp present (the tiles are warp-uniform).
template <int S, class Init, class A, class B, class Store>
PONDER_HD void mma_sums(int64_t rows, int64_t w, int64_t K, int tid, int nt, Init init, A a, B b, Store store) {
  const int lane = tid & 31;
  const int64_t tw = w / 8, tiles = rows / 16 * tw;
#ifdef __CUDA_ARCH__
  __syncwarp();  // mma.sync.aligned needs the warp's lanes converged; a phase's loops before this may leave them apart
#endif
  for (int64_t x = tid >> 5; x < tiles; x += nt >> 5) {
    const int64_t i0 = x / tw * 16, c0 = x % tw * 8;
    float acc[S][4];
    PONDER_UNROLL
    for (int r = 0; r < 4; ++r) {
      float v[S];
      init(i0 + frag_c_row(lane, r), c0 + frag_c_col(lane, r), v);
      PONDER_UNROLL
      for (int s = 0; s < S; ++s) acc[s][r] = v[s];
    }
    for (int64_t k0 = 0; k0 < K; k0 += 8) mma_step<S>(acc, lane, i0, c0, k0, a, b);
    PONDER_UNROLL
    for (int r = 0; r < 4; ++r) {
      float v[S];
      PONDER_UNROLL
      for (int s = 0; s < S; ++s) v[s] = acc[s][r];
      store(i0 + frag_c_row(lane, r), c0 + frag_c_col(lane, r), static_cast<const float*>(v));
    }
  }
}

}  // namespace ponder::cuda::dual
