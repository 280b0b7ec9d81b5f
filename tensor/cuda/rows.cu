// Fused row kernels on CUDA: layer norm and RMS norm with per-element γ (and β) or without parameters, forward and
// backward, the layer norm's double backward (layer_norm_vjp), and the TTT
// inner loss's gradient through its layer norm (ln_l2_grad) with its VJP (the maps: tensor/kernels.def; their
// definitions: autograd/compose.cpp). One warp per row: its lanes take columns lane,
// lane + 32, … and add their partial sums in a butterfly of shuffles, in double, in an order fixed by D alone, so
// every lane holds the same total and a run repeats bit for bit. dγ, dβ sum over rows in two fixed-order stages:
// block k adds the rows of its chunk in row order into chunk k's partials (one thread per column), then the
// reduction kernel (reduce.cu) adds the chunks in its fixed tree. The layer norm is the RMS norm's formula with a
// mean (mu) and a β; one kernel serves both (LN = true / false). Backward kernels keep each row's statistics
// (RowStats), from which the parameter sums recompute their per-element terms.
#include <array>
#include <initializer_list>

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

// out = γ⊙x̂ + β (layer norm) or w⊙x̂ (RMS norm, beta unused); x, out (rows, D). A null gamma (then beta too):
// the norms without parameters, out = x̂ (layer_norm_rows, rms_norm_rows).
template <class T, bool LN>
__global__ void norm_affine_kernel(T* out, const T* x, const T* gamma, const T* beta, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T* p = x + r * R.D;
    const double2 st = stats_of<LN>(p, R.D, R.eps);
    const int64_t o = gamma ? gamma_offset(R.geo, r) : 0;
    PONDER_LANE_COLUMNS(c, R.D) {
      const double h = (double(p[c]) - st.x) * st.y;
      if (!gamma) {
        out[r * R.D + c] = T(h);
        continue;
      }
      const double y = double(gamma[o + c]) * h;
      out[r * R.D + c] = T(LN ? y + double(beta[o + c]) : y);
    }
  }
}

// A row's statistics for the parameter sums: x̂ = (x − mu)·s, and the VJP's means a = mean w, b = mean(w⊙x̂).
struct RowStats {
  double mu, s, a, b;
};

// dx = s·(g⊙γ − mean(g⊙γ) − x̂·mean(g⊙γ⊙x̂)) (layer norm) or r·(g⊙w − y·mean(g⊙w⊙y)) (RMS norm: no first mean);
// each row's statistics into stats (rows) for the parameter sums. A null gamma: γ = 1 and no statistics (stats
// null), the backward of the norms without parameters (layer_norm_backward, rms_norm_backward).
template <class T, bool LN>
__global__ void norm_affine_backward_kernel(T* dx, RowStats* stats, const T* x, const T* gamma, const T* g, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T *p = x + r * R.D, *q = g + r * R.D, *gm = gamma ? gamma + gamma_offset(R.geo, r) : nullptr;
    const double2 st = stats_of<LN>(p, R.D, R.eps);
    auto hat = [&](int64_t c) { return (double(p[c]) - st.x) * st.y; };
    auto qg = [&](int64_t c) { return gm ? double(q[c]) * double(gm[c]) : double(q[c]); };
    const double m1 = LN ? row_sum(R.D, qg) / double(R.D) : 0.0;
    const double m2 = row_sum(R.D, [&](int64_t c) { return qg(c) * hat(c); }) / double(R.D);
    PONDER_LANE_COLUMNS(c, R.D) dx[r * R.D + c] = T(st.y * (qg(c) - m1 - hat(c) * m2));
    if (stats && threadIdx.x % kWarp == 0) stats[r] = {st.x, st.y, 0, 0};
  }
}

