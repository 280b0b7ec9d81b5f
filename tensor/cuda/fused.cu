// Fused element-wise CUDA kernels: the gated products act(a)⊙b with their backward, the AdamW step and RoPE's
// rotation. One thread per element (per pair for RoPE) of contiguous operands; each computes what its composition (autograd/compose.cpp) computes, in the
// same order and the same dtype (the activation is maps.cuh's, the unary kernel's formula), in one pass over
// memory instead of one launch per operation.
#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/maps.cuh"

namespace ponder::cuda {
namespace {

UnaryOp act_op(GateAct act) { return act == GateAct::Silu ? UnaryOp::Silu : UnaryOp::GeluTanh; }
UnaryOp act_grad_op(GateAct act) { return act == GateAct::Silu ? UnaryOp::SiluGrad : UnaryOp::GeluTanhGrad; }

// out[i] = act(a[i])·b[i]   (all of n elements)
template <class T>
__global__ void act_mul_kernel(T* out, const T* a, const T* b, int64_t n, UnaryFn<T> act) {
  PONDER_GRID_STRIDE(i, n) out[i] = act(a[i]) * b[i];
}

// da[i] = (g[i]·b[i])·act'(a[i]);  db[i] = g[i]·act(a[i])
template <class T>
__global__ void act_mul_backward_kernel(T* da, T* db, const T* a, const T* b, const T* g, int64_t n, UnaryFn<T> act,
                                        UnaryFn<T> grad) {
  PONDER_GRID_STRIDE(i, n) {
    const T x = a[i], gi = g[i];
    da[i] = (gi * b[i]) * grad(x);
    db[i] = gi * act(x);
  }
}

// AdamWCoeffs' factors rounded to the tensors' dtype, as the composition's scalar operands are.
template <class T>
struct AdamW {
  T b1, nb1, b2, nb2, ibc2, eps, step, decay;
};
template <class T>
AdamW<T> adamw_of(const AdamWCoeffs& c) {
  return {T(c.beta1), T(1 - c.beta1), T(c.beta2),     T(1 - c.beta2),
          T(1 / c.bc2), T(c.eps),     T(c.lr / c.bc1), T(1 - c.lr * c.weight_decay)};
}

// p, m, v updated in place from g (n elements); the operations of raw::adamw_step_'s composition in its order,
// where scale(x, a, b) is a·x + b (b = 0 here, so a fused multiply-add of it rounds as the product alone).
template <class T>
__global__ void adamw_kernel(T* p, T* m, T* v, const T* g, int64_t n, AdamW<T> c) {
  PONDER_GRID_STRIDE(i, n) {
    const T gi = g[i], zero = T(0), one = T(1);
    const T mi = (c.b1 * m[i] + zero) + (c.nb1 * gi + zero);
    const T vi = (c.b2 * v[i] + zero) + (c.nb2 * (gi * gi) + zero);
    const T denom = one * m_sqrt(c.ibc2 * vi + zero) + c.eps;
    p[i] = (c.decay * p[i] + zero) - (c.step * mi + zero) / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

// RoPE: pair p = (row r, i) of x (rows × f, f = 2h; row r at position r mod N) rotated by cs, sn (N, h): out =
// (a·c − b·s, a·s + b·c), each product rounded as the composition's scale rounds it (the CPU kernel's operations;
// the backward is the same kernel with the sine negated).
template <class T>
__global__ void rope_kernel(T* out, const T* x, const T* cs, const T* sn, int64_t pairs, int64_t h, int64_t N) {
  PONDER_GRID_STRIDE(p, pairs) {
    const int64_t i = p % h, t = (p / h) % N;
    const T a = x[2 * p], b = x[2 * p + 1], c = cs[t * h + i], s = sn[t * h + i], zero = T(0);
    const T ac = a * c + zero, bs = b * s + zero, as = a * s + zero, bc = b * c + zero;
    out[2 * p] = ac - bs;
    out[2 * p + 1] = as + bc;
  }
}

}  // namespace

void rope(const Tensor& out, const Tensor& x, const Tensor& cs, const Tensor& sn) {
  const int64_t f = x.shape().back(), h = f / 2, N = x.shape()[x.dim() - 2], pairs = x.numel() / 2;
  PONDER_DISPATCH_FLOAT(x.dtype(), "rope", [&] {
    launch("rope_kernel", rope_kernel<scalar_t>, pairs, out.data<scalar_t>(), x.data<scalar_t>(),
           cs.data<scalar_t>(), sn.data<scalar_t>(), pairs, h, N);
  });
}

void act_mul(GateAct act, const Tensor& out, const Tensor& a, const Tensor& b) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "act_mul", [&] {
    launch("act_mul_kernel", act_mul_kernel<scalar_t>, out.numel(), out.data<scalar_t>(), a.data<scalar_t>(),
           b.data<scalar_t>(), out.numel(), UnaryFn<scalar_t>{act_op(act), 0, 0});
  });
}

void act_mul_backward(GateAct act, const Tensor& da, const Tensor& db, const Tensor& a, const Tensor& b,
                      const Tensor& g) {
  PONDER_DISPATCH_FLOAT(a.dtype(), "act_mul_backward", [&] {
    launch("act_mul_backward_kernel", act_mul_backward_kernel<scalar_t>, a.numel(), da.data<scalar_t>(),
           db.data<scalar_t>(), a.data<scalar_t>(), b.data<scalar_t>(), g.data<scalar_t>(), a.numel(),
           UnaryFn<scalar_t>{act_op(act), 0, 0}, UnaryFn<scalar_t>{act_grad_op(act), 0, 0});
  });
}

void adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  PONDER_DISPATCH_FLOAT(p.dtype(), "adamw_step", [&] {
    launch("adamw_kernel", adamw_kernel<scalar_t>, p.numel(), p.data<scalar_t>(), m.data<scalar_t>(),
           v.data<scalar_t>(), g.data<scalar_t>(), p.numel(), adamw_of<scalar_t>(c));
  });
}

}  // namespace ponder::cuda
