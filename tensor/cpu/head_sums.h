// The parameter gradients of kernels that work head by head (tensor/cpu/ttt_dual.cpp, ttt_prefix.cpp): each head
// sums its dγ and dβ into double accumulators of its own, and the heads' sums are added in head order here, so the
// result does not depend on which thread ran which head.
#pragma once
#include <cstdint>

namespace ponder::cpu {

// parts: G blocks of 2·P doubles (a head's dγ, then its dβ); dgam, dbet (P) ← their sums over the heads in order.
template <class T>
void sum_head_parts(const double* parts, int64_t G, int64_t P, T* dgam, T* dbet) {
  for (int64_t j = 0; j < P; ++j) {
    double sg = 0, sb = 0;
    for (int64_t g = 0; g < G; ++g) {
      sg += parts[g * 2 * P + j];
      sb += parts[g * 2 * P + P + j];
    }
    dgam[j] = T(sg);
    dbet[j] = T(sb);
  }
}

}  // namespace ponder::cpu
