// TTT-Linear's dual form on one mini-batch (tensor/backend.h, DualOperands), forward and backward, one head per
// task: every product of a head is a small GEMM on buffers that stay in cache, and the row steps (the inner
// gradient through LN + L2, the output layer norm and their VJPs) are the row functions the fused row kernels use
// (tensor/cpu/rows.h). The operands arrive as head views (raw::dual_head_view): a mini-batch's slice of the
// projections, the previous unit's W' and bias' inside its packed output and η's slice are read where they lie, with
// no copy; only xq, xk and xv may have rows further apart than f. Its definition is the composition in
// autograd/compose.cpp, which tests/test_ops.cpp and the op table compare it with. Heads run in parallel; dγ and dβ
// are summed per head and then over heads in order, so results do not depend on the thread count. The scan
// (ttt_linear_scan, below) runs the same head steps over every unit of a sequence in one parallel region.
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

// One head's forward into out (b + f + 1, f): the outputs, W' and bias'. p bound to where Z, G, zb and S go.
template <class T>
void forward_head(const Head<T>& h, Parts<T>& p, T* out) {
  const int64_t b = h.b, f = h.f;
  forward_parts(h, p);
  T *W2 = out + b * f, *b2 = W2 + f * f;
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

template <class T>
void forward_t(const Tensor& y, const DualOperands& o) {
  const int64_t G = head_total(o.xq), b = o.xq.shape()[2], f = o.xq.shape()[3];
  T* yp = y.data<T>();
#pragma omp parallel
  {
    Parts<T>& p = thread_buffers<Parts<T>>(b, f);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < G; ++g) {
      p.bind(o.saved.defined() ? o.saved.data<T>() + g * kDualSaved(b, f) : nullptr);
      forward_head(head<T>(o, g), p, yp + g * (b + f + 1) * f);
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
  sum_head_parts(parts.data(), G, P, out[6].data<T>(), out[7].data<T>());
}

// ---- The scan over every unit of each head (ScanOperands): a thread takes a head through all its units, so its W,
// bias and buffers stay in cache and one parallel region serves the whole sequence.

// Head g at unit u: unit 0's views moved by u units; W and bias where unit u − 1 wrote them in Y (n, G, b + f + 1,
// f), rows b … b + f.
template <class T>
Head<T> unit_head(Head<T> h, const ScanOperands& s, int64_t g, int64_t u, const T* Y) {
  h.q += u * s.step_q;
  h.k += u * s.step_k;
  h.v += u * s.step_v;
  h.eta += u * s.step_eta;
  if (u > 0) {
    const int64_t G = head_total(s.first.xq);
    h.W = Y + ((u - 1) * G + g) * (h.b + h.f + 1) * h.f + h.b * h.f;
    h.bias = h.W + h.f * h.f;
  }
  return h;
}

template <class T>
void scan_forward_t(const Tensor& Y, const Tensor& S, const ScanOperands& s) {
  const DualOperands& o = s.first;
  const int64_t G = head_total(o.xq), b = o.xq.shape()[2], f = o.xq.shape()[3], ys = (b + f + 1) * f;
  T *yp = Y.data<T>(), *sp = S.data<T>();
#pragma omp parallel
  {
    Parts<T>& p = thread_buffers<Parts<T>>(b, f);
#pragma omp for schedule(static)
    for (int64_t g = 0; g < G; ++g) {
      const Head<T> h0 = head<T>(o, g);
      for (int64_t u = 0; u < s.units; ++u) {
        p.bind(sp + (u * G + g) * kDualSaved(b, f));
        forward_head(unit_head(h0, s, g, u, yp), p, yp + (u * G + g) * ys);
      }
    }
  }
}

// The scan's backward: its operands, each head's dW, dbias between units in one of two slots (unit u reads the
// upstream unit u + 1 wrote and writes the other), and the units' dγ, dβ parts per head for a block of units at a
// time (a block's heads are summed per unit once every thread is done with it, as the one-unit kernel sums them).
template <class T>
struct ScanBackward {
  const std::array<Tensor, 8>& out;
  const ScanOperands& s;
  const Tensor &Y, &S;
  const std::array<Tensor, 3>& dy;
  int64_t step_dout, G, b, f, P, block;
  T* dw;          // (G, 2, f·f + f)
  double* parts;  // (units in a block, G, 2·P)
  T* slot(int64_t g, int64_t u) { return dw + (g * 2 + (u & 1)) * (f * f + f); }
  double* part(int64_t g, int64_t i) { return parts + (i * G + g) * 2 * P; }
};

// Units per block: their parts within about 8 MB.
inline int64_t scan_block(int64_t G, int64_t P, int64_t n) {
  return std::clamp<int64_t>((int64_t(8) << 20) / std::max<int64_t>(1, G * 2 * P * 8), 1, n);
}

// Unit u of head g, the i-th unit of its block (the units of a block in reverse, in the caller's parallel loop).
template <class T>
void scan_backward_unit(ScanBackward<T>& c, int64_t g, int64_t u, int64_t i, Parts<T>& p, Grads<T>& d) {
  const int64_t G = c.G, b = c.b, f = c.f, bf = b * f, ug = u * G + g;
  const std::array<Tensor, 8>& out = c.out;  // not named through c, whose type depends on T
  const std::array<Tensor, 3>& dy = c.dy;
  const Tensor &Y = c.Y, &S = c.S;
  const Head<T> h = unit_head(head<T>(c.s.first, g), c.s, g, u, Y.data<T>());
  p.bind(S.data<T>() + ug * kDualSaved(b, f));
  cheap_parts(h, p);
  const T* up = u == c.s.units - 1 ? nullptr : c.slot(g, u + 1);
  const HeadUp<T> hu{head_at<T>(dy[0], g) + u * c.step_dout, up ? up : head_at<T>(dy[1], g),
                     up ? up + f * f : head_at<T>(dy[2], g), dy[0].strides()[2]};
  T* dw = u == 0 ? out[0].data<T>() + g * f * f : c.slot(g, u);
  const HeadOut<T> ho{dw, u == 0 ? out[1].data<T>() + g * f : dw + f * f, out[2].data<T>() + ug * bf,
                      out[3].data<T>() + ug * bf, out[4].data<T>() + ug * bf, out[5].data<T>() + ug * b * b};
  double* acc = c.part(g, i);
  std::fill(acc, acc + 2 * c.P, 0.0);
  backward_head(h, hu, ho, p, d, acc, acc + c.P);
}

// dγ, dβ ← the block's units [lo, hi] summed over heads unit by unit, from the last unit down, each added to the sums
// of the units after it in T (the one-unit kernels' sums and their additions).
template <class T>
void scan_sum_block(ScanBackward<T>& c, int64_t lo, int64_t hi, std::vector<T>& tmp) {
  const std::array<Tensor, 8>& out = c.out;
  T *dgam = out[6].data<T>(), *dbet = out[7].data<T>();
  for (int64_t u = hi; u >= lo; --u) {
    if (u == c.s.units - 1) {
      sum_head_parts(c.part(0, u - lo), c.G, c.P, dgam, dbet);
      continue;
    }
    sum_head_parts(c.part(0, u - lo), c.G, c.P, tmp.data(), tmp.data() + c.P);
    for (int64_t j = 0; j < c.P; ++j) {
      dgam[j] = dgam[j] + tmp[size_t(j)];
      dbet[j] = dbet[j] + tmp[size_t(c.P + j)];
    }
  }
}

template <class T>
void scan_backward_t(const std::array<Tensor, 8>& out, const ScanOperands& s, const Tensor& Y, const Tensor& S,
                     const std::array<Tensor, 3>& dy, int64_t step_dout) {
  const DualOperands& o = s.first;
  const int64_t G = head_total(o.xq), b = o.xq.shape()[2], f = o.xq.shape()[3], P = o.gamma.numel(), n = s.units;
  const int64_t block = scan_block(G, P, n);
  // The calling thread's buffers, kept between calls (megabytes that glibc would map and unmap each time).
  thread_local std::vector<T> own_dw;
  thread_local std::vector<double> own_parts;
  own_dw.resize(std::max(own_dw.size(), size_t(G * 2 * (f * f + f))));
  own_parts.resize(std::max(own_parts.size(), size_t(block * G * 2 * P)));
  ScanBackward<T> c{out, s, Y, S, dy, step_dout, G, b, f, P, block, own_dw.data(), own_parts.data()};
  std::vector<T> tmp(size_t(2 * P));
#pragma omp parallel
  {
    Parts<T>& p = thread_buffers<Parts<T>>(b, f);
    Grads<T>& d = thread_buffers<Grads<T>>(b, f);
    for (int64_t hi = n - 1; hi >= 0; hi -= c.block) {
      const int64_t lo = std::max<int64_t>(0, hi - c.block + 1);
#pragma omp for schedule(static)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t u = hi; u >= lo; --u) scan_backward_unit(c, g, u, u - lo, p, d);
#pragma omp single
      scan_sum_block(c, lo, hi, tmp);
    }
  }
}

}  // namespace

void ttt_linear_dual_backward(const std::array<Tensor, 8>& g, const DualOperands& o, const std::array<Tensor, 3>& dy) {
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_dual_backward", [&] { backward_t<scalar_t>(g, o, dy); });
}

void ttt_linear_dual(const Tensor& y, const DualOperands& o) {
  PONDER_DISPATCH_FLOAT(o.xq.dtype(), "ttt_linear_dual", [&] { forward_t<scalar_t>(y, o); });
}

void ttt_linear_scan(const Tensor& Y, const Tensor& S, const ScanOperands& s) {
  PONDER_DISPATCH_FLOAT(Y.dtype(), "ttt_linear_scan", [&] { scan_forward_t<scalar_t>(Y, S, s); });
}

void ttt_linear_scan_backward(const std::array<Tensor, 8>& g, const ScanOperands& s, const Tensor& Y,
                              const Tensor& S, const std::array<Tensor, 3>& dy, int64_t step_dout) {
  PONDER_DISPATCH_FLOAT(Y.dtype(), "ttt_linear_scan_backward",
                        [&] { scan_backward_t<scalar_t>(g, s, Y, S, dy, step_dout); });
}

}  // namespace ponder::cpu
