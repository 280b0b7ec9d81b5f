// TTT-Linear's dual form on one mini-batch on the GPU, forward and backward: one thread block per head, whose
// threads run the phases of tensor/cuda/ttt_dual_body.h with a block barrier after each (one launch per call, where
// the composition takes about a hundred). A head's intermediates live in the block's shared memory when they fit
// (93 KB for the backward in float32 at the 125M shape, b 16 and f 64; the first kernel kept them in global memory,
// where every phase's loops waited on L2 for what the phase before had written); otherwise, or when asked
// (cuda_set_dual_options, for `ponder bench dual`), in global memory. Copies keep four loads in flight per thread
// and the products 1, 2 or 4 outputs (tensor/cuda/ttt_dual_loops.h; one measured fastest); the row formulas run in
// double over column chunks (tensor/cuda/ttt_dual_rows.h). dγ and dβ are summed per head in row order and then over
// heads in head order, 16 heads at a time and then the chunks in order (two small kernels), so results do not
// depend on scheduling. The scan kernels run these phases over every unit of a layer in one launch (the backward in
// blocks of units), each unit on the arguments moved to it (dual::unit_args).
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/ttt_dual_body.h"
#include "tensor/dtype.h"

namespace ponder::cuda {
namespace {

constexpr int kDualThreads = 256;
static_assert(kDualTiles == dual::kTiles, "the options' tiles are the body's");
static_assert(kDualMma == dual::kMma, "the options' tensor-core products are the body's");
// PONDER_CUDA_DUAL_UNROLL sets the products' unroll for a whole run: 1, 2, 4, "tiles" or "mma" (checked at the first
// launch; anything else is -1 there, so a typo is an error rather than another unroll).
CudaDualOptions options_from_env() {
  CudaDualOptions o;
  if (const char* u = std::getenv("PONDER_CUDA_DUAL_UNROLL")) {
    const std::string v = u;
    o.unroll = v == "tiles" ? kDualTiles : v == "mma" ? kDualMma : v == "1" ? 1 : v == "2" ? 2 : v == "4" ? 4 : -1;
  }
  return o;
}
CudaDualOptions g_dual_options = options_from_env();

__device__ inline int phase_count(int asked, int all) { return asked >= 0 && asked < all ? asked : all; }

// Every thread block holds one head; at most 128 registers a thread, so two blocks fit on a multiprocessor as their
// shared memory does (93 KB each in float32 at b 16, f 64). U: outputs in flight per thread in the products
// (tensor/cuda/ttt_dual_loops.h), chosen at run time among the instantiations (pick below).
template <class T, int U>
__global__ void __launch_bounds__(kDualThreads, 2) dual_forward_kernel(dual::Args<T> a) {
  const int n = phase_count(a.phases, dual::kForwardPhases);
  for (int ph = 0; ph < n; ++ph) {
    dual::forward_phase<U>(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}

template <class T, int U>
__global__ void __launch_bounds__(kDualThreads, 2) dual_backward_kernel(dual::Args<T> a) {
  const int n = phase_count(a.phases, dual::kBackwardPhases);
  for (int ph = 0; ph < n; ++ph) {
    dual::backward_phase<U>(a, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
    __syncthreads();
  }
}

// The scan (tensor/cuda/ttt_dual_body.h, Scan): units s.lo … s.hi of every head in one launch, each with every phase
// of the one-unit kernel (the phase option, for timing one kernel by difference, does not apply). Each phase moves
// the launch's Args to its unit itself (scan_*_phase): Args held across the phases would not fit in registers.
template <class T, int U>
__global__ void __launch_bounds__(kDualThreads, 2) scan_forward_kernel(dual::Args<T> a, dual::Scan<T> s) {
  for (int64_t u = s.lo; u <= s.hi; ++u)
    for (int ph = 0; ph < dual::kForwardPhases; ++ph) {
      dual::scan_forward_phase<U>(a, s, u, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
      __syncthreads();
    }
}

template <class T, int U>
__global__ void __launch_bounds__(kDualThreads, 2) scan_backward_kernel(dual::Args<T> a, dual::Scan<T> s) {
  for (int64_t u = s.hi; u >= s.lo; --u)
    for (int ph = 0; ph < dual::kBackwardPhases; ++ph) {
      dual::scan_backward_phase<U>(a, s, u, int64_t(blockIdx.x), ph, int(threadIdx.x), int(blockDim.x));
      __syncthreads();
    }
}

// The instantiation for the options' unroll: kDualTiles, 1, 2, 4 or kDualMma (float64 has no tensor-core products:
// its kMma is the U = 1 kernel, which products() would run anyway). DUAL_KERNELS(k) lists k's five for pick.
template <class T>
constexpr int kMmaUnroll = std::is_same_v<T, float> ? dual::kMma : 1;
#define DUAL_KERNELS(k) \
  k<scalar_t, kDualTiles>, k<scalar_t, 1>, k<scalar_t, 2>, k<scalar_t, 4>, k<scalar_t, kMmaUnroll<scalar_t>>
template <class K>
K pick(int unroll, K kt, K k1, K k2, K k4, K kmma) {
  switch (unroll) {
    case kDualTiles: return kt;
    case 1: return k1;
    case 2: return k2;
    case 4: return k4;
    default: return kmma;  // kDualMma: dual_unroll checked it
  }
}

constexpr int64_t kHeadChunk = 16;  // heads per partial sum of dγ, dβ

__global__ void gamma_chunk_kernel(const double* parts, int64_t G, int64_t P, double* sums) {
  PONDER_GRID_STRIDE(x, dual::head_chunks(G, kHeadChunk) * P) dual::sum_gamma_chunk(parts, G, P, kHeadChunk, sums, x);
}
template <class T>
__global__ void gamma_sum_kernel(const double* sums, int64_t Q, int64_t P, T* dgam, T* dbet) {
  PONDER_GRID_STRIDE(j, P) dual::sum_gamma_parts(sums, Q, P, dgam, dbet, j);
}

__global__ void gamma_unit_chunk_kernel(const double* parts, int64_t units, int64_t G, int64_t P, double* sums) {
  PONDER_GRID_STRIDE(x, units * dual::head_chunks(G, kHeadChunk) * P)
  dual::sum_gamma_unit_chunk(parts, G, P, kHeadChunk, sums, x);
}
template <class T>
__global__ void gamma_unit_sum_kernel(const double* sums, int64_t Q, int64_t P, dual::Scan<T> s, T* dgam, T* dbet) {
  PONDER_GRID_STRIDE(j, P) dual::add_gamma_units(sums, Q, P, s, dgam, dbet, j);
}

// Heads in the launch: the operands are (n0, n1, r, c) head views (tensor/backend.h, DualOperands).
int64_t head_count(const DualOperands& o) { return o.xq.shape()[0] * o.xq.shape()[1]; }

// The launch's operands and its scratch: the block's shared memory (`smem` bytes of it) when one head's scratch
// fits there and the options allow it, else global memory allocated here (freed when the caller returns: the
// stream orders reuse). With shared scratch the forward keeps Z, G, zb and S there and copies them out last.
template <class T>
dual::Args<T> args(const DualOperands& o, bool forward, Tensor& scratch, Tensor& dscratch, size_t& smem) {
  const int64_t G = head_count(o), b = o.xq.shape()[2], f = o.xq.shape()[3];
  if (G > int64_t(0x7fffffff))
    throw std::invalid_argument("ttt_linear_dual (CUDA): " + std::to_string(G) + " heads exceed the grid");
  const bool saved_in_scratch = forward || !o.saved.defined();
  smem = size_t(dual::block_bytes(b, f, !saved_in_scratch, sizeof(T)));
  const bool shared = g_dual_options.shared_scratch && smem <= size_t(max_shared_bytes());
  if (!shared) {
    smem = 0;
    scratch = Tensor::empty({G, dual::scratch_t(b, f, o.saved.defined())}, o.xq.dtype(), Device::CUDA);
    dscratch = Tensor::empty({G, dual::scratch_d(b, f)}, DType::F64, Device::CUDA);
  }
  dual::Args<T> a{};
  a.W = o.W.data<T>();
  a.bias = o.bias.data<T>();
  a.q = o.xq.data<T>();
  a.k = o.xk.data<T>();
  a.v = o.xv.data<T>();
  a.eta = o.eta.data<T>();
  a.lW = dual::layout_of(o.W), a.lbias = dual::layout_of(o.bias), a.lq = dual::layout_of(o.xq);
  a.lk = dual::layout_of(o.xk), a.lv = dual::layout_of(o.xv), a.leta = dual::layout_of(o.eta);
  a.gamma = o.gamma.data<T>();
  a.beta = o.beta.data<T>();
  a.saved = o.saved.defined() ? o.saved.data<T>() : nullptr;
  a.scratch = shared ? nullptr : scratch.data<T>();
  a.dscr = shared ? nullptr : dscratch.data<double>();
  a.block_scratch = shared;
  if (shared && forward) {
    a.saved_out = a.saved;
    a.saved = nullptr;
  }
  a.phases = forward ? g_dual_options.forward_phases : g_dual_options.backward_phases;
  a.rows = row_geom(o.rows.sizes, o.rows.strides, "ttt_linear_dual");
  a.b = b;
  a.f = f;
  a.P = o.gamma.numel();
  a.eps = o.eps;
  return a;
}

}  // namespace

int dual_unroll(const char* op) {
  const int u = g_dual_options.unroll;
  if (u == kDualTiles || u == 1 || u == 2 || u == 4 || u == kDualMma) return u;
  const char* env = std::getenv("PONDER_CUDA_DUAL_UNROLL");
  throw std::invalid_argument(std::string(op) + " (CUDA): unroll " + std::to_string(u) +
                              (env ? " (PONDER_CUDA_DUAL_UNROLL=" + std::string(env) + ")" : std::string()) +
                              " must be 1, 2, 4, tiles (" + std::to_string(kDualTiles) + ") or mma (" +
                              std::to_string(kDualMma) + ")");
}

void ttt_linear_dual(const Tensor& y, const DualOperands& o) {
  const int64_t G = head_count(o);  // checked against the grid in args() before it is narrowed
  if (G == 0) return;
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_dual", [&] {
    Tensor scratch, dscratch;
    size_t smem = 0;
    dual::Args<scalar_t> a = args<scalar_t>(o, true, scratch, dscratch, smem);
    a.y = y.data<scalar_t>();
    const auto kernel = pick(dual_unroll("ttt_linear_dual"), DUAL_KERNELS(dual_forward_kernel));
    allow_shared(kernel, smem);
    kernel<<<unsigned(G), kDualThreads, smem, stream()>>>(a);
    cuda_check_at(cudaGetLastError(), "dual_forward_kernel", __FILE__, __LINE__);
    debug_sync("dual_forward_kernel", __FILE__, __LINE__);
  });
}

void ttt_linear_dual_backward(const std::array<Tensor, 8>& g, const DualOperands& o, const std::array<Tensor, 3>& dy) {
  const int64_t G = head_count(o), P = o.gamma.numel();
  if (G == 0) return;
  const Tensor parts = Tensor::zeros({G, 2, P}, DType::F64, Device::CUDA);
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_dual_backward", [&] {
    Tensor scratch, dscratch;
    size_t smem = 0;
    dual::Args<scalar_t> a = args<scalar_t>(o, false, scratch, dscratch, smem);
    a.dout = dy[0].data<scalar_t>(), a.dW2u = dy[1].data<scalar_t>(), a.db2u = dy[2].data<scalar_t>();
    a.ldout = dual::layout_of(dy[0]), a.ldW2u = dual::layout_of(dy[1]), a.ldb2u = dual::layout_of(dy[2]);
    a.dW = g[0].data<scalar_t>();
    a.db = g[1].data<scalar_t>();
    a.dq = g[2].data<scalar_t>();
    a.dk = g[3].data<scalar_t>();
    a.dv = g[4].data<scalar_t>();
    a.deta = g[5].data<scalar_t>();
    a.parts = parts.data<double>();
    const auto kernel = pick(dual_unroll("ttt_linear_dual_backward"), DUAL_KERNELS(dual_backward_kernel));
    allow_shared(kernel, smem);
    kernel<<<unsigned(G), kDualThreads, smem, stream()>>>(a);
    cuda_check_at(cudaGetLastError(), "dual_backward_kernel", __FILE__, __LINE__);
    debug_sync("dual_backward_kernel", __FILE__, __LINE__);
  });
  sum_head_gamma_parts(parts, g[6], g[7]);
}

namespace {
// The scan's steps between units and its buffers, for units lo … hi of n.
template <class T>
dual::Scan<T> scan_of(const ScanOperands& so, const Tensor& Y, const Tensor& S) {
  dual::Scan<T> s;
  s.units = so.units, s.lo = 0, s.hi = so.units - 1, s.G = head_count(so.first);
  s.sq = so.step_q, s.sk = so.step_k, s.sv = so.step_v, s.seta = so.step_eta;
  s.Y = Y.data<T>(), s.S = S.data<T>();
  return s;
}
}  // namespace

int64_t gamma_head_chunks(int64_t G) { return dual::head_chunks(G, kHeadChunk); }

int64_t scan_backward_units_per_launch(int64_t G, int64_t P, int64_t n) {
  const int64_t per = std::max<int64_t>(1, G * 2 * P * int64_t(sizeof(double)));
  return std::min(n, std::max<int64_t>(1, (int64_t(64) << 20) / per));
}

void sum_unit_gamma_parts(const Tensor& parts, const Tensor& sums, int64_t units, int64_t lo, int64_t hi,
                          const Tensor& dgamma, const Tensor& dbeta) {
  const int64_t G = parts.shape()[1], P = parts.shape()[3], Q = dual::head_chunks(G, kHeadChunk),
                count = hi - lo + 1;
  launch("gamma_unit_chunk_kernel", gamma_unit_chunk_kernel, count * Q * P, parts.data<double>(), count, G, P,
         sums.data<double>());
  PONDER_DISPATCH_FLOAT(dgamma.dtype(), "sum_unit_gamma_parts", [&] {
    dual::Scan<scalar_t> s;  // the span of units add_gamma_units reads
    s.units = units, s.lo = lo, s.hi = hi, s.G = G;
    launch("gamma_unit_sum_kernel", gamma_unit_sum_kernel<scalar_t>, P, sums.data<double>(), Q, P, s,
           dgamma.data<scalar_t>(), dbeta.data<scalar_t>());
  });
}

void ttt_linear_scan(const Tensor& Y, const Tensor& S, const ScanOperands& so) {
  DualOperands o = so.first;
  o.saved = S;  // unit 0's part first: the launch's scratch is laid out as for a call with saved intermediates
  const int64_t G = head_count(o);
  if (G == 0) return;
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_scan", [&] {
    Tensor scratch, dscratch;
    size_t smem = 0;
    const dual::Args<scalar_t> a = args<scalar_t>(o, true, scratch, dscratch, smem);
    const auto kernel = pick(dual_unroll("ttt_linear_scan"), DUAL_KERNELS(scan_forward_kernel));
    allow_shared(kernel, smem);
    kernel<<<unsigned(G), kDualThreads, smem, stream()>>>(a, scan_of<scalar_t>(so, Y, S));
    cuda_check_at(cudaGetLastError(), "scan_forward_kernel", __FILE__, __LINE__);
    debug_sync("scan_forward_kernel", __FILE__, __LINE__);
  });
}

