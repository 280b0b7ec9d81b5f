// TTT-Linear's dual form on one mini-batch (tensor/backend.h, DualOperands), forward and backward, one head per
// task: every product of a head is a small GEMM on buffers that stay in cache, and the row steps (the inner
// gradient through LN + L2, the output layer norm and their VJPs) are the row functions the fused row kernels use
// (tensor/cpu/rows.h). The operands arrive as head views (raw::dual_head_view): a mini-batch's slice of the
// projections, the previous unit's W' and bias' inside its packed output and η's slice are read where they lie, with
// no copy; only xq, xk and xv may have rows further apart than f. Its definition is the composition in autograd/compose.cpp, which tests/test_ops.cpp and the
// op table compare it with. Heads run in parallel; dγ and dβ are summed per head and then over heads in order, so
// results do not depend on the thread count.
#include <algorithm>
#include <vector>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/head_sums.h"
#include "tensor/cpu/rows.h"

namespace ponder::cpu {
namespace {

// One head's operands (pointers into DualOperands) and sizes.
template <class T>
struct Head {
  const T *W, *bias, *q, *k, *v, *eta;
  const T *gamma, *beta;
  const int64_t* goff;     // this head's b row offsets into γ, β
  int64_t b, f;
  int64_t lq, lk, lv;      // row strides of q, k, v (f where the rows are packed)
  double eps;
};

// Head g of an (n0, n1, r, c) head view: g = g0·n1 + g1.
template <class T>
const T* head_at(const Tensor& v, int64_t g) {
  const int64_t n1 = v.shape()[1];
  return v.data<T>() + (g / n1) * v.strides()[0] + (g % n1) * v.strides()[1];
}

template <class T>
Head<T> head(const DualOperands& o, int64_t g) {
  const int64_t b = o.xq.shape()[2], f = o.xq.shape()[3];
  return {head_at<T>(o.W, g),  head_at<T>(o.bias, g), head_at<T>(o.xq, g), head_at<T>(o.xk, g),
          head_at<T>(o.xv, g), head_at<T>(o.eta, g),  o.gamma.data<T>(),   o.beta.data<T>(),
          o.rows.goff.data() + g * b, b, f, o.xq.strides()[2], o.xk.strides()[2], o.xv.strides()[2], o.eps};
}

// (n0, n1, b, f) head views: G = n0·n1 heads of b rows of f.
inline int64_t head_total(const Tensor& v) { return v.shape()[0] * v.shape()[1]; }

// The forward's intermediates of one head: t = v − k, E = tril(η), M = E⊙S + E (b, b) in own buffers; Z, G, zb
// (b, f) and S = q·kᵀ (b, b) either in own buffers or in the forward's saved tensor (DualOperands::saved), so the
// backward can read them instead of recomputing four GEMMs and the row steps.
template <class T>
struct Parts {
  std::vector<T> t, e, m, own;
  T *z = nullptr, *g = nullptr, *zb = nullptr, *s = nullptr;
  std::vector<double> scratch;
  int64_t b = 0, f = 0;
  void size(int64_t b_, int64_t f_) {
    b = b_;
    f = f_;
    t.resize(size_t(b * f));
    for (auto* x : {&e, &m}) x->resize(size_t(b * b));
    own.resize(size_t(kDualSaved(b, f)));
    scratch.resize(size_t(rows::kLnL2GradVjpScratch * f));
  }
  void bind(T* base) {  // base: kDualSaved(b, f) elements, or null for the own buffer
    if (!base) base = own.data();
    z = base;
    g = z + b * f;
    zb = g + b * f;
    s = zb + b * f;
  }
};

// A thread's buffers of type B sized for (b, f), kept between calls: the kernel runs once per mini-batch per layer,
// and allocating them anew each time cost more than some of its products at small sizes.
template <class B>
B& thread_buffers(int64_t b, int64_t f) {
  thread_local B buf;
  thread_local int64_t sized_b = -1, sized_f = -1;
  if (b != sized_b || f != sized_f) {
    buf.size(b, f);
    sized_b = b, sized_f = f;
  }
  return buf;
}

// t, E and M from the inputs and S.
template <class T>
void cheap_parts(const Head<T>& h, Parts<T>& p) {
  const int64_t b = h.b, f = h.f;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t c = 0; c < f; ++c) p.t[size_t(i * f + c)] = h.v[i * h.lv + c] - h.k[i * h.lk + c];
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < b; ++j) {
      const size_t ij = size_t(i * b + j);
      p.e[ij] = j <= i ? h.eta[ij] : T(0);
      p.m[ij] = p.e[ij] * p.s[ij] + p.e[ij];
    }
}

