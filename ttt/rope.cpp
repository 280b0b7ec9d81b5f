#include "ttt/rope.h"

#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace ponder::ttt {
namespace {

// The (N, f/2) cos and sin tables of N positions from `start` (wrapping at period when it is > 0).
std::pair<Tensor, Tensor> build_tables(int64_t N, int64_t f, int64_t period, double theta, int64_t start, DType dt,
                                       Device dev) {
  const int64_t half = f / 2;
  // With a period, row t equals row t − period: compute the first `period` rows, copy the rest.
  std::vector<double> inv_freq(static_cast<size_t>(half)), c(size_t(N * half)), s(size_t(N * half));
  for (int64_t i = 0; i < half; ++i) inv_freq[size_t(i)] = std::pow(theta, -2.0 * double(i) / double(f));
  for (int64_t t = 0; t < N; ++t) {
    const int64_t p = period > 0 ? (start + t) % period : start + t;
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
  return {raw::to_device(Tensor::from_vector(c, {N, half}, dt), dev),
          raw::to_device(Tensor::from_vector(s, {N, half}, dt), dev)};
}

// The tables, kept between calls: a layer asks for the same positions at every call (the TTT layer's, wrapping at its
// mini-batch; attention's, at each window's offset), and building them (N·f/2 sines and cosines, two uploads) was 4 %
// of a comparison's time. The tensors are inputs of rope_rotate only, never written. At most kMaxTables are kept;
// past that the cache starts over. Never destroyed: CUDA tables must not be freed after the device is gone at exit.
constexpr size_t kMaxTables = 256;
using TableKey = std::tuple<int64_t, int64_t, int64_t, double, int64_t, int, int>;

std::pair<Tensor, Tensor> tables(int64_t N, int64_t f, int64_t period, double theta, int64_t offset, DType dt,
                                 Device dev) {
  static auto* mu = new std::mutex;
  static auto* cache = new std::map<TableKey, std::pair<Tensor, Tensor>>;
  const int64_t start = period > 0 && offset >= 0 ? offset % period : offset;  // the same positions
  const TableKey key{N, f, period, theta, start, int(dt), int(dev)};
  const std::lock_guard<std::mutex> lock(*mu);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  if (cache->size() >= kMaxTables) cache->clear();
  return cache->emplace(key, build_tables(N, f, period, theta, start, dt, dev)).first->second;
}

}  // namespace

Tensor rope(const Tensor& x, int64_t period, double theta, int64_t offset) {
  const int64_t N = x.shape()[2], f = x.shape()[3];
  if (f % 2) throw std::invalid_argument("rope: head dim must be even, got " + std::to_string(f));
  const auto [cs, sn] = tables(N, f, period, theta, offset, x.dtype(), x.device());  // (N, f/2) each
  return rope_rotate(x, cs, sn);  // one fused op (autograd/ops.h)
}

}  // namespace ponder::ttt
