// How BLAS (OpenBLAS on the CPU, cuBLAS on CUDA) reads the last two axes (rows × cols) of a row-major operand
// without a copy: a plain row-major matrix with leading dimension ld, or (trans) a transposed view, i.e. a
// column-major matrix. The one statement of the rule: matmul copies an operand first exactly when this
// returns nothing, and each backend's GEMM then trusts it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>

#include "tensor/tensor.h"

namespace ponder {

struct MatLayout {
  bool trans = false;
  int64_t ld = 0;
};

// A view BLAS can read directly has unit stride along one of its last two axes and a leading dimension at
// least as long as that axis's rows (size-1 axes take any stride).
inline std::optional<MatLayout> blas_layout(const Tensor& t) {
  const size_t d = t.dim();
  const int64_t rows = t.shape()[d - 2], cols = t.shape()[d - 1];
  const int64_t rs = t.strides()[d - 2], cs = t.strides()[d - 1];
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(cols, 1)))
    return MatLayout{false, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(rows, 1)))
    return MatLayout{true, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  return std::nullopt;
}

// Elements from t's first to its last (strides are never negative): a copy of that stretch of t's storage,
// starting at t's data pointer, is indexed by t's strides and BLAS offsets unchanged (reduced-precision
// operands, tensor/precision.h). t must not be empty.
inline int64_t storage_span(const Tensor& t) {
  int64_t span = 1;
  for (size_t d = 0; d < t.dim(); ++d) span += (t.shape()[d] - 1) * t.strides()[d];
  return span;
}

}  // namespace ponder
