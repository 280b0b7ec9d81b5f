// float32 GEMM with bf16 operands on the CPU's bf16 dot-product instruction (AVX512-BF16: VDPBF16PS, on Cooper Lake,
// Sapphire Rapids and later Xeons, and AMD Zen 4 and later). Each operand element is rounded to bf16 as
// round_mantissa(x, 7) does (nearest, ties to even; tensor/precision.h) while it is packed, and the instruction adds
// the exact products of two bf16 pairs to float32 sums: the contract of a bf16 matmul that the float32 GEMM on
// rounded copies (tensor/cpu/matmul.cpp) also keeps, at up to twice an f32 FMA's multiply-adds per instruction.
// The instruction treats subnormal bf16 inputs as zero and flushes subnormal sums to zero (|x| < 2⁻¹²⁶), where the
// float32 path keeps them.
//
// The structure is the usual one for a packed GEMM. For each block of KC rows of B, all of B's block is packed
// into panels of NR = 32 columns, each a (KC/2, NR) array of bf16 pairs (rows 2q and 2q + 1 of one column in one
// 32-bit word, the layout VDPBF16PS pairs). Threads then take tiles of MR = 8 rows of A, pack each the same way
// (one word per row and pair of columns), and run the micro-kernel against every panel: 8 × 32 float32 sums in
// sixteen 512-bit registers, one word of A broadcast per row. A block's sums are added to C after the first
// block, so each element of C is summed in one order, whatever the thread count.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tensor/cpu/gemm.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__)
#include <immintrin.h>
#include <omp.h>
#define PONDER_BF16_GEMM 1
#endif

namespace ponder::cpu {

// The switch (PONDER_CPU_BF16_GEMM=0 takes the rounded-copies path, to compare the two) and the CPU's features.
bool bf16_gemm_supported() {
#ifdef PONDER_BF16_GEMM
  static const bool on = [] {
    const char* env = std::getenv("PONDER_CPU_BF16_GEMM");
    if (env && std::strcmp(env, "0") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
  }();
  return on;
#else
  return false;
#endif
}

#ifdef PONDER_BF16_GEMM
namespace {

constexpr int64_t kMR = 8, kNR = 32, kKC = 512;

// One product's operands (gemm_bf16's arguments).
struct Operands {
  bool ta, tb;
  int64_t m, n;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
};

// x >> 16 in each 32-bit lane. The masked form with every lane on is the same instruction; GCC 12's plain
// _mm512_srli_epi32 starts from an undefined register and warns (-Wmaybe-uninitialized) wherever it is inlined.
inline __m512i shift16(__m512i x) { return _mm512_maskz_srli_epi32(__mmask16(0xFFFF), x, 16); }

inline __mmask16 lanes(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(n, 0)) - 1); }

// 16 floats rounded to bf16 as round_mantissa(x, 7) does, each in the high half of its 32-bit lane (low half zero):
// add 0x7FFF plus the kept part's lowest bit (a tie rounds to even), carry into the exponent (a value past bf16's
// largest becomes infinity); infinities pass, and a NaN stays a NaN (its quiet bit set, in case its payload lay
// only in the bits dropped).
inline __m512i round_hi(__m512 x) {
  const __m512i u = _mm512_castps_si512(x), exp = _mm512_set1_epi32(0x7f800000);
  const __m512i lsb = _mm512_and_si512(shift16(u), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 special = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, exp), exp);
  const __mmask16 nan = _mm512_mask_test_epi32_mask(special, u, _mm512_set1_epi32(0x7fffff));
  r = _mm512_mask_mov_epi32(r, special, u);
  r = _mm512_mask_or_epi32(r, nan, r, _mm512_set1_epi32(0x400000));
  return _mm512_and_si512(r, _mm512_set1_epi32(int(0xffff0000u)));
}

// Words j < cnt ≤ 16: bf16(r0[j]) in the low half, bf16(r1[j]) in the high half (zero where r1 is null).
inline __m512i pair_rows(const float* r0, const float* r1, int64_t cnt) {
  const __mmask16 m = lanes(cnt);
  const __m512i lo = shift16(round_hi(_mm512_maskz_loadu_ps(m, r0)));
  return r1 ? _mm512_or_si512(lo, round_hi(_mm512_maskz_loadu_ps(m, r1))) : lo;
}

// Words t < 16: bf16(r[2t]) low, bf16(r[2t + 1]) high, for the cnt ≤ 32 elements of r there are (zeros past them).
inline __m512i pair_adjacent(const float* r, int64_t cnt) {
  const __m512i v0 = round_hi(_mm512_maskz_loadu_ps(lanes(cnt), r));
  const __m512i v1 = round_hi(_mm512_maskz_loadu_ps(lanes(cnt - 16), r + 16));
  const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25,
                                       23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);  // the high halves, in order
  return _mm512_permutex2var_epi16(v0, odd, v1);
}

// out[q·stride] = the word of elements (2q, 2q + 1) of row r (kc elements), q < (kc + 1)/2.
void pack_along(const float* r, int64_t kc, uint32_t* out, int64_t stride) {
  alignas(64) uint32_t t[16];
  for (int64_t q = 0; 2 * q < kc; q += 16) {
    _mm512_store_si512(t, pair_adjacent(r + 2 * q, std::min<int64_t>(32, kc - 2 * q)));
    const int64_t e = std::min<int64_t>(16, (kc + 1) / 2 - q);
    for (int64_t s = 0; s < e; ++s) out[(q + s) * stride] = t[s];
  }
}

