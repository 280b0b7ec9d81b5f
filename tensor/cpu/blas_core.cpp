// Which OpenBLAS kernels to ask for when OpenBLAS's own choice is its fallback (runtime.h says why).
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tensor/cpu/runtime.h"

namespace ponder::cpu {

std::string blas_core_for_this_cpu() {
  __builtin_cpu_init();
  // SkylakeX's kernels need AVX-512 F, CD, BW, DQ and VL; Haswell's need AVX2 and FMA.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

std::string blas_core_override() {
  if (std::getenv("OPENBLAS_CORETYPE")) return "";  // the user's choice stands
  // Prescott is what a DYNAMIC_ARCH build runs on an Intel model it has no entry for; on any CPU that really is
  // that old, blas_core_for_this_cpu finds nothing better and nothing changes.
  if (std::strcmp(openblas_get_corename(), "Prescott") != 0) return "";
  return blas_core_for_this_cpu();
}

}  // namespace ponder::cpu
