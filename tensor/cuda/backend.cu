// The CUDA backend: device 0, one stream shared by every kernel, copy and cuBLAS call (so work is
// ordered without events and freed memory can be reused at once), a caching allocator, and the
// registration with the tensor layer.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "tensor/cuda/allocator.h"
#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/timing.h"
#include "tensor/cuda/transfer.h"
#include "tensor/kernels.h"

namespace ponder {
namespace cuda {

void cuda_fail(cudaError_t err, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(err) + " (" + what + ") at " + file +
                           ":" + std::to_string(line));
}

void cublas_fail(cublasStatus_t status, const char* what, const char* file, int line) {
  throw std::runtime_error(std::string("cuBLAS error: ") + cublasGetStatusString(status) + " (" + what + ") at " +
                           file + ":" + std::to_string(line));
}

bool sync_each_launch() {
  static const bool on = [] {
    const char* v = std::getenv("PONDER_CUDA_SYNC");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void debug_sync(const char* what, const char* file, int line) {
  if (!sync_each_launch()) return;
  cuda_check_at(cudaStreamSynchronize(stream()), what, file, line);
  cuda_check_at(cudaGetLastError(), what, file, line);
}

namespace {

struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  CachingAllocator* allocator = nullptr;  // never destroyed: tensors may outlive static destructors
};

Context* g_ctx = nullptr;  // set once cuda_init succeeds
std::mutex g_init_mu;

Context& ctx() {
  if (!g_ctx) throw std::runtime_error("CUDA is not initialised (call cuda_init first)");
  return *g_ctx;
}

void* device_malloc(size_t n) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, n);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clears the sticky error so the allocator can retry after emptying its cache
    return nullptr;
  }
  cuda_check(err);
  return p;
}

void device_free(void* p) {
  // A kernel queued on the stream may still read the block; cudaFree is not ordered with that stream.
  wait_stream("cudaFree");
  cuda_check(cudaFree(p));
}

// The kernels it has: every primitive, and of the fused ones the TTT-Linear and TTT-MLP dual forms and their scans
// (ttt_dual.cu, ttt_mlp_dual.cu), the norms with and without γ, the layer norm's double backward and the inner loss
// gradient with its VJP (rows.cu), causal attention (attention.cu) and prefix mode's closed-form steps
// (ttt_prefix.cu), the gated products, AdamW and RoPE (fused.cu). Every other fused op is one node whose values come
// from its composition of the kernels above (autograd/fused.h), which `ponder bench ops --device cuda` shows as
// launches; sum_squares on purpose: clipping adds the parameters' sums on the device and reads them once per step,
// where a kernel returning a host number would wait for the device once per parameter.
constexpr Kernels cuda_kernels() {
  Kernels k;
#define PONDER_KERNEL(ret, name, ...) k.name = cuda::name;
#define PONDER_FUSED_KERNEL(...)
#define PONDER_SCAN_KERNEL(...)
#include "tensor/kernels.def"
  k.ttt_linear_dual = cuda::ttt_linear_dual;
  k.ttt_linear_dual_backward = cuda::ttt_linear_dual_backward;
  k.ttt_linear_scan = cuda::ttt_linear_scan;
  k.ttt_linear_scan_backward = cuda::ttt_linear_scan_backward;
  k.ttt_mlp_dual = cuda::ttt_mlp_dual;
  k.ttt_mlp_dual_backward = cuda::ttt_mlp_dual_backward;
  k.ttt_mlp_scan = cuda::ttt_mlp_scan;
  k.ttt_mlp_scan_backward = cuda::ttt_mlp_scan_backward;
  k.layer_norm_rows = cuda::layer_norm_rows;
  k.layer_norm_backward = cuda::layer_norm_backward;
  k.layer_norm_vjp = cuda::layer_norm_vjp;
  k.rms_norm_rows = cuda::rms_norm_rows;
  k.rms_norm_backward = cuda::rms_norm_backward;
  k.layer_norm_affine = cuda::layer_norm_affine;
  k.layer_norm_affine_backward = cuda::layer_norm_affine_backward;
  k.rms_norm_affine = cuda::rms_norm_affine;
  k.rms_norm_affine_backward = cuda::rms_norm_affine_backward;
  k.ln_l2_grad = cuda::ln_l2_grad;
  k.ln_l2_grad_vjp = cuda::ln_l2_grad_vjp;
  k.act_mul = cuda::act_mul;
  k.act_mul_backward = cuda::act_mul_backward;
  k.adamw_step = cuda::adamw_step;
  k.rope = cuda::rope;
  k.attention = cuda::attention;
  k.attention_backward = cuda::attention_backward;
  k.ttt_prefix_steps = cuda::ttt_prefix_steps;
  k.ttt_prefix_steps_backward = cuda::ttt_prefix_steps_backward;
  return k;
}

// Each kernel is timed on the device under --profile (tensor/cuda/timing.h); the row kernels compute each row's
// offsets from the geometry (row_geom.h), so the host builds no offset table.
class CudaBackend final : public Backend {
 public:
  constexpr CudaBackend() : Backend(cuda_kernels(), {kernel_timer_start, kernel_timer_stop}, false) {}
  void* alloc(size_t nbytes) override { return ctx().allocator->allocate(nbytes); }
  void free(void* p, size_t) override { ctx().allocator->release(p); }
  void to_host(void* host, const void* dev, size_t n) override {
    if (n == 0) return;  // empty tensors have no storage pointer
    cuda_check(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream()));
    wait_reporting("read to the host");
  }
  void from_host(void* dev, const void* host, size_t n) override {
    if (n == 0) return;
    upload(dev, host, n);  // the caller may free or reuse the host buffer as soon as this returns
  }
};

