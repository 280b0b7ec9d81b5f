#include "tensor/rng.h"

#include <cmath>
#include <stdexcept>

#include "tensor/backend.h"
#include "tensor/kernels.h"

namespace ponder {
namespace {
uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

double rng_uniform_at(uint64_t seed, uint64_t index) {
  return double(mix64(mix64(seed) + index) >> 11) * 0x1.0p-53;
}

Tensor Generator::uniform(const Shape& shape, double lo, double hi, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  backend(Device::CPU).rng_uniform(t, seed_, take(uint64_t(t.numel())), lo, hi);
  return t;
}

Tensor Generator::normal(const Shape& shape, double mean, double std, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  backend(Device::CPU).rng_normal(t, seed_, take(2 * uint64_t(t.numel())), mean, std);
  return t;
}

Tensor Generator::categorical(const Tensor& probs) {
  if (probs.dim() < 1 || probs.shape().back() < 1)
    throw std::invalid_argument("Generator::categorical: probs must have a non-empty last axis, got " +
                                shape_str(probs.shape()));
  std::vector<double> p = probs.to_vector();
  int64_t n = probs.shape().back(), rows = probs.numel() / n;
  uint64_t base = take(uint64_t(rows));
  std::vector<int64_t> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int64_t j = 0; j < n; ++j) {
      double v = p[size_t(r * n + j)];
      if (!(v >= 0) || std::isinf(v))
        throw std::invalid_argument("Generator::categorical: probabilities must be finite and >= 0");
      total += v;
    }
    if (!(total > 0)) throw std::invalid_argument("Generator::categorical: a row of probabilities sums to 0");
    double u = rng_uniform_at(seed_, base + uint64_t(r)) * total, acc = 0;
    int64_t k = n - 1;
    for (int64_t j = 0; j < n; ++j) {
      acc += p[size_t(r * n + j)];
      if (u < acc) { k = j; break; }
    }
    out[size_t(r)] = k;
  }
  Shape s(probs.shape().begin(), probs.shape().end() - 1);
  return raw::to_device(Tensor::from_ints(out, s), probs.device());
}

std::vector<int64_t> Generator::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  uint64_t base = take(uint64_t(n));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = int64_t(rng_uniform_at(seed_, base + uint64_t(i)) * double(i + 1));
    std::swap(p[size_t(i)], p[size_t(j)]);
  }
  return p;
}

double Generator::uniform01() { return rng_uniform_at(seed_, take(1)); }

}  // namespace ponder
