// Fused row kernels on CUDA: layer norm and RMS norm with per-element γ (and β), forward and backward (the maps:
// tensor/backend.h; their definitions: autograd/compose.cpp). One warp per row: its lanes take columns lane,
// lane + 32, … and add their partial sums in a butterfly of shuffles, in double, in an order fixed by D alone, so
// every lane holds the same total and a run repeats bit for bit. dγ, dβ sum over rows in two fixed-order stages:
// block k adds the rows of its chunk in row order into chunk k's partials (one thread per column), then the
// reduction kernel (reduce.cu) adds the chunks in its fixed tree. The layer norm is the RMS norm's formula with a
// mean (mu) and a β; one kernel serves both (LN = true / false).
#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/row_geom.h"
#include "tensor/kernels.h"

namespace ponder::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int64_t kMaxChunks = 1024, kMinChunkRows = 16;  // the dγ, dβ partials: at most 1,024 chunks of rows

// The rows of an operand: `rows` rows of D columns, row r's γ at gamma_offset(geo, r).
struct Rows {
  int64_t rows, D;
  RowGeom geo;
  double eps;
};

// Rows r owned by this thread's warp; every lane of a warp takes the same rows, as the shuffles need.
#define PONDER_WARP_ROWS(r, n)                                                                        \
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; r < (n);               \
       r += int64_t(gridDim.x) * blockDim.x / kWarp)
#define PONDER_LANE_COLUMNS(c, D) for (int64_t c = threadIdx.x % kWarp; c < (D); c += kWarp)

__device__ inline double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// Σ_c term(c) over a row of D, on every lane.
template <class F>
__device__ double row_sum(int64_t D, F term) {
  double a = 0;
  PONDER_LANE_COLUMNS(c, D) a += term(c);
  return warp_sum(a);
}

// x̂ = (x − mu)·s: the layer norm's mean and 1/sqrt(var + eps), or the RMS norm's mu = 0 and s = 1/sqrt(mean x² + eps).
template <bool LN, class T>
__device__ double2 stats_of(const T* p, int64_t D, double eps) {
  double mu = 0;
  if (LN) mu = row_sum(D, [&](int64_t c) { return double(p[c]); }) / double(D);
  const double ss = row_sum(D, [&](int64_t c) {
    const double d = double(p[c]) - mu;
    return d * d;
  });
  return make_double2(mu, 1.0 / sqrt(ss / double(D) + eps));
}

// out = γ⊙x̂ + β (layer norm) or w⊙x̂ (RMS norm, beta unused); x, out (rows, D).
template <class T, bool LN>
__global__ void norm_affine_kernel(T* out, const T* x, const T* gamma, const T* beta, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T* p = x + r * R.D;
    const double2 st = stats_of<LN>(p, R.D, R.eps);
    const int64_t o = gamma_offset(R.geo, r);
    PONDER_LANE_COLUMNS(c, R.D) {
      const double h = (double(p[c]) - st.x) * st.y, y = double(gamma[o + c]) * h;
      out[r * R.D + c] = T(LN ? y + double(beta[o + c]) : y);
    }
  }
}

// dx = s·(g⊙γ − mean(g⊙γ) − x̂·mean(g⊙γ⊙x̂)) (layer norm) or r·(g⊙w − y·mean(g⊙w⊙y)) (RMS norm: no first mean);
// each row's (mu, s) into stats (rows) for the parameter sums.
template <class T, bool LN>
__global__ void norm_affine_backward_kernel(T* dx, double2* stats, const T* x, const T* gamma, const T* g, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T *p = x + r * R.D, *q = g + r * R.D, *gm = gamma + gamma_offset(R.geo, r);
    const double2 st = stats_of<LN>(p, R.D, R.eps);
    auto hat = [&](int64_t c) { return (double(p[c]) - st.x) * st.y; };
    const double m1 = LN ? row_sum(R.D, [&](int64_t c) { return double(q[c]) * double(gm[c]); }) / double(R.D) : 0.0;
    const double m2 = row_sum(R.D, [&](int64_t c) { return double(q[c]) * double(gm[c]) * hat(c); }) / double(R.D);
    PONDER_LANE_COLUMNS(c, R.D) dx[r * R.D + c] = T(st.y * (double(q[c]) * double(gm[c]) - m1 - hat(c) * m2));
    if (threadIdx.x % kWarp == 0) stats[r] = st;
  }
}

// part (chunks, S, P), zeroed: block k adds rows [k·n, (k+1)·n) (n = chunk_rows) in row order into chunk k's
// partials, one thread per column: slot 0 += g⊙x̂ (dγ, dw), slot 1 += g (dβ; S = 2, layer norm). A run of rows with
// one γ offset is summed in registers; a thread alone writes its column's partials, so there is no race.
template <class T, int S>
__global__ void norm_param_parts_kernel(double* part, const T* x, const T* g, const double2* stats, Rows R, int64_t P,
                                        int64_t chunk_rows) {
  const int64_t r0 = int64_t(blockIdx.x) * chunk_rows, r1 = r0 + chunk_rows < R.rows ? r0 + chunk_rows : R.rows;
  double* pk = part + int64_t(blockIdx.x) * S * P;
  for (int64_t c = threadIdx.x; c < R.D; c += blockDim.x) {
    double a0 = 0, a1 = 0;
    int64_t at = gamma_offset(R.geo, r0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = gamma_offset(R.geo, r);
      if (o != at) {
        pk[at + c] += a0;
        if (S == 2) pk[P + at + c] += a1;
        a0 = a1 = 0;
        at = o;
      }
      const double gi = double(g[r * R.D + c]);
      a0 += gi * ((double(x[r * R.D + c]) - stats[r].x) * stats[r].y);
      a1 += gi;
    }
    pk[at + c] += a0;
    if (S == 2) pk[P + at + c] += a1;
  }
}

