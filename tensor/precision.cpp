#include "tensor/precision.h"

#include <atomic>
#include <stdexcept>

namespace ponder {
namespace {

std::atomic<MatmulPrecision> g_precision{MatmulPrecision::F32};

}  // namespace

void set_matmul_precision(MatmulPrecision p) { g_precision = p; }
MatmulPrecision matmul_precision() { return g_precision; }

const char* precision_name(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::F32: return "f32";
    case MatmulPrecision::TF32: return "tf32";
    case MatmulPrecision::BF16: return "bf16";
  }
  return "?";
}

MatmulPrecision parse_matmul_precision(const std::string& s, const std::string& what) {
  for (MatmulPrecision p : {MatmulPrecision::F32, MatmulPrecision::TF32, MatmulPrecision::BF16})
    if (s == precision_name(p)) return p;
  throw std::invalid_argument((what.empty() ? "" : what + ": ") + "expected f32, tf32 or bf16, got '" + s + "'");
}

int mantissa_bits(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::F32: return 23;
    case MatmulPrecision::TF32: return 10;
    case MatmulPrecision::BF16: return 7;
  }
  return 23;
}

}  // namespace ponder