// Z = k·W + bias, G = ln_l2_grad(Z, v − k), S, E, M and zb = q·W + bias − M·G.
template <class T>
void forward_parts(const Head<T>& h, Parts<T>& p) {
  const int64_t b = h.b, f = h.f;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t c = 0; c < f; ++c) p.z[i * f + c] = p.zb[i * f + c] = h.bias[c];
  gemm(false, false, b, f, f, h.k, h.lk, h.W, f, T(1), p.z, f);
  gemm(false, true, b, b, f, h.q, h.lq, h.k, h.lk, T(0), p.s, b);
  cheap_parts(h, p);
  for (int64_t i = 0; i < b; ++i)
    rows::ln_l2_grad(p.z + i * f, p.t.data() + i * f, h.gamma + h.goff[i], h.beta + h.goff[i], p.g + i * f, f, h.eps,
                     p.scratch.data());
  gemm(false, false, b, f, f, h.q, h.lq, h.W, f, T(1), p.zb, f);
  gemm(false, false, b, f, b, p.m.data(), b, p.g, f, T(1), p.zb, f, T(-1));
}

template <class T>
void forward_t(const Tensor& y, const DualOperands& o) {
  const int64_t G = head_total(o.xq), b = o.xq.shape()[2], f = o.xq.shape()[3];
  T* yp = y.data<T>();
#pragma omp parallel
  {
    Parts<T>& p = thread_buffers<Parts<T>>(b, f);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < G; ++g) {
      const Head<T> h = head<T>(o, g);
      p.bind(o.saved.defined() ? o.saved.data<T>() + g * kDualSaved(b, f) : nullptr);
      forward_parts(h, p);
      T *out = yp + g * (b + f + 1) * f, *W2 = out + b * f, *b2 = W2 + f * f;
      for (int64_t i = 0; i < b; ++i) {  // out = q + LN(zb)
        rows::ln_affine(p.zb + i * f, h.gamma + h.goff[i], h.beta + h.goff[i], out + i * f, f, h.eps);
        for (int64_t c = 0; c < f; ++c) out[i * f + c] += h.q[i * h.lq + c];
      }
      // W' = W − (ηl⊙k)ᵀ·G and bias' = bias − Σ_j ηl_j·G_j, ηl the last row of η (p.t reused for ηl⊙k)
      const T* el = h.eta + (b - 1) * b;
      for (int64_t j = 0; j < b; ++j)
        for (int64_t c = 0; c < f; ++c) p.t[size_t(j * f + c)] = el[j] * h.k[j * h.lk + c];
      std::copy(h.W, h.W + f * f, W2);
      gemm(true, false, f, f, b, p.t.data(), f, p.g, f, T(1), W2, f, T(-1));
      for (int64_t c = 0; c < f; ++c) {
        T acc = 0;
        for (int64_t j = 0; j < b; ++j) acc += el[j] * p.g[j * f + c];
        b2[c] = h.bias[c] - acc;
      }
    }
  }
}

// The backward's buffers of one head, beside the forward's.
template <class T>
struct Grads {
  std::vector<T> dzb, dm, dg, pk, dp, dz;  // (b, f) but dm (b, b)
  void size(int64_t b, int64_t f) {
    for (auto* x : {&dzb, &dg, &pk, &dp, &dz}) x->resize(size_t(b * f));
    dm.resize(size_t(b * b));
  }
};

// Output pointers of head g: dW, dbias, dxq, dxk, dxv, deta.
template <class T>
struct HeadOut {
  T *dW, *db, *dq, *dk, *dv, *deta;
};

// One head's upstream: dout (b rows ld apart), dW' (f × f) and dbias' (f).
template <class T>
struct HeadUp {
  const T *dO, *dW2, *db2;
  int64_t ld;
};