// The layer norm's double backward (tensor/cpu/norm.cpp's layer_norm_vjp): for z = layer_norm_backward(x, v) and
// its upstream dz, with m1, m2 the means of v and v⊙x̂, a, b those of dz and dz⊙x̂, c = mean(dz⊙z):
// dv = s·(dz − a − x̂·b); dx̂ = −s·(m2·dz + b·v); dx = s·(dx̂ − mean dx̂ − x̂·mean(dx̂⊙x̂)) − s·c·x̂.
template <class T>
__global__ void layer_norm_vjp_kernel(T* dx, T* dv, const T* x, const T* v, const T* dz, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T *p = x + r * R.D, *q = v + r * R.D, *g = dz + r * R.D;
    const double2 st = stats_of<true>(p, R.D, R.eps);
    const double s = st.y, D = double(R.D);
    auto hat = [&](int64_t c) { return (double(p[c]) - st.x) * s; };
    const double m1 = row_sum(R.D, [&](int64_t c) { return double(q[c]); }) / D;
    const double m2 = row_sum(R.D, [&](int64_t c) { return double(q[c]) * hat(c); }) / D;
    const double a = row_sum(R.D, [&](int64_t c) { return double(g[c]); }) / D;
    const double b = row_sum(R.D, [&](int64_t c) { return double(g[c]) * hat(c); }) / D;
    auto z = [&](int64_t c) { return s * (double(q[c]) - m1 - hat(c) * m2); };  // the backward's output
    const double cm = row_sum(R.D, [&](int64_t c) { return double(g[c]) * z(c); }) / D;
    auto dxh = [&](int64_t c) { return -s * (m2 * double(g[c]) + b * double(q[c])); };
    const double e = row_sum(R.D, dxh) / D, f = row_sum(R.D, [&](int64_t c) { return dxh(c) * hat(c); }) / D;
    PONDER_LANE_COLUMNS(c, R.D) {
      const double h = hat(c);
      dv[r * R.D + c] = T(s * (double(g[c]) - a - h * b));
      dx[r * R.D + c] = T(s * (dxh(c) - e - h * f) - s * cm * h);
    }
  }
}

// The inner loss's gradient (tensor/cpu/rows.h's ln_l2_grad): with r = γ⊙x̂ + β − t and y = r⊙γ,
// out = s·(y − mean y − x̂·mean(y⊙x̂)).
template <class T>
__global__ void ln_l2_grad_kernel(T* out, const T* z, const T* t, const T* gamma, const T* beta, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T *p = z + r * R.D, *q = t + r * R.D;
    const int64_t o = gamma_offset(R.geo, r);
    const double2 st = stats_of<true>(p, R.D, R.eps);
    auto hat = [&](int64_t c) { return (double(p[c]) - st.x) * st.y; };
    auto y = [&](int64_t c) {
      const double g = double(gamma[o + c]);
      return (g * hat(c) + double(beta[o + c]) - double(q[c])) * g;
    };
    const double m1 = row_sum(R.D, y) / double(R.D);
    const double m2 = row_sum(R.D, [&](int64_t c) { return y(c) * hat(c); }) / double(R.D);
    PONDER_LANE_COLUMNS(c, R.D) out[r * R.D + c] = T(st.y * (y(c) - m1 - hat(c) * m2));
  }
}

// Its VJP for upstream w (tensor/cpu/rows.h's ln_l2_grad_vjp, passes recomputing x̂, r and y from the inputs):
// m1, m2 as above, a = mean w, b = mean(w⊙x̂), c = mean(w⊙out); dgy = s·(w − a − x̂·b),
// dx̂ = −s·(m2·w + b·y) + dgy⊙γ²; e, f = means of dx̂ and dx̂⊙x̂; dz = s·(dx̂ − e − x̂·f) − s·c·x̂, dt = −dgy⊙γ.
// Each row's (mu, s, a, b) into stats for dγ += dgy⊙(r + γ⊙x̂), dβ += dgy⊙γ.
template <class T>
__global__ void ln_l2_grad_vjp_kernel(T* dz, T* dt, RowStats* stats, const T* z, const T* t, const T* gamma,
                                      const T* beta, const T* w, Rows R) {
  PONDER_WARP_ROWS(r, R.rows) {
    const T *p = z + r * R.D, *q = t + r * R.D, *wr = w + r * R.D, *gm = gamma + gamma_offset(R.geo, r);
    const T* bt = beta + gamma_offset(R.geo, r);
    const double2 st = stats_of<true>(p, R.D, R.eps);
    const double s = st.y, D = double(R.D);
    auto hat = [&](int64_t c) { return (double(p[c]) - st.x) * s; };
    auto y = [&](int64_t c) { return (double(gm[c]) * hat(c) + double(bt[c]) - double(q[c])) * double(gm[c]); };
    const double m1 = row_sum(R.D, y) / D, m2 = row_sum(R.D, [&](int64_t c) { return y(c) * hat(c); }) / D;
    const double a = row_sum(R.D, [&](int64_t c) { return double(wr[c]); }) / D;
    const double b = row_sum(R.D, [&](int64_t c) { return double(wr[c]) * hat(c); }) / D;
    const double cm = row_sum(R.D, [&](int64_t c) { return double(wr[c]) * (s * (y(c) - m1 - hat(c) * m2)); }) / D;
    auto dgy = [&](int64_t c) { return s * (double(wr[c]) - a - hat(c) * b); };
    auto dxh = [&](int64_t c) {
      const double g = double(gm[c]);
      return -s * (m2 * double(wr[c]) + b * y(c)) + dgy(c) * g * g;
    };
    const double e = row_sum(R.D, dxh) / D, f = row_sum(R.D, [&](int64_t c) { return dxh(c) * hat(c); }) / D;
    PONDER_LANE_COLUMNS(c, R.D) {
      const double h = hat(c);
      dz[r * R.D + c] = T(s * (dxh(c) - e - h * f) - s * cm * h);
      dt[r * R.D + c] = T(-(dgy(c) * double(gm[c])));
    }
    if (threadIdx.x % kWarp == 0) stats[r] = {st.x, s, a, b};
  }
}

