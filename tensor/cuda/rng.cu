// Counter-based draws on the GPU: element i is a pure function of (seed, counter + i), the function
// of tensor/rng.cpp, so a CUDA draw equals the CPU draw of the same (seed, counter). Uniform draws are
// bitwise equal; normal draws go through the device's log/sqrt/cos and may differ in the last bits.
#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"

namespace ponder::cuda {
namespace {

// SplitMix64's finaliser, exactly as mix64 in tensor/rng.cpp (integer arithmetic: bitwise portable).
__device__ inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__device__ inline double uniform_at(uint64_t seed, uint64_t index) {
  return double(mix64(mix64(seed) + index) >> 11) * 0x1.0p-53;
}

// The host compiler contracts lo + (hi − lo)·u into one fused multiply-add (x86-64 with FMA); the
// explicit fma() rounds the same way whatever nvcc would have chosen.
template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t counter, double lo, double hi) {
  PONDER_GRID_STRIDE(i, n) { out[i] = T(fma(hi - lo, uniform_at(seed, counter + uint64_t(i)), lo)); }
}

// Box–Muller on two draws per element, as the CPU backend does.
template <class T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t counter, double mean, double std) {
  PONDER_GRID_STRIDE(i, n) {
    const double u1 = 1.0 - uniform_at(seed, counter + 2 * uint64_t(i));
    const double u2 = uniform_at(seed, counter + 2 * uint64_t(i) + 1);
    out[i] = T(fma(std * sqrt(-2.0 * log(u1)), cos(2.0 * 3.14159265358979323846 * u2), mean));
  }
}

}  // namespace

void rng_uniform(const Tensor& out, uint64_t seed, uint64_t counter, double lo, double hi) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "rng_uniform", [&] {
    launch("rng_uniform", uniform_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), out.numel(), seed, counter, lo,
           hi);
  });
}

void rng_normal(const Tensor& out, uint64_t seed, uint64_t counter, double mean, double std) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "rng_normal", [&] {
    launch("rng_normal", normal_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), out.numel(), seed, counter, mean,
           std);
  });
}

}  // namespace ponder::cuda