// Panel p of B's rows k0 … k0 + kc: (kc2, NR) words, columns past n zero. B is k × n (tb: stored n × k).
void pack_panel(const float* b, bool tb, int64_t ldb, int64_t k0, int64_t kc, int64_t n, int64_t p, uint32_t* o) {
  const int64_t kc2 = (kc + 1) / 2, j0 = p * kNR, w = std::min(kNR, n - j0);
  if (!tb) {
    for (int64_t q = 0; q < kc2; ++q) {
      const float* r0 = b + (k0 + 2 * q) * ldb + j0;
      const float* r1 = 2 * q + 1 < kc ? r0 + ldb : nullptr;
      for (int64_t h = 0; h < kNR; h += 16)
        _mm512_storeu_si512(o + q * kNR + h, h < w ? pair_rows(r0 + h, r1 ? r1 + h : nullptr, w - h)
                                                   : _mm512_setzero_si512());
    }
    return;
  }
  for (int64_t j = 0; j < kNR; ++j) {
    if (j < w) pack_along(b + (j0 + j) * ldb + k0, kc, o + j, kNR);
    else for (int64_t q = 0; q < kc2; ++q) o[q * kNR + j] = 0;
  }
}

// Rows i0 … i0 + mr of A's columns k0 … k0 + kc: (kc2, MR) words, rows past mr zero. A is m × k (ta: stored k × m).
void pack_tile(const float* a, bool ta, int64_t lda, int64_t i0, int64_t mr, int64_t k0, int64_t kc, uint32_t* o) {
  const int64_t kc2 = (kc + 1) / 2;
  if (ta) {
    alignas(64) uint32_t t[16];
    for (int64_t q = 0; q < kc2; ++q) {
      const float* r0 = a + (k0 + 2 * q) * lda + i0;
      _mm512_store_si512(t, pair_rows(r0, 2 * q + 1 < kc ? r0 + lda : nullptr, mr));
      std::memcpy(o + q * kMR, t, sizeof(uint32_t) * kMR);
    }
    return;
  }
  for (int64_t i = 0; i < kMR; ++i) {
    if (i < mr) pack_along(a + (i0 + i) * lda + k0, kc, o + i, kMR);
    else for (int64_t q = 0; q < kc2; ++q) o[q * kMR + i] = 0;
  }
}

// C's mr × nr tile (rows ldc apart) = (add ? C : 0) + the packed tile A times the packed panel B, kc2 pairs.
void micro(int64_t kc2, const uint32_t* A, const uint32_t* B, float* c, int64_t ldc, int64_t mr, int64_t nr, bool add) {
  __m512 acc[kMR][2];
  for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < kc2; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B + q * kNR), b1 = (__m512bh)_mm512_loadu_si512(B + q * kNR + 16);
#pragma GCC unroll 8
    for (int64_t i = 0; i < kMR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(A[q * kMR + i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  const __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
  for (int64_t i = 0; i < mr; ++i) {
    float* r = c + i * ldc;
    if (add) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, r));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, r + 16));
    }
    _mm512_mask_storeu_ps(r, m0, acc[i][0]);
    _mm512_mask_storeu_ps(r + 16, m1, acc[i][1]);
  }
}

// One block of kc rows of B (k0 …) for all of C: B's block packed into panels, then each thread takes its share of
// A's 8-row tiles and runs each against every panel. (Taking wide B's panels a group at a time, so that a group
// stays in a core's L2, measured no faster on 2 threads, up to n = 8,192.)
void block_pass(const Operands& o, int64_t k0, int64_t kc, uint32_t* pb, uint32_t* tiles) {
  const int64_t kc2 = (kc + 1) / 2, np = (o.n + kNR - 1) / kNR, mt = (o.m + kMR - 1) / kMR;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t p = 0; p < np; ++p) pack_panel(o.b, o.tb, o.ldb, k0, kc, o.n, p, pb + p * kc2 * kNR);
    uint32_t* tile = tiles + int64_t(omp_get_thread_num()) * (kKC / 2) * kMR;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < mt; ++t) {
      const int64_t i0 = t * kMR, mr = std::min(kMR, o.m - i0);
      pack_tile(o.a, o.ta, o.lda, i0, mr, k0, kc, tile);
      for (int64_t p = 0; p < np; ++p)
        micro(kc2, tile, pb + p * kc2 * kNR, o.c + i0 * o.ldc + p * kNR, o.ldc, mr, std::min(kNR, o.n - p * kNR),
              k0 > 0);
    }
  }
}

}  // namespace

void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float* c, int64_t ldc) {
  if (!bf16_gemm_supported()) throw std::logic_error("gemm_bf16: this CPU or build has no bf16 dot products");
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  // The calling thread's buffers, kept between calls and sized before the parallel region (where a failed
  // allocation could not be reported): B's packed block, and one A tile per thread.
  thread_local std::vector<uint32_t> panels, tiles;
  const int64_t np = (n + kNR - 1) / kNR, kc2_max = (std::min(kKC, k) + 1) / 2;
  panels.resize(size_t(np * kc2_max * kNR));
  tiles.resize(size_t(int64_t(omp_get_max_threads()) * (kKC / 2) * kMR));
  const Operands o{ta, tb, m, n, a, lda, b, ldb, c, ldc};
  for (int64_t k0 = 0; k0 < k; k0 += kKC) block_pass(o, k0, std::min(kKC, k - k0), panels.data(), tiles.data());
}
#else
void gemm_bf16(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t) {
  throw std::logic_error("gemm_bf16: this build has no bf16 dot products (compiled without AVX512-BF16)");
}
#endif

}  // namespace ponder::cpu
