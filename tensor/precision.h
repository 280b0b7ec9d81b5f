// The precision of float32 matrix products (mixed precision): the operands of every float32 `matmul` op are
// rounded to bf16 (8 significant bits) or TF32 (11) and their products accumulated in float32, while parameters,
// optimiser state, activations and every other op stay float32 ("master weights"). On CUDA this is what the
// tensor cores do (cuBLAS GEMMs with bf16 inputs, or the TF32 math mode). On the CPU, bf16 products of at least
// 128³ multiply-adds run on the bf16 dot-product instruction where the build and CPU have it (AVX512-BF16,
// tensor/cpu/gemm_bf16.cpp: about twice sgemm's rate), rounding each operand as it is packed; every other
// reduced-precision product rounds copies of its operands and runs an f32 GEMM (slower than f32). Either way a
// CPU run keeps the contract a GPU run does: the rounded operands' exact products summed in float32, in an order
// that differs between paths. float64 products are never rounded.
//
// Fused kernels (attention, the TTT dual form) compute in float32 at every setting: the inner loop's
// gradient steps are where rounding would compound, and they are a small share of a large model's FLOPs.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace ponder {

enum class MatmulPrecision : uint8_t { F32, TF32, BF16 };

// Process-wide, read by every float32 matmul on every backend; default F32.
void set_matmul_precision(MatmulPrecision p);
MatmulPrecision matmul_precision();

const char* precision_name(MatmulPrecision p);  // "f32", "tf32", "bf16"
// "f32" | "tf32" | "bf16"; anything else throws std::invalid_argument naming `what` (when not empty) and the value.
MatmulPrecision parse_matmul_precision(const std::string& s, const std::string& what);

// Explicit mantissa bits an operand keeps: 23 (f32), 10 (TF32), 7 (bf16).
int mantissa_bits(MatmulPrecision p);

// x rounded to `bits` explicit mantissa bits, to nearest with ties to even (what cuBLAS's and the CUDA
// intrinsics' conversions do); infinities and NaNs pass through, and a value that rounds past the largest
// finite float becomes infinity, as in a narrower format with float32's exponent range.
inline float round_mantissa(float x, int bits) {
  if (bits >= 23) return x;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf or NaN
  const int drop = 23 - bits;
  const uint32_t half = uint32_t(1) << (drop - 1), lsb = (u >> drop) & 1u;
  u += half - 1 + lsb;  // round half to even: a tie rounds up only when the kept part is odd
  u &= ~((uint32_t(1) << drop) - 1);
  std::memcpy(&x, &u, sizeof u);
  return x;
}

// Sets a precision for a scope and restores the previous one on exit (tests, benchmarks).
class MatmulPrecisionScope {
 public:
  explicit MatmulPrecisionScope(MatmulPrecision p) : saved_(matmul_precision()) { set_matmul_precision(p); }
  ~MatmulPrecisionScope() { set_matmul_precision(saved_); }
  MatmulPrecisionScope(const MatmulPrecisionScope&) = delete;
  MatmulPrecisionScope& operator=(const MatmulPrecisionScope&) = delete;

 private:
  MatmulPrecision saved_;
};

}  // namespace ponder
