// The CPU backend: 64-byte aligned host memory, kept in a size-keyed cache when freed, and the kernels of
// tensor/cpu/. Each entry point is timed by kind when tensor/profile.h's profiling is on.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"
#include "tensor/profile.h"
#include "tensor/rng.h"

namespace ponder {
namespace {

using prof::Kind;

// Freed blocks by exact (64-byte rounded) size. A training step frees and requests the same sizes every
// step; handing them out again skips malloc's bookkeeping and, for blocks above malloc's mmap threshold,
// the page faults and zeroing of fresh pages. Blocks beyond the limit go back to the system.
class BlockCache {
 public:
  void* get(size_t size) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    return p;
  }
  // Never throws: it runs on the free path, inside destructors (a graph torn down when memory has run out). Where
  // the cache's own bookkeeping cannot grow, the block goes back to the system instead.
  bool put(void* p, size_t size) noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    if (cached_ + size > limit_) return false;
    try {
      free_[size].push_back(p);
    } catch (...) {
      return false;
    }
    cached_ += size;
    return true;
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  void set_limit(size_t bytes) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      limit_ = bytes;
      if (cached_ <= limit_) return;
    }
    release();
  }
  size_t cached() const {
    std::lock_guard<std::mutex> lk(mu_);
    return cached_;
  }
  ~BlockCache() { release(); }

 private:
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
  size_t limit_ = size_t(1) << 30;
};

BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;  // never destroyed: storages may outlive static destructors
  return *cache;
}

size_t block_size(size_t nbytes) { return (nbytes + 63) / 64 * 64; }

class CpuBackend final : public Backend {
 public:
  void* alloc(size_t nbytes) override {
    prof::Scope t(Kind::Alloc, "alloc");
    const size_t size = block_size(nbytes);
    if (void* p = block_cache().get(size)) return p;
    void* p = std::aligned_alloc(64, size);
    if (!p) {  // memory held in the cache may be what is missing
      block_cache().release();
      p = std::aligned_alloc(64, size);
    }
    if (!p) throw std::bad_alloc();
    return p;
  }
  void free(void* p, size_t nbytes) override {
    prof::Scope t(Kind::Alloc, "free");
    if (!block_cache().put(p, block_size(nbytes))) std::free(p);
  }
  void to_host(void* host, const void* dev, size_t n) override { std::memcpy(host, dev, n); }
  void from_host(void* dev, const void* host, size_t n) override { std::memcpy(dev, host, n); }
  void copy(const Tensor& d, const Tensor& s) override { prof::Scope t(Kind::Copy, "copy"); cpu::copy(d, s); }
  void fill(const Tensor& d, double v) override { prof::Scope t(Kind::Elementwise, "fill"); cpu::fill(d, v); }
  void unary(UnaryOp op, double p0, double p1, const Tensor& o, const Tensor& x) override {
    prof::Scope t(Kind::Elementwise, unary_name(op));
    cpu::unary(op, p0, p1, o, x);
  }
  void binary(BinaryOp op, const Tensor& o, const Tensor& a, const Tensor& b) override {
    prof::Scope t(Kind::Elementwise, binary_name(op));
    cpu::binary(op, o, a, b);
  }
  void where(const Tensor& o, const Tensor& c, const Tensor& a, const Tensor& b) override {
    prof::Scope t(Kind::Elementwise, "where");
    cpu::where(o, c, a, b);
  }
  void reduce(ReduceOp op, const Tensor& o, const Tensor& x) override { prof::Scope t(Kind::Reduction, reduce_label(op, o, x)); cpu::reduce(op, o, x); }
  void cumsum(const Tensor& o, const Tensor& x, int axis, bool rev) override {
    prof::Scope t(Kind::Reduction, "cumsum");
    cpu::cumsum(o, x, axis, rev);
  }
  void tri(const Tensor& o, const Tensor& x, int64_t k, bool upper) override {
    prof::Scope t(Kind::Elementwise, "tri");
    cpu::tri(o, x, k, upper);
  }
  void matmul(const Tensor& o, const Tensor& a, const Tensor& b) override { prof::Scope t(Kind::Matmul, matmul_label(o)); cpu::matmul(o, a, b); }
  void index_select(const Tensor& o, const Tensor& x, int axis, const Tensor& i) override {
    prof::Scope t(Kind::Copy, "index_select");
    cpu::index_select(o, x, axis, i);
  }
  void index_add(const Tensor& o, int axis, const Tensor& i, const Tensor& s) override {
    prof::Scope t(Kind::Copy, "index_add");
    cpu::index_add(o, axis, i, s);
  }
  void gather(const Tensor& o, const Tensor& x, int axis, const Tensor& i) override {
    prof::Scope t(Kind::Copy, "gather");
    cpu::gather(o, x, axis, i);
  }
  void scatter_add(const Tensor& o, int axis, const Tensor& i, const Tensor& s) override {
    prof::Scope t(Kind::Copy, "scatter_add");
    cpu::scatter_add(o, axis, i, s);
  }
  void one_hot(const Tensor& o, const Tensor& i) override { prof::Scope t(Kind::Copy, "one_hot"); cpu::one_hot(o, i); }