constinit CudaBackend g_backend;

// Throughput units per SM of the CUDA cores, by compute capability (NVIDIA's tuning guides); 0 means
// the architecture is not in the table and the peak is reported as unknown.
int fp32_lanes_per_sm(int major, int minor) {
  if (major == 7 || (major == 8 && minor == 0)) return 64;
  if (major == 8 || major == 9 || major == 10 || major == 12) return 128;
  return 0;
}
int fp64_lanes_per_sm(int major, int minor) {
  if ((major == 7 || major == 8) && minor == 0) return 32;
  if (major == 9 && minor == 0) return 64;
  if (major == 10 && minor == 0) return 64;
  if (major >= 7) return 2;  // consumer and embedded parts run float64 at 1/64 of float32
  return 0;
}
// Dense (no 2:4 sparsity) bf16 tensor-core FLOP per clock per SM: A100 312 TFLOP/s = 108 SMs × 2048 × 1.41 GHz;
// H100/H200 SXM 989 TFLOP/s = 132 SMs × 4096 × 1.83 GHz. Other parts are not in the table.
int bf16_dense_flop_per_clock_sm(int major, int minor) {
  if (major == 8 && minor == 0) return 2048;
  if (major == 9 && minor == 0) return 4096;
  return 0;
}

}  // namespace

cudaStream_t stream() { return ctx().stream; }
cublasHandle_t blas() { return ctx().blas; }

}  // namespace cuda

bool cuda_built() { return true; }

bool cuda_init(std::string* why_not) {
  using namespace cuda;
  std::lock_guard<std::mutex> lk(g_init_mu);
  if (g_ctx) return true;
  auto no = [&](const std::string& reason) {
    if (why_not) *why_not = reason;
    return false;
  };
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    (void)cudaGetLastError();
    std::string reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    // Also what a machine with no NVIDIA driver at all reports; say so rather than suggest an upgrade.
    if (err == cudaErrorInsufficientDriver) reason += " (no NVIDIA driver is loaded, or it is older than the runtime)";
    return no(reason);
  }
  if (count == 0) return no("no CUDA device found");
  try {
    auto c = std::make_unique<Context>();
    cuda_check(cudaSetDevice(0));
    cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    // Not cublas_check: its debug sync would ask for the stream of the context being made here.
    cublas_check_at(cublasCreate(&c->blas), "cublasCreate", __FILE__, __LINE__);
    cublas_check_at(cublasSetStream(c->blas, c->stream), "cublasSetStream", __FILE__, __LINE__);
    c->allocator = new CachingAllocator(device_malloc, device_free);
    g_ctx = c.release();
  } catch (const std::exception& e) {
    return no(std::string("CUDA set-up failed: ") + e.what());
  }
  register_backend(Device::CUDA, &g_backend);
  prof::set_pending_flush(flush_kernel_times);
  return true;
}

void cuda_synchronize() { cuda::wait_reporting("cuda_synchronize"); }

CudaDeviceInfo cuda_device_info() {
  cuda::ctx();
  int dev = 0;
  cuda_check(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  cuda_check(cudaGetDeviceProperties(&prop, dev));
  CudaDeviceInfo info;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.total_bytes = int64_t(prop.totalGlobalMem);
  cuda_check(cudaRuntimeGetVersion(&info.runtime_version));
  cuda_check(cudaDriverGetVersion(&info.driver_version));
  // The clock rates left cudaDeviceProp in CUDA 13; the attributes remain (in kHz).
  int clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
  cuda_check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  cuda_check(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
  cuda_check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  const double sm_ghz_x_sms = double(info.sm_count) * clock_khz * 1e-6;
  info.peak_fp32_gflops = 2.0 * cuda::fp32_lanes_per_sm(prop.major, prop.minor) * sm_ghz_x_sms;
  info.peak_fp64_gflops = 2.0 * cuda::fp64_lanes_per_sm(prop.major, prop.minor) * sm_ghz_x_sms;
  info.peak_bf16_dense_gflops = double(cuda::bf16_dense_flop_per_clock_sm(prop.major, prop.minor)) * sm_ghz_x_sms;
  info.peak_bandwidth_gbs = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0) * 1e-9;  // double data rate
  return info;
}

CudaAllocatorStats cuda_allocator_stats() {
  const cuda::CachingAllocator::Stats s = cuda::ctx().allocator->stats();
  return {s.reserved_bytes, s.cached_bytes, s.raw_allocs, s.cache_hits};
}

void cuda_empty_cache() { cuda::ctx().allocator->empty_cache(); }

void cuda_memcpy(const Tensor& dst, const Tensor& src) {
  const size_t n = size_t(src.numel()) * dtype_size(src.dtype());
  if (dst.device() != Device::CUDA || src.device() != Device::CUDA || !dst.is_contiguous() || !src.is_contiguous() ||
      size_t(dst.numel()) * dtype_size(dst.dtype()) != n)
    throw std::invalid_argument("cuda_memcpy: needs contiguous CUDA tensors of equal size");
  // A view's offset counts elements of its dtype.
  auto first_byte = [](const Tensor& t) {
    return static_cast<char*>(t.storage().data) + size_t(t.offset()) * dtype_size(t.dtype());
  };
  cuda_check(cudaMemcpyAsync(first_byte(dst), first_byte(src), n, cudaMemcpyDeviceToDevice, cuda::stream()));
}

}  // namespace ponder
