// The CPU backend: 64-byte aligned host memory and the kernels of tensor/cpu/.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"
#include "tensor/rng.h"

namespace ponder {
namespace {

class CpuBackend final : public Backend {
 public:
  void* alloc(size_t nbytes) override {
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free(void* p, size_t) override { std::free(p); }
  void to_host(void* host, const void* dev, size_t n) override { std::memcpy(host, dev, n); }
  void from_host(void* dev, const void* host, size_t n) override { std::memcpy(dev, host, n); }
  void copy(const Tensor& d, const Tensor& s) override { cpu::copy(d, s); }
  void fill(const Tensor& d, double v) override { cpu::fill(d, v); }
  void unary(UnaryOp op, double p0, double p1, const Tensor& o, const Tensor& x) override { cpu::unary(op, p0, p1, o, x); }
  void binary(BinaryOp op, const Tensor& o, const Tensor& a, const Tensor& b) override { cpu::binary(op, o, a, b); }
  void where(const Tensor& o, const Tensor& c, const Tensor& a, const Tensor& b) override { cpu::where(o, c, a, b); }
  void reduce(ReduceOp op, const Tensor& o, const Tensor& x) override { cpu::reduce(op, o, x); }
  void cumsum(const Tensor& o, const Tensor& x, int axis, bool rev) override { cpu::cumsum(o, x, axis, rev); }
  void tri(const Tensor& o, const Tensor& x, int64_t k, bool upper) override { cpu::tri(o, x, k, upper); }
  void matmul(const Tensor& o, const Tensor& a, const Tensor& b) override { cpu::matmul(o, a, b); }
  void index_select(const Tensor& o, const Tensor& x, int axis, const Tensor& i) override { cpu::index_select(o, x, axis, i); }
  void index_add(const Tensor& o, int axis, const Tensor& i, const Tensor& s) override { cpu::index_add(o, axis, i, s); }
  void gather(const Tensor& o, const Tensor& x, int axis, const Tensor& i) override { cpu::gather(o, x, axis, i); }
  void scatter_add(const Tensor& o, int axis, const Tensor& i, const Tensor& s) override { cpu::scatter_add(o, axis, i, s); }
  void one_hot(const Tensor& o, const Tensor& i) override { cpu::one_hot(o, i); }

  void rng_uniform(const Tensor& out, uint64_t seed, uint64_t counter, double lo, double hi) override {
    PONDER_DISPATCH_FLOAT(out.dtype(), "rng_uniform", [&] {
      scalar_t* p = out.data<scalar_t>();
      const int64_t n = out.numel();
_Pragma("omp parallel for schedule(static) if (n >= cpu::kParallelMin)")
      for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(lo + (hi - lo) * rng_uniform_at(seed, counter + uint64_t(i)));
    });
  }
  void rng_normal(const Tensor& out, uint64_t seed, uint64_t counter, double mean, double std) override {
    PONDER_DISPATCH_FLOAT(out.dtype(), "rng_normal", [&] {
      scalar_t* p = out.data<scalar_t>();
      const int64_t n = out.numel();
_Pragma("omp parallel for schedule(static) if (n >= cpu::kParallelMin)")
      for (int64_t i = 0; i < n; ++i) {  // Box–Muller on two draws per element
        double u1 = 1.0 - rng_uniform_at(seed, counter + 2 * uint64_t(i));
        double u2 = rng_uniform_at(seed, counter + 2 * uint64_t(i) + 1);
        p[i] = scalar_t(mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      }
    });
  }
};

CpuBackend g_cpu;
Backend* g_backends[2] = {&g_cpu, nullptr};

}  // namespace

Backend& backend(Device d) {
  Backend* b = g_backends[size_t(d)];
  if (!b)
    throw std::runtime_error(std::string("device ") + device_name(d) +
                             " is not available (this build has no backend for it, or no device was found)");
  return *b;
}

bool backend_available(Device d) { return g_backends[size_t(d)] != nullptr; }
void register_backend(Device d, Backend* b) { g_backends[size_t(d)] = b; }

}  // namespace ponder
