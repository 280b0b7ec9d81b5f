// Element-wise CUDA kernels: copy/convert, fill, unary and binary maps, where, triangular masks. One
// thread per output element over the collapsed strided space of plan.h. The op is a switch inside the
// kernel (uniform across a launch, so it costs no divergence) rather than a template parameter: one
// instance per dtype keeps the CUDA build short.
#include <stdexcept>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/maps.cuh"

namespace ponder::cuda {
namespace {

template <class T>
struct BinaryFn {
  BinaryOp op;
  __device__ T operator()(T x, T y) const {
    switch (op) {
      case BinaryOp::Add: return x + y;
      case BinaryOp::Sub: return x - y;
      case BinaryOp::Mul: return x * y;
      case BinaryOp::Div: return x / y;
      case BinaryOp::Maximum: return x > y ? x : y;
      case BinaryOp::Minimum: return x < y ? x : y;
      case BinaryOp::Eq: return T(x == y);
      case BinaryOp::Gt: return T(x > y);
      case BinaryOp::Ge: return T(x >= y);
      case BinaryOp::Lt: return T(x < y);
      case BinaryOp::Le: return T(x <= y);
      default: return x;  // unreachable: binary() rejects unknown ops on the host
    }
  }
};

template <class TO, class TI>
struct Convert {
  __device__ TO operator()(TI v) const { return TO(v); }
};

// y and x strided over g (x with stride 0 on broadcast axes).
template <class TO, class TI, class F>
__global__ void map1_kernel(TO* y, const TI* x, Geometry<2> g, F f) {
  PONDER_GRID_STRIDE(i, g.numel) {
    int64_t o[2];
    offsets(g, i, o);
    y[o[0]] = f(x[o[1]]);
  }
}

template <class T, class F>
__global__ void map2_kernel(T* y, const T* a, const T* b, Geometry<3> g, F f) {
  PONDER_GRID_STRIDE(i, g.numel) {
    int64_t o[3];
    offsets(g, i, o);
    y[o[0]] = f(a[o[1]], b[o[2]]);
  }
}

template <class T>
__global__ void where_kernel(T* y, const T* c, const T* a, const T* b, Geometry<4> g) {
  PONDER_GRID_STRIDE(i, g.numel) {
    int64_t o[4];
    offsets(g, i, o);
    y[o[0]] = c[o[1]] != T(0) ? a[o[2]] : b[o[3]];
  }
}

template <class T>
__global__ void fill_kernel(T* y, Geometry<1> g, T v) {
  PONDER_GRID_STRIDE(i, g.numel) {
    int64_t o[1];
    offsets(g, i, o);
    y[o[0]] = v;
  }
}

// y, x: contiguous (…, R, C); keeps x[…, i, j] where j − i ≤ k (lower) or j − i ≥ k (upper).
template <class T>
__global__ void tri_kernel(T* y, const T* x, int64_t n, int64_t R, int64_t C, int64_t k, bool upper) {
  PONDER_GRID_STRIDE(e, n) {
    const int64_t j = e % C, i = (e / C) % R;
    const bool keep = upper ? (j - i >= k) : (j - i <= k);
    y[e] = keep ? x[e] : T(0);
  }
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src) {
  const Geometry<2> g = plan_map(dst, src);
  PONDER_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using out_t = scalar_t;
    PONDER_DISPATCH_ALL(src.dtype(), "copy", [&] {
      launch("copy", map1_kernel<out_t, scalar_t, Convert<out_t, scalar_t>>, g.numel, dst.data<out_t>(),
             src.data<scalar_t>(), g, Convert<out_t, scalar_t>{});
    });
  });
}

void fill(const Tensor& dst, double value) {
  const Geometry<1> g = plan_map(dst);
  PONDER_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    launch("fill", fill_kernel<scalar_t>, g.numel, dst.data<scalar_t>(), g, scalar_t(value));
  });
}

void unary(UnaryOp op, double p0, double p1, const Tensor& out, const Tensor& x) {
  if (op >= UnaryOp::Count) throw std::invalid_argument("cuda::unary: unknown op");
  const Geometry<2> g = plan_map(out, x);
  PONDER_DISPATCH_FLOAT(out.dtype(), "unary", [&] {
    launch("unary", map1_kernel<scalar_t, scalar_t, UnaryFn<scalar_t>>, g.numel, out.data<scalar_t>(),
           x.data<scalar_t>(), g, UnaryFn<scalar_t>{op, scalar_t(p0), scalar_t(p1)});
  });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  if (op >= BinaryOp::Count) throw std::invalid_argument("cuda::binary: unknown op");
  const Geometry<3> g = plan_map(out, a, b);
  PONDER_DISPATCH_ALL(out.dtype(), "binary", [&] {
    launch("binary", map2_kernel<scalar_t, BinaryFn<scalar_t>>, g.numel, out.data<scalar_t>(), a.data<scalar_t>(),
           b.data<scalar_t>(), g, BinaryFn<scalar_t>{op});
  });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Geometry<4> g = plan_map(out, cond, a, b);
  PONDER_DISPATCH_ALL(out.dtype(), "where", [&] {
    launch("where", where_kernel<scalar_t>, g.numel, out.data<scalar_t>(), cond.data<scalar_t>(), a.data<scalar_t>(),
           b.data<scalar_t>(), g);
  });
}

void tri(const Tensor& out, const Tensor& x, int64_t k, bool upper) {
  const int64_t R = out.shape()[out.dim() - 2], C = out.shape().back();
  PONDER_DISPATCH_ALL(out.dtype(), "tri", [&] {
    launch("tri", tri_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), x.data<scalar_t>(), out.numel(), R, C, k,
           upper);
  });
}

}  // namespace ponder::cuda