// The per-element terms each parameter sum adds (slot 0, slot 1), from a row's statistics.
template <class T>
struct NormTerms {  // layer and RMS norm: g⊙x̂ (dγ, dw) and g (dβ)
  const T *x, *g;
  __device__ void operator()(int64_t e, int64_t, const RowStats& st, double& t0, double& t1) const {
    const double gi = double(g[e]);
    t0 = gi * ((double(x[e]) - st.mu) * st.s);
    t1 = gi;
  }
};
template <class T>
struct L2VjpTerms {  // the inner loss gradient's VJP: dgy⊙(r + γ⊙x̂) (dγ) and dgy⊙γ (dβ)
  const T *z, *t, *w, *gamma, *beta;
  __device__ void operator()(int64_t e, int64_t o, const RowStats& st, double& t0, double& t1) const {
    const double h = (double(z[e]) - st.mu) * st.s, g = double(gamma[o]);
    const double d = st.s * (double(w[e]) - st.a - h * st.b), rr = g * h + double(beta[o]) - double(t[e]);
    t0 = d * (rr + g * h);
    t1 = d * g;
  }
};

// part (chunks, S, P), zeroed: block k adds rows [k·n, (k+1)·n) (n = chunk_rows) in row order into chunk k's
// partials, one thread per column: slot s += the terms' t_s (S = 1 or 2). A run of rows with one γ offset is summed
// in registers; a thread alone writes its column's partials, so there is no race.
template <int S, class Terms>
__global__ void norm_param_parts_kernel(double* part, Terms terms, const RowStats* stats, Rows R, int64_t P,
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
      double t0, t1;
      terms(r * R.D + c, o + c, stats[r], t0, t1);
      a0 += t0;
      a1 += t1;
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

// Rows-by-4 doubles for the rows' statistics.
Tensor stats_for(const Rows& R) { return Tensor::empty({R.rows, 4}, DType::F64, Device::CUDA); }
RowStats* stats_ptr(const Tensor& t) { return reinterpret_cast<RowStats*>(t.data<double>()); }

// dγ (and dβ) of the rows: the chunks' partials of `terms`, then their fixed-order sum; outs[s] gets slot s.
template <int S, class Terms>
void param_sums(const std::array<const Tensor*, S>& outs, const Terms& terms, const Tensor& stats, const Rows& R) {
  const int64_t P = outs[0]->numel();
  const int64_t n = std::max(kMinChunkRows, (R.rows + kMaxChunks - 1) / kMaxChunks), chunks = (R.rows + n - 1) / n;
  const Tensor part = Tensor::zeros({chunks, S, P}, DType::F64, Device::CUDA);
  norm_param_parts_kernel<S, Terms>
      <<<unsigned(chunks), kThreads, 0, stream()>>>(part.data<double>(), terms, stats_ptr(stats), R, P, n);
  cuda_check_at(cudaGetLastError(), "norm_param_parts_kernel", __FILE__, __LINE__);
  debug_sync("norm_param_parts_kernel", __FILE__, __LINE__);
  const Tensor sums = Tensor::empty({1, S, P}, DType::F64, Device::CUDA);
  reduce(ReduceOp::Sum, sums, part);
  for (int s = 0; s < S; ++s)
    copy(*outs[size_t(s)], raw::reshape(raw::slice(sums, 1, s, s + 1), outs[size_t(s)]->shape()));
}

// No rows: outputs shaped like the rows are empty and the sums over rows are zero.
bool no_rows(const Rows& R, std::initializer_list<const Tensor*> sums) {
  if (R.rows != 0) return false;
  for (const Tensor* t : sums)
    if (t) fill(*t, 0);
  return true;
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
  if (no_rows(R, {&dgamma, dbeta})) return;
  const Tensor stats = stats_for(R);
  PONDER_DISPATCH_FLOAT(x.dtype(), op, [&] {
    launch_rows("norm_affine_backward_kernel", norm_affine_backward_kernel<scalar_t, LN>, R, dx.data<scalar_t>(),
                stats_ptr(stats), x.data<scalar_t>(), gamma.data<scalar_t>(), g.data<scalar_t>());
    const NormTerms<scalar_t> terms{x.data<scalar_t>(), g.data<scalar_t>()};
    if constexpr (LN)
      param_sums<2>({&dgamma, dbeta}, terms, stats, R);
    else
      param_sums<1>({&dgamma}, terms, stats, R);
  });
}

// The norms without parameters: the kernels above with a null γ.
template <bool LN>
void norm_plain(const Tensor& out, const Tensor& x, double eps, const char* op) {
  const Rows R = rows_of(x, RowOffsets{}, eps, op);
  if (R.rows == 0) return;
  PONDER_DISPATCH_FLOAT(x.dtype(), op, [&] {
    launch_rows("norm_affine_kernel", norm_affine_kernel<scalar_t, LN>, R, out.data<scalar_t>(), x.data<scalar_t>(),
                static_cast<const scalar_t*>(nullptr), static_cast<const scalar_t*>(nullptr));
  });
}
template <bool LN>
void norm_plain_backward(const Tensor& dx, const Tensor& x, const Tensor& g, double eps, const char* op) {
  const Rows R = rows_of(x, RowOffsets{}, eps, op);
  if (R.rows == 0) return;
  PONDER_DISPATCH_FLOAT(x.dtype(), op, [&] {
    launch_rows("norm_affine_backward_kernel", norm_affine_backward_kernel<scalar_t, LN>, R, dx.data<scalar_t>(),
                static_cast<RowStats*>(nullptr), x.data<scalar_t>(), static_cast<const scalar_t*>(nullptr),
                g.data<scalar_t>());
  });
}

}  // namespace

