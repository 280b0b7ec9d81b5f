#include "ttt/rope.h"

#include <cmath>
#include <stdexcept>

namespace ponder::ttt {

Tensor rope(const Tensor& x, int64_t period, double theta, int64_t offset) {
  const int64_t N = x.shape()[2], f = x.shape()[3], half = f / 2;
  if (f % 2) throw std::invalid_argument("rope: head dim must be even, got " + std::to_string(f));
  // With a period, row t equals row t − period: compute the first `period` rows, copy the rest.
  std::vector<double> inv_freq(static_cast<size_t>(half)), c(size_t(N * half)), s(size_t(N * half));
  for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = std::pow(theta, -2.0 * double(i) / double(f));
  for (int64_t t = 0; t < N; ++t) {
    const int64_t p = period > 0 ? (offset + t) % period : offset + t;
    for (int64_t i = 0; i < half; ++i) {
      const size_t at = size_t(t * half + i);
      if (period > 0 && t >= period) {
        c[at] = c[at - size_t(period * half)];
        s[at] = s[at - size_t(period * half)];
      } else {
        const double ang = double(p) * inv_freq[size_t(i)];
        c[at] = std::cos(ang);
        s[at] = std::sin(ang);
      }
    }
  }
  Tensor cs = raw::to_device(Tensor::from_vector(c, {N, half}, x.dtype()), x.device());  // (N, f/2)
  Tensor sn = raw::to_device(Tensor::from_vector(s, {N, half}, x.dtype()), x.device());
  return rope_rotate(x, cs, sn);  // one fused op (autograd/ops.h)
}

}  // namespace ponder::ttt