Rows rows_of(const Tensor& x, const RowOffsets& ro, double eps, const char* op) {
  const int64_t D = x.shape().back();
  return {D ? x.numel() / D : 0, D, row_geom(ro.sizes, ro.strides, op), eps};
}

template <class K, class... Args>
void launch_rows(const char* name, K kernel, const Rows& R, Args... args) {
  launch(name, kernel, R.rows * kWarp, args..., R);
}

// dγ (and dβ) of the rows: the chunks' partials, then their fixed-order sum; outs[s] gets slot s.
template <class T, int S>
void param_sums(const std::array<const Tensor*, S>& outs, const Tensor& x, const Tensor& g, const Tensor& stats,
                const Rows& R) {
  const int64_t P = outs[0]->numel();
  const int64_t n = std::max(kMinChunkRows, (R.rows + kMaxChunks - 1) / kMaxChunks), chunks = (R.rows + n - 1) / n;
  const Tensor part = Tensor::zeros({chunks, S, P}, DType::F64, Device::CUDA);
  norm_param_parts_kernel<T, S><<<unsigned(chunks), kThreads, 0, stream()>>>(
      part.data<double>(), x.data<T>(), g.data<T>(), reinterpret_cast<const double2*>(stats.data<double>()), R, P, n);
  cuda_check_at(cudaGetLastError(), "norm_param_parts_kernel", __FILE__, __LINE__);
  debug_sync("norm_param_parts_kernel", __FILE__, __LINE__);
  const Tensor sums = Tensor::empty({1, S, P}, DType::F64, Device::CUDA);
  reduce(ReduceOp::Sum, sums, part);
  for (int s = 0; s < S; ++s) copy(*outs[size_t(s)], raw::reshape(raw::slice(sums, 1, s, s + 1), outs[size_t(s)]->shape()));
}

template <bool LN>
void norm_affine(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta, const RowOffsets& ro,
                 double eps, const char* op) {
  const Rows R = rows_of(x, ro, eps, op);
  if (R.rows == 0) return;
  PONDER_DISPATCH_FLOAT(x.dtype(), op, [&] {
    launch_rows("norm_affine_kernel", norm_affine_kernel<scalar_t, LN>, R, out.data<scalar_t>(), x.data<scalar_t>(),
                gamma.data<scalar_t>(), beta.data<scalar_t>());
  });
}

template <bool LN>
void norm_affine_backward(const Tensor& dx, const Tensor& dgamma, const Tensor* dbeta, const Tensor& x,
                          const Tensor& gamma, const Tensor& g, const RowOffsets& ro, double eps, const char* op) {
  const Rows R = rows_of(x, ro, eps, op);
  if (R.rows == 0) {  // no rows: the sums over rows are zero
    fill(dgamma, 0);
    if (dbeta) fill(*dbeta, 0);
    return;
  }
  const Tensor stats = Tensor::empty({R.rows, 2}, DType::F64, Device::CUDA);
  PONDER_DISPATCH_FLOAT(x.dtype(), op, [&] {
    launch_rows("norm_affine_backward_kernel", norm_affine_backward_kernel<scalar_t, LN>, R, dx.data<scalar_t>(),
                reinterpret_cast<double2*>(stats.data<double>()), x.data<scalar_t>(), gamma.data<scalar_t>(),
                g.data<scalar_t>());
    if constexpr (LN)
      param_sums<scalar_t, 2>({&dgamma, dbeta}, x, g, stats, R);
    else
      param_sums<scalar_t, 1>({&dgamma}, x, g, stats, R);
  });
}

}  // namespace

void layer_norm_affine(const Tensor& out, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                       const RowOffsets& ro, double eps) {
  norm_affine<true>(out, x, gamma, beta, ro, eps, "layer_norm_affine");
}
void layer_norm_affine_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& x,
                                const Tensor& gamma, const Tensor& g, const RowOffsets& ro, double eps) {
  norm_affine_backward<true>(dx, dgamma, &dbeta, x, gamma, g, ro, eps, "layer_norm_affine_backward");
}
void rms_norm_affine(const Tensor& out, const Tensor& x, const Tensor& w, const RowOffsets& ro, double eps) {
  norm_affine<false>(out, x, w, w, ro, eps, "rms_norm_affine");
}
void rms_norm_affine_backward(const Tensor& dx, const Tensor& dw, const Tensor& x, const Tensor& w, const Tensor& g,
                              const RowOffsets& ro, double eps) {
  norm_affine_backward<false>(dx, dw, nullptr, x, w, g, ro, eps, "rms_norm_affine_backward");
}

}  // namespace ponder::cuda