void layer_norm_rows(const Tensor& out, const Tensor& x, double eps) {
  norm_plain<true>(out, x, eps, "layer_norm_rows");
}
void layer_norm_backward(const Tensor& dx, const Tensor& x, const Tensor& v, double eps) {
  norm_plain_backward<true>(dx, x, v, eps, "layer_norm_backward");
}
void rms_norm_rows(const Tensor& out, const Tensor& x, double eps) { norm_plain<false>(out, x, eps, "rms_norm_rows"); }
void rms_norm_backward(const Tensor& dx, const Tensor& x, const Tensor& g, double eps) {
  norm_plain_backward<false>(dx, x, g, eps, "rms_norm_backward");
}
void layer_norm_vjp(const Tensor& dx, const Tensor& dv, const Tensor& x, const Tensor& v, const Tensor& dz,
                    double eps) {
  const Rows R = rows_of(x, RowOffsets{}, eps, "layer_norm_vjp");
  if (R.rows == 0) return;
  PONDER_DISPATCH_FLOAT(x.dtype(), "layer_norm_vjp", [&] {
    launch_rows("layer_norm_vjp_kernel", layer_norm_vjp_kernel<scalar_t>, R, dx.data<scalar_t>(), dv.data<scalar_t>(),
                x.data<scalar_t>(), v.data<scalar_t>(), dz.data<scalar_t>());
  });
}

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

void ln_l2_grad(const Tensor& out, const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                const RowOffsets& ro, double eps) {
  const Rows R = rows_of(z, ro, eps, "ln_l2_grad");
  if (R.rows == 0) return;
  PONDER_DISPATCH_FLOAT(z.dtype(), "ln_l2_grad", [&] {
    launch_rows("ln_l2_grad_kernel", ln_l2_grad_kernel<scalar_t>, R, out.data<scalar_t>(), z.data<scalar_t>(),
                t.data<scalar_t>(), gamma.data<scalar_t>(), beta.data<scalar_t>());
  });
}
void ln_l2_grad_vjp(const Tensor& dz, const Tensor& dt, const Tensor& dgamma, const Tensor& dbeta, const Tensor& z,
                    const Tensor& t, const Tensor& gamma, const Tensor& beta, const Tensor& w, const RowOffsets& ro,
                    double eps) {
  const Rows R = rows_of(z, ro, eps, "ln_l2_grad_vjp");
  if (no_rows(R, {&dgamma, &dbeta})) return;
  const Tensor stats = stats_for(R);
  PONDER_DISPATCH_FLOAT(z.dtype(), "ln_l2_grad_vjp", [&] {
    launch_rows("ln_l2_grad_vjp_kernel", ln_l2_grad_vjp_kernel<scalar_t>, R, dz.data<scalar_t>(), dt.data<scalar_t>(),
                stats_ptr(stats), z.data<scalar_t>(), t.data<scalar_t>(), gamma.data<scalar_t>(),
                beta.data<scalar_t>(), w.data<scalar_t>());
    const L2VjpTerms<scalar_t> terms{z.data<scalar_t>(), t.data<scalar_t>(), w.data<scalar_t>(),
                                     gamma.data<scalar_t>(), beta.data<scalar_t>()};
    param_sums<2>({&dgamma, &dbeta}, terms, stats, R);
  });
}

}  // namespace ponder::cuda