namespace {
// One launch of the scan's backward over units s.hi down to s.lo, then their dγ, dβ (parts zeroed first).
template <class T, class K>
void scan_backward_launch(K kernel, const dual::Args<T>& a, const dual::Scan<T>& s, size_t smem, const Tensor& parts,
                          const Tensor& sums, const std::array<Tensor, 8>& g) {
  fill(parts, 0.0);
  kernel<<<unsigned(s.G), kDualThreads, smem, stream()>>>(a, s);
  cuda_check_at(cudaGetLastError(), "scan_backward_kernel", __FILE__, __LINE__);
  debug_sync("scan_backward_kernel", __FILE__, __LINE__);
  sum_unit_gamma_parts(parts, sums, s.units, s.lo, s.hi, g[6], g[7]);
}
}  // namespace

void ttt_linear_scan_backward(const std::array<Tensor, 8>& g, const ScanOperands& so, const Tensor& Y,
                              const Tensor& S, const std::array<Tensor, 3>& dy, int64_t step_dout) {
  DualOperands o = so.first;
  o.saved = S;
  const int64_t G = head_count(o), P = o.gamma.numel(), n = so.units, f = o.xq.shape()[3];
  if (G == 0) return;
  const int64_t per = scan_backward_units_per_launch(G, P, n);
  const Tensor parts = Tensor::empty({per, G, 2, P}, DType::F64, Device::CUDA),
               sums = Tensor::empty({per, gamma_head_chunks(G), 2, P}, DType::F64, Device::CUDA),
               carry_w = Tensor::empty({2, G, f, f}, o.xq.dtype(), Device::CUDA),
               carry_b = Tensor::empty({2, G, 1, f}, o.xq.dtype(), Device::CUDA);
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_scan_backward", [&] {
    Tensor scratch, dscratch;
    size_t smem = 0;
    dual::Args<scalar_t> a = args<scalar_t>(o, false, scratch, dscratch, smem);
    a.dout = dy[0].data<scalar_t>(), a.dW2u = dy[1].data<scalar_t>(), a.db2u = dy[2].data<scalar_t>();
    a.ldout = dual::layout_of(dy[0]), a.ldW2u = dual::layout_of(dy[1]), a.ldb2u = dual::layout_of(dy[2]);
    a.dW = g[0].data<scalar_t>(), a.db = g[1].data<scalar_t>(), a.dq = g[2].data<scalar_t>();
    a.dk = g[3].data<scalar_t>(), a.dv = g[4].data<scalar_t>(), a.deta = g[5].data<scalar_t>();
    a.parts = parts.data<double>();
    dual::Scan<scalar_t> s = scan_of<scalar_t>(so, Y, S);
    s.sdout = step_dout, s.cW = carry_w.data<scalar_t>(), s.cb = carry_b.data<scalar_t>();
    const auto kernel = pick(dual_unroll("ttt_linear_scan_backward"), DUAL_KERNELS(scan_backward_kernel));
    allow_shared(kernel, smem);
    for (int64_t hi = n - 1; hi >= 0; hi -= per) {
      s.hi = hi, s.lo = std::max<int64_t>(0, hi - per + 1);
      scan_backward_launch(kernel, a, s, smem, parts, sums, g);
    }
  });
}

void sum_head_gamma_parts(const Tensor& parts, const Tensor& dgamma, const Tensor& dbeta) {
  const int64_t G = parts.shape()[0], P = parts.shape()[2], Q = dual::head_chunks(G, kHeadChunk);
  const Tensor sums = Tensor::empty({Q, 2, P}, DType::F64, Device::CUDA);
  launch("gamma_chunk_kernel", gamma_chunk_kernel, Q * P, parts.data<double>(), G, P, sums.data<double>());
  PONDER_DISPATCH_FLOAT(dgamma.dtype(), "sum_head_gamma_parts", [&] {
    launch("gamma_sum_kernel", gamma_sum_kernel<scalar_t>, P, sums.data<double>(), Q, P, dgamma.data<scalar_t>(),
           dbeta.data<scalar_t>());
  });
}

}  // namespace ponder::cuda

namespace ponder {
void cuda_set_dual_options(const CudaDualOptions& o) { cuda::g_dual_options = o; }
CudaDualOptions cuda_dual_options() { return cuda::g_dual_options; }
}  // namespace ponder