  // Every fused kernel of PONDER_FUSED_OPS, each checked against its composition in tests/test_ops.cpp.
  bool supports(FusedOp) const override { return true; }
  void layer_norm_rows(const Tensor& o, const Tensor& x, double eps) override {
    prof::Scope t(Kind::Fused, "layer_norm");
    cpu::layer_norm_rows(o, x, eps);
  }
  void layer_norm_backward(const Tensor& o, const Tensor& x, const Tensor& v, double eps) override {
    prof::Scope t(Kind::Fused, "layer_norm_backward");
    cpu::layer_norm_backward(o, x, v, eps);
  }
  void layer_norm_vjp(const Tensor& dx, const Tensor& dv, const Tensor& x, const Tensor& v, const Tensor& dz,
                      double eps) override {
    prof::Scope t(Kind::Fused, "layer_norm_vjp");
    cpu::layer_norm_vjp(dx, dv, x, v, dz, eps);
  }
  void rms_norm_rows(const Tensor& o, const Tensor& x, double eps) override {
    prof::Scope t(Kind::Fused, "rms_norm");
    cpu::rms_norm_rows(o, x, eps);
  }
  double sum_squares(const Tensor& x) override {
    prof::Scope t(Kind::Reduction, "sum_squares");
    return cpu::sum_squares(x);
  }
  void adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) override {
    prof::Scope t(Kind::Fused, "adamw_step");
    cpu::adamw_step(p, m, v, g, c);
  }
  void act_mul(GateAct act, const Tensor& o, const Tensor& a, const Tensor& b) override {
    prof::Scope t(Kind::Fused, act == GateAct::Silu ? "silu_mul" : "gelu_tanh_mul");
    cpu::act_mul(act, o, a, b);
  }
  void act_mul_backward(GateAct act, const Tensor& da, const Tensor& db, const Tensor& a, const Tensor& b,
                        const Tensor& g) override {
    prof::Scope t(Kind::Fused, act == GateAct::Silu ? "silu_mul_backward" : "gelu_tanh_mul_backward");
    cpu::act_mul_backward(act, da, db, a, b, g);
  }
  void layer_norm_affine(const Tensor& o, const Tensor& x, const Tensor& gm, const Tensor& bt, const RowOffsets& ro,
                         double eps) override {
    prof::Scope t(Kind::Fused, "layer_norm_affine");
    cpu::layer_norm_affine(o, x, gm, bt, ro.goff.data(), eps);
  }
  void layer_norm_affine_backward(const Tensor& dx, const Tensor& dg, const Tensor& db, const Tensor& x,
                                  const Tensor& gm, const Tensor& g, const RowOffsets& ro, double eps) override {
    prof::Scope t(Kind::Fused, "layer_norm_affine_backward");
    cpu::layer_norm_affine_backward(dx, dg, db, x, gm, g, ro.goff.data(), eps);
  }
  void rms_norm_affine(const Tensor& o, const Tensor& x, const Tensor& w, const RowOffsets& ro, double eps) override {
    prof::Scope t(Kind::Fused, "rms_norm_affine");
    cpu::rms_norm_affine(o, x, w, ro.goff.data(), eps);
  }
  void rms_norm_affine_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                                const RowOffsets& ro, double eps) override {
    prof::Scope t(Kind::Fused, "rms_norm_affine_backward");
    cpu::rms_norm_affine_backward(dx, dw, x, w, g, ro.goff.data(), eps);
  }
  void ln_l2_grad(const Tensor& o, const Tensor& z, const Tensor& tg, const Tensor& gm, const Tensor& bt,
                  const RowOffsets& ro, double eps) override {
    prof::Scope t(Kind::Fused, "ln_l2_grad");
    cpu::ln_l2_grad(o, z, tg, gm, bt, ro.goff.data(), eps);
  }
  void ln_l2_grad_vjp(const Tensor& dz, const Tensor& dt, const Tensor& dg, const Tensor& db, const Tensor& z,
                      const Tensor& tg, const Tensor& gm, const Tensor& bt, const Tensor& w, const RowOffsets& ro,
                      double eps) override {
    prof::Scope t(Kind::Fused, "ln_l2_grad_vjp");
    cpu::ln_l2_grad_vjp(dz, dt, dg, db, z, tg, gm, bt, w, ro.goff.data(), eps);
  }
  void rms_norm_backward(const Tensor& o, const Tensor& x, const Tensor& g, double eps) override {
    prof::Scope t(Kind::Fused, "rms_norm_backward");
    cpu::rms_norm_backward(o, x, g, eps);
  }

  void attention(const Tensor& y, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttnGeometry& g) override {
    prof::Scope t(Kind::Fused, "attention");
    cpu::attention(y, lse, q, k, v, g);
  }
  void attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& q, const Tensor& k,
                          const Tensor& v, const Tensor& y, const Tensor& lse, const Tensor& dy,
                          const AttnGeometry& g) override {
    prof::Scope t(Kind::Fused, "attention_backward");
    cpu::attention_backward(dq, dk, dv, q, k, v, y, lse, dy, g);
  }
  void rope(const Tensor& out, const Tensor& x, const Tensor& cs, const Tensor& sn) override {
    prof::Scope t(Kind::Fused, "rope");
    cpu::rope(out, x, cs, sn);
  }
  void ttt_linear_dual(const Tensor& y, const DualOperands& o) override {
    prof::Scope t(Kind::Fused, "ttt_linear_dual");
    cpu::ttt_linear_dual(y, o);
  }
  void ttt_linear_dual_backward(const std::array<Tensor, 8>& g, const DualOperands& o,
                                const std::array<Tensor, 3>& dy) override {
    prof::Scope t(Kind::Fused, "ttt_linear_dual_backward");
    cpu::ttt_linear_dual_backward(g, o, dy);
  }
  bool dual_scan() const override { return true; }
  void ttt_linear_scan(const Tensor& Y, const Tensor& S, const ScanOperands& o) override {
    prof::Scope t(Kind::Fused, "ttt_linear_scan");
    cpu::ttt_linear_scan(Y, S, o);
  }
  void ttt_linear_scan_backward(const std::array<Tensor, 8>& g, const ScanOperands& o, const Tensor& Y,
                                const Tensor& S, const std::array<Tensor, 3>& dy, int64_t step_dout) override {
    prof::Scope t(Kind::Fused, "ttt_linear_scan_backward");
    cpu::ttt_linear_scan_backward(g, o, Y, S, dy, step_dout);
  }
  void ttt_prefix_steps(const Tensor& a, const Tensor& saved, const PrefixOperands& o) override {
    prof::Scope t(Kind::Fused, "ttt_prefix_steps");
    cpu::ttt_prefix_steps(a, saved, o);
  }
  void ttt_prefix_steps_backward(const std::array<Tensor, 6>& g, const PrefixOperands& o, const Tensor& saved,
                                 const Tensor& da) override {
    prof::Scope t(Kind::Fused, "ttt_prefix_steps_backward");
    cpu::ttt_prefix_steps_backward(g, o, saved, da);
  }
  void ttt_mlp_dual(const std::array<Tensor, 5>& y, const Tensor& saved, const MlpDualOperands& o) override {
    prof::Scope t(Kind::Fused, "ttt_mlp_dual");
    cpu::ttt_mlp_dual(y, saved, o);
  }
  void ttt_mlp_dual_backward(const std::array<Tensor, 10>& g, const MlpDualOperands& o, const Tensor& saved,
                             const std::array<Tensor, 5>& dy) override {
    prof::Scope t(Kind::Fused, "ttt_mlp_dual_backward");
    cpu::ttt_mlp_dual_backward(g, o, saved, dy);
  }

  void rng_uniform(const Tensor& out, uint64_t seed, uint64_t counter, double lo, double hi) override {
    prof::Scope t(Kind::Copy, "rng");
    PONDER_DISPATCH_FLOAT(out.dtype(), "rng_uniform", [&] {
      scalar_t* p = out.data<scalar_t>();
      const int64_t n = out.numel();
_Pragma("omp parallel for schedule(static) if (n >= cpu::kParallelMin)")
      for (int64_t i = 0; i < n; ++i) p[i] = scalar_t(lo + (hi - lo) * rng_uniform_at(seed, counter + uint64_t(i)));
    });
  }
  void rng_normal(const Tensor& out, uint64_t seed, uint64_t counter, double mean, double std) override {
    prof::Scope t(Kind::Copy, "rng");
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

namespace cpu {
void set_alloc_cache_limit(size_t bytes) { block_cache().set_limit(bytes); }
size_t alloc_cache_bytes() { return block_cache().cached(); }
void release_alloc_cache() { block_cache().release(); }
}  // namespace cpu

bool backend_available(Device d) { return g_backends[size_t(d)] != nullptr; }
void register_backend(Device d, Backend* b) { g_backends[size_t(d)] = b; }

}  // namespace ponder
