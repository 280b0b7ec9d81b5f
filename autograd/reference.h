// Naive float64 reference implementations for the op table: plain loops over row-major host
// arrays, written for obviousness, never speed. The engine's kernels are checked against these.
#pragma once
#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ponder::ref {

struct Dense {
  Shape shape;
  std::vector<double> v;  // row-major

  static Dense of(const Tensor& t) { return {t.shape(), t.to_vector()}; }
  int64_t numel() const { return int64_t(v.size()); }
  // Multi-index of flat position i, and back.
  std::vector<int64_t> index(int64_t i) const;
  int64_t flat(const std::vector<int64_t>& idx) const;
  // Element at a multi-index of a broadcast target (size-1 and missing leading axes repeat).
  double at_broadcast(const std::vector<int64_t>& target_idx) const;
};

Dense map(const Dense& x, const std::function<double(double)>& f);
Dense zip(const Dense& a, const Dense& b, const std::function<double(double, double)>& f);
// kind: 's' sum, 'm' max, 'n' min. Axes normalised, empty = all.
Dense reduce(const Dense& x, const std::vector<int64_t>& axes, bool keepdim, char kind);
Dense matmul(const Dense& a, const Dense& b);  // (…, m, k)·(…, k, n), batch broadcast
Dense softmax(const Dense& x, bool log);        // over the last axis
Dense cumsum(const Dense& x, int axis, bool reverse);
Dense permute(const Dense& x, const std::vector<int>& perm);

}  // namespace ponder::ref