// One head's backward (autograd/compose.cpp's ttt_linear_dual_backward states each step); ag, ab: this head's
// dγ, dβ accumulators.
template <class T>
void backward_head(const Head<T>& h, const HeadUp<T>& up, const HeadOut<T>& o, Parts<T>& p, Grads<T>& d, double* ag,
                   double* ab) {
  // p holds Z, G, zb and S (saved by the forward or recomputed by the caller); t, E, M are cheap

  const int64_t b = h.b, f = h.f;
  const T *dO = up.dO, *dW2 = up.dW2, *db2 = up.db2, *el = h.eta + (b - 1) * b;
  for (int64_t i = 0; i < b; ++i)
    rows::ln_affine_backward(p.zb + i * f, h.gamma + h.goff[i], dO + i * up.ld, d.dzb.data() + i * f,
                             ag + h.goff[i], ab + h.goff[i], f, h.eps, p.scratch.data());
  // zb = q·W + bias − M·G, M = E⊙S + E
  for (int64_t i = 0; i < b; ++i) std::copy(dO + i * up.ld, dO + i * up.ld + f, o.dq + i * f);
  gemm(false, true, b, f, f, d.dzb.data(), f, h.W, f, T(1), o.dq, f);
  gemm(false, true, b, b, f, d.dzb.data(), f, p.g, f, T(0), d.dm.data(), b, T(-1));  // dM
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < b; ++j) {
      const size_t ij = size_t(i * b + j);
      o.deta[ij] = j <= i ? d.dm[ij] * (p.s[ij] + T(1)) : T(0);
      d.dm[ij] *= p.e[ij];  // dS
    }
  gemm(false, false, b, f, b, d.dm.data(), b, h.k, h.lk, T(1), o.dq, f);
  gemm(true, false, b, f, b, d.dm.data(), b, h.q, h.lq, T(0), o.dk, f);
  std::copy(dW2, dW2 + f * f, o.dW);
  gemm(true, false, f, f, b, h.q, h.lq, d.dzb.data(), f, T(1), o.dW, f);
  gemm(true, false, b, f, b, p.m.data(), b, d.dzb.data(), f, T(0), d.dg.data(), f, T(-1));
  // W' = W − Pᵀ·G with P = ηl⊙k, bias' = bias − Σ_j ηl_j·G_j
  for (int64_t j = 0; j < b; ++j)
    for (int64_t c = 0; c < f; ++c) d.pk[size_t(j * f + c)] = el[j] * h.k[j * h.lk + c];
  gemm(false, false, b, f, f, d.pk.data(), f, dW2, f, T(1), d.dg.data(), f, T(-1));
  gemm(false, true, b, f, f, p.g, f, dW2, f, T(0), d.dp.data(), f, T(-1));
  for (int64_t j = 0; j < b; ++j) {
    T del = 0;
    for (int64_t c = 0; c < f; ++c) {
      const size_t jc = size_t(j * f + c);
      d.dg[jc] -= el[j] * db2[c];
      o.dk[jc] += el[j] * d.dp[jc];
      del += h.k[j * h.lk + c] * d.dp[jc] - p.g[jc] * db2[c];
    }
    o.deta[(b - 1) * b + j] += del;
  }
  // G = ln_l2_grad(Z, v − k), Z = k·W + bias
  for (int64_t i = 0; i < b; ++i)
    rows::ln_l2_grad_vjp(p.z + i * f, p.t.data() + i * f, h.gamma + h.goff[i], h.beta + h.goff[i],
                         d.dg.data() + i * f, d.dz.data() + i * f, o.dv + i * f, ag + h.goff[i], ab + h.goff[i], f,
                         h.eps, p.scratch.data());
  for (int64_t x = 0; x < b * f; ++x) o.dk[x] -= o.dv[x];
  gemm(false, true, b, f, f, d.dz.data(), f, h.W, f, T(1), o.dk, f);
  gemm(true, false, f, f, b, h.k, h.lk, d.dz.data(), f, T(1), o.dW, f);
  for (int64_t c = 0; c < f; ++c) {
    T acc = db2[c];
    for (int64_t i = 0; i < b; ++i) acc += d.dzb[size_t(i * f + c)] + d.dz[size_t(i * f + c)];
    o.db[c] = acc;
  }
}

template <class T>
void backward_t(const std::array<Tensor, 8>& out, const DualOperands& o, const std::array<Tensor, 3>& dy) {
  const int64_t G = head_total(o.xq), b = o.xq.shape()[2], f = o.xq.shape()[3], P = o.gamma.numel();
  // dγ, dβ of each head: 128 KiB at 32 heads of 4 × 64, where glibc would map and unmap fresh pages every call
  thread_local std::vector<double> own_parts;
  std::vector<double>& parts = own_parts;  // the calling thread's, shared with the workers (a name, not a thread_local)
  parts.assign(size_t(G * 2 * P), 0.0);
#pragma omp parallel
  {
    Parts<T>& p = thread_buffers<Parts<T>>(b, f);
    Grads<T>& d = thread_buffers<Grads<T>>(b, f);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < G; ++g) {
      const HeadOut<T> ho{out[0].data<T>() + g * f * f, out[1].data<T>() + g * f, out[2].data<T>() + g * b * f,
                          out[3].data<T>() + g * b * f, out[4].data<T>() + g * b * f, out[5].data<T>() + g * b * b};
      double* acc = parts.data() + g * 2 * P;
      const Head<T> h = head<T>(o, g);
      if (o.saved.defined()) {
        p.bind(o.saved.data<T>() + g * kDualSaved(b, f));
        cheap_parts(h, p);
      } else {
        p.bind(nullptr);
        forward_parts(h, p);
      }
      const HeadUp<T> up{head_at<T>(dy[0], g), head_at<T>(dy[1], g), head_at<T>(dy[2], g), dy[0].strides()[2]};
      backward_head(h, up, ho, p, d, acc, acc + P);
    }
  }
  sum_head_parts(parts, G, P, out[6].data<T>(), out[7].data<T>());
}

}  // namespace

void ttt_linear_dual_backward(const std::array<Tensor, 8>& g, const DualOperands& o, const std::array<Tensor, 3>& dy) {
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_dual_backward", [&] { backward_t<scalar_t>(g, o, dy); });
}

void ttt_linear_dual(const Tensor& y, const DualOperands& o) {
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_dual", [&] { forward_t<scalar_t>(y, o); });
}

}  // namespace ponder::cpu
