// Strided N-operand iteration for CPU kernels. The iteration space is the output shape; each
// operand brings strides aligned to it (0 on broadcast axes). Adjacent axes that are contiguous
// for every operand are merged, and the work is cut into rows of at most kChunk elements that
// OpenMP threads take in a fixed static order, so results never depend on the thread count.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ponder::cpu {

constexpr int64_t kChunk = 8192;
// Below this many elements threads cost more than they save: waking a passively waiting OpenMP thread
// takes tens of microseconds, as long as a float32 map over ~100K elements.
constexpr int64_t kParallelMin = int64_t(1) << 17;

// Strides of t as seen when broadcast to `shape` (t's rank may be smaller).
Shape broadcast_strides(const Tensor& t, const Shape& shape);

template <size_t N, class RowFn>
void strided_rows(const Shape& shape, const std::array<Shape, N>& strides, RowFn&& fn) {
  Shape sz;
  std::array<Shape, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !sz.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      sz.back() *= shape[d];
      for (size_t k = 0; k < N; ++k) st[k].back() = strides[k][d];
    } else {
      sz.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
    }
  }
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) return;
  if (sz.empty()) {
    sz.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
  const int64_t inner = sz.back();
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) inner_st[k] = st[k].back();
  const int64_t per_row = (inner + kChunk - 1) / kChunk;
  const int64_t items = numel / inner * per_row;
  const int nd = int(sz.size()) - 1;
  auto item = [&](int64_t it) {
    int64_t r = it / per_row, start = (it % per_row) * kChunk;
    std::array<int64_t, N> off{};
    for (int d = nd - 1; d >= 0; --d) {
      int64_t i = r % sz[size_t(d)];
      r /= sz[size_t(d)];
      for (size_t k = 0; k < N; ++k) off[k] += i * st[k][size_t(d)];
    }
    for (size_t k = 0; k < N; ++k) off[k] += start * inner_st[k];
    fn(std::min(kChunk, inner - start), off.data(), inner_st.data());
  };
  if ((numel < kParallelMin || items == 1) && nd <= 16) {
    // No parallel region at all (even a one-thread team costs), and the row offsets advance like an
    // odometer instead of being decoded from the row number.
    std::array<int64_t, N> off{};
    int64_t idx[16] = {};
    const int64_t rows = numel / inner;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t start = 0; start < inner; start += kChunk) {
        std::array<int64_t, N> o = off;
        for (size_t k = 0; k < N; ++k) o[k] += start * inner_st[k];
        fn(std::min(kChunk, inner - start), o.data(), inner_st.data());
      }
      for (int d = nd - 1; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += st[k][size_t(d)];
        if (++idx[d] < sz[size_t(d)]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= st[k][size_t(d)] * sz[size_t(d)];
        idx[d] = 0;
      }
    }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t it = 0; it < items; ++it) item(it);
}

}  // namespace ponder::cpu
