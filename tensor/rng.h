// Counter-based random numbers: element i of a draw is a pure function of (seed, counter + i), so
// results are identical whatever the thread count and can be produced in parallel.
#pragma once
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ponder {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_state(uint64_t seed, uint64_t counter) { seed_ = seed; counter_ = counter; }

  Tensor uniform(const Shape& shape, double lo, double hi, DType dtype = DType::F32);
  Tensor normal(const Shape& shape, double mean, double std, DType dtype = DType::F32);
  // Samples one index per row of `probs` (…, n) (rows need not be normalised); returns int64 (…) on
  // probs' device.
  Tensor categorical(const Tensor& probs);
  std::vector<int64_t> permutation(int64_t n);
  double uniform01();  // one draw, for host-side decisions

 private:
  uint64_t take(uint64_t n) { uint64_t c = counter_; counter_ += n; return c; }
  uint64_t seed_;
  uint64_t counter_ = 0;
};

// The uniform double in [0,1) at position `index` of the stream `seed`.
double rng_uniform_at(uint64_t seed, uint64_t index);

}  // namespace ponder
