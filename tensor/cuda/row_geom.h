// Where row r of a row kernel's operand finds its γ and β on the device: r decomposed over the operand's leading
// axes (row-major) times γ's strides when broadcast to the operand (tensor/backend.h's RowOffsets, whose goff the
// CPU reads instead). Shared by the fused row kernels (tensor/cuda/rows.cu) and the TTT dual form. Plain C++ with
// PONDER_HD, so tests run it on the CPU.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/cuda/host_device.h"

namespace ponder::cuda {

constexpr int kMaxLead = 8;  // leading axes (all but the last) the γ offsets can be computed over

struct RowGeom {
  int nd = 0;
  int64_t size[kMaxLead] = {}, stride[kMaxLead] = {};
};
PONDER_HD inline int64_t gamma_offset(const RowGeom& g, int64_t r) {
  int64_t off = 0;
  for (int d = g.nd - 1; d >= 0; --d) {
    const int64_t q = r / g.size[d];
    off += (r - q * g.size[d]) * g.stride[d];
    r = q;
  }
  return off;
}

// The geometry of leading axes `sizes` with γ strides `strides`; throws naming `op` past kMaxLead axes.
inline RowGeom row_geom(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, const char* op) {
  if (sizes.size() > size_t(kMaxLead) || sizes.size() != strides.size())
    throw std::invalid_argument(std::string(op) + " (CUDA): the operand has " + std::to_string(sizes.size() + 1) +
                                " axes; the kernel takes at most " + std::to_string(kMaxLead + 1));
  RowGeom g;
  g.nd = int(sizes.size());
  for (int d = 0; d < g.nd; ++d) {
    g.size[d] = sizes[size_t(d)];
    g.stride[d] = strides[size_t(d)];
  }
  return g;
}

}  // namespace ponder::cuda
