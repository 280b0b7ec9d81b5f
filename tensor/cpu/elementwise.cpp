// Element-wise CPU kernels: copy/convert, fill, unary and binary maps, where, triangular masks.
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/loop.h"
#include "tensor/cpu/vmath.h"

namespace ponder::cpu {

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  size_t lead = shape.size() - t.dim();
  for (size_t i = 0; i < t.dim(); ++i) st[lead + i] = t.shape()[i] == 1 ? 0 : t.strides()[i];
  return st;
}

namespace {

// Rows with unit strides get loops the compiler vectorises; an operand broadcast along the row (stride 0)
// is read once. Outputs never overlap their inputs except element for element (y[i] from x[i]).
template <class TO, class TI, class F>
void map1(const Tensor& out, const Tensor& x, F f) {
  TO* y = out.data<TO>();
  const TI* a = x.data<TI>();
  strided_rows<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                  [&](int64_t n, const int64_t* o, const int64_t* s) {
                    TO* __restrict yy = y + o[0];
                    const TI* __restrict aa = a + o[1];
                    if (s[0] == 1 && s[1] == 1) {
                      for (int64_t i = 0; i < n; ++i) yy[i] = f(aa[i]);
                    } else if (s[0] == 1 && s[1] == 0) {
                      const TO v = f(aa[0]);
                      for (int64_t i = 0; i < n; ++i) yy[i] = v;
                    } else {
                      for (int64_t i = 0; i < n; ++i) yy[i * s[0]] = f(aa[i * s[1]]);
                    }
                  });
}

template <class T, class F>
void map2(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  T* y = out.data<T>();
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  const Shape& sh = out.shape();
  strided_rows<3>(sh, {out.strides(), broadcast_strides(a, sh), broadcast_strides(b, sh)},
                  [&](int64_t n, const int64_t* o, const int64_t* s) {
                    T* __restrict yy = y + o[0];
                    const T* __restrict aa = pa + o[1];
                    const T* __restrict bb = pb + o[2];
                    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
#pragma omp simd
                      for (int64_t i = 0; i < n; ++i) yy[i] = f(aa[i], bb[i]);
                    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {
                      const T bv = bb[0];
#pragma omp simd
                      for (int64_t i = 0; i < n; ++i) yy[i] = f(aa[i], bv);
                    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {
                      const T av = aa[0];
#pragma omp simd
                      for (int64_t i = 0; i < n; ++i) yy[i] = f(av, bb[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) yy[i * s[0]] = f(aa[i * s[1]], bb[i * s[2]]);
                    }
                  });
}

// Float32 maps with a vector form (tensor/cpu/vmath.h): contiguous rows 8 lanes at a time, other
// layouts one value at a time through the same lanes.
template <class VF>
void map1_f32v(const Tensor& out, const Tensor& x, VF f) {
  float* y = out.data<float>();
  const float* a = x.data<float>();
  strided_rows<2>(out.shape(), {out.strides(), broadcast_strides(x, out.shape())},
                  [&](int64_t n, const int64_t* o, const int64_t* s) {
                    if (s[0] == 1 && s[1] == 1)
                      vmath::map_f32(y + o[0], a + o[1], n, f);
                    else
                      for (int64_t i = 0; i < n; ++i) y[o[0] + i * s[0]] = vmath::one_f32(a[o[1] + i * s[1]], f);
                  });
}

// True when op has a float32 vector form; then it has been applied.
bool unary_f32_vec(UnaryOp op, const Tensor& out, const Tensor& x) {
  using vmath::vf;
  switch (op) {
    case UnaryOp::Exp: map1_f32v(out, x, [](vf v) { return vmath::exp_v(v); }); return true;
    case UnaryOp::Tanh: map1_f32v(out, x, [](vf v) { return vmath::tanh_v(v); }); return true;
    case UnaryOp::Sigmoid: map1_f32v(out, x, [](vf v) { return vmath::sigmoid_v(v); }); return true;
    case UnaryOp::Silu: map1_f32v(out, x, [](vf v) { return vmath::silu_v(v); }); return true;
    case UnaryOp::GeluTanh: map1_f32v(out, x, [](vf v) { return vmath::gelu_tanh_v(v); }); return true;
    case UnaryOp::GeluTanhGrad: map1_f32v(out, x, [](vf v) { return vmath::gelu_tanh_grad_v(v); }); return true;
    case UnaryOp::SiluGrad: map1_f32v(out, x, [](vf v) { return vmath::silu_grad_v(v); }); return true;
    default: return false;
  }
}

template <class T>
T gelu_tanh(T x) {
  const T c = T(0.7978845608028654);  // sqrt(2/pi)
  return T(0.5) * x * (T(1) + std::tanh(c * (x + T(0.044715) * x * x * x)));
}

// d/dx gelu_tanh(x) = ½(1 + t) + ½x(1 − t²)·c(1 + 3a·x²), t = tanh(c(x + a·x³)).
template <class T>
T gelu_tanh_grad(T x) {
  const T c = T(0.7978845608028654), a = T(0.044715);
  const T t = std::tanh(c * (x + a * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3) * a * x * x);
}

// d/dx silu(x) = σ(x)·(1 + x·(1 − σ(x))).
template <class T>
T silu_grad(T x) {
  const T s = T(1) / (T(1) + std::exp(-x));
  return s * (T(1) + x * (T(1) - s));
}

template <class T>
void unary_t(UnaryOp op, T p0, T p1, const Tensor& out, const Tensor& x) {
  if constexpr (std::is_same_v<T, float>)
    if (unary_f32_vec(op, out, x)) return;
  switch (op) {
    case UnaryOp::Neg: return map1<T, T>(out, x, [](T v) { return -v; });
    case UnaryOp::Exp: return map1<T, T>(out, x, [](T v) { return std::exp(v); });
    case UnaryOp::Log: return map1<T, T>(out, x, [](T v) { return std::log(v); });
    case UnaryOp::Sqrt: return map1<T, T>(out, x, [](T v) { return std::sqrt(v); });
    case UnaryOp::Rsqrt: return map1<T, T>(out, x, [](T v) { return T(1) / std::sqrt(v); });
    case UnaryOp::Tanh: return map1<T, T>(out, x, [](T v) { return std::tanh(v); });
    case UnaryOp::Sigmoid: return map1<T, T>(out, x, [](T v) { return T(1) / (T(1) + std::exp(-v)); });
    case UnaryOp::Relu: return map1<T, T>(out, x, [](T v) { return v > T(0) ? v : T(0); });
    case UnaryOp::GeluTanh: return map1<T, T>(out, x, [](T v) { return gelu_tanh(v); });
    case UnaryOp::Silu: return map1<T, T>(out, x, [](T v) { return v / (T(1) + std::exp(-v)); });
    case UnaryOp::Abs: return map1<T, T>(out, x, [](T v) { return std::abs(v); });
    case UnaryOp::Sign: return map1<T, T>(out, x, [](T v) { return T((v > T(0)) - (v < T(0))); });
    case UnaryOp::Pow: return map1<T, T>(out, x, [p0](T v) { return std::pow(v, p0); });
    case UnaryOp::Affine: return map1<T, T>(out, x, [p0, p1](T v) { return p0 * v + p1; });
    case UnaryOp::Clamp: return map1<T, T>(out, x, [p0, p1](T v) { return v < p0 ? p0 : (v > p1 ? p1 : v); });
    case UnaryOp::Step: return map1<T, T>(out, x, [](T v) { return v > T(0) ? T(1) : T(0); });
    case UnaryOp::InRange: return map1<T, T>(out, x, [p0, p1](T v) { return v > p0 && v < p1 ? T(1) : T(0); });
    case UnaryOp::GeluTanhGrad: return map1<T, T>(out, x, [](T v) { return gelu_tanh_grad(v); });
    case UnaryOp::SiluGrad: return map1<T, T>(out, x, [](T v) { return silu_grad(v); });
    case UnaryOp::Count: break;
  }
  throw std::invalid_argument("cpu::unary: unknown op");
}

template <class T>
void binary_t(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case BinaryOp::Add: return map2<T>(out, a, b, [](T x, T y) { return x + y; });
    case BinaryOp::Sub: return map2<T>(out, a, b, [](T x, T y) { return x - y; });
    case BinaryOp::Mul: return map2<T>(out, a, b, [](T x, T y) { return x * y; });
    case BinaryOp::Div: return map2<T>(out, a, b, [](T x, T y) { return x / y; });
    case BinaryOp::Maximum: return map2<T>(out, a, b, [](T x, T y) { return x > y ? x : y; });
    case BinaryOp::Minimum: return map2<T>(out, a, b, [](T x, T y) { return x < y ? x : y; });
    case BinaryOp::Eq: return map2<T>(out, a, b, [](T x, T y) { return T(x == y); });
    case BinaryOp::Gt: return map2<T>(out, a, b, [](T x, T y) { return T(x > y); });
    case BinaryOp::Ge: return map2<T>(out, a, b, [](T x, T y) { return T(x >= y); });
    case BinaryOp::Lt: return map2<T>(out, a, b, [](T x, T y) { return T(x < y); });
    case BinaryOp::Le: return map2<T>(out, a, b, [](T x, T y) { return T(x <= y); });
    case BinaryOp::Count: break;
  }
  throw std::invalid_argument("cpu::binary: unknown op");
}

// Runs fn(start, len) over [0, n) in chunks of kChunk, in parallel when n is large.
template <class Fn>
void chunks(int64_t n, Fn fn) {
  const int64_t items = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (items > 1 && n >= kParallelMin)
  for (int64_t it = 0; it < items; ++it) fn(it * kChunk, std::min(kChunk, n - it * kChunk));
}

// act(a)⊙b and its gradients, float32 through the same vector maps as the unary kernels (so the results
// equal the composition bit for bit), float64 through the scalar ones.
template <class T>
void act_mul_t(GateAct act, const Tensor& out, const Tensor& a, const Tensor& b) {
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T* po = out.data<T>();
  chunks(out.numel(), [&](int64_t s, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      using vmath::vf;
      vf buf[kChunk / vmath::kLanes];
      float* ab = reinterpret_cast<float*>(buf);
      if (act == GateAct::Silu) vmath::map_f32(ab, pa + s, n, [](vf v) { return vmath::silu_v(v); });
      else vmath::map_f32(ab, pa + s, n, [](vf v) { return vmath::gelu_tanh_v(v); });
      for (int64_t i = 0; i < n; ++i) po[s + i] = ab[i] * pb[s + i];
    } else {
      for (int64_t i = s; i < s + n; ++i)
        po[i] = (act == GateAct::Silu ? pa[i] / (T(1) + std::exp(-pa[i])) : gelu_tanh(pa[i])) * pb[i];
    }
  });
}

template <class T>
void act_mul_backward_t(GateAct act, const Tensor& da, const Tensor& db, const Tensor& a, const Tensor& b,
                        const Tensor& g) {
  const T *pa = a.data<T>(), *pb = b.data<T>(), *pg = g.data<T>();
  T *pda = da.data<T>(), *pdb = db.data<T>();
  chunks(a.numel(), [&](int64_t s, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      using vmath::vf;
      vf fbuf[kChunk / vmath::kLanes], dbuf[kChunk / vmath::kLanes];
      float *f = reinterpret_cast<float*>(fbuf), *d = reinterpret_cast<float*>(dbuf);
      if (act == GateAct::Silu) {
        vmath::blocks(n, [&](int64_t i, int64_t m) {  // one exp for both maps
          vf dv;
          vmath::store_n(f + i, vmath::silu_and_grad_v(vmath::load_n(pa + s + i, m), dv), m);
          vmath::store_n(d + i, dv, m);
        });
      } else {
        vmath::map_f32(f, pa + s, n, [](vf v) { return vmath::gelu_tanh_v(v); });
        vmath::map_f32(d, pa + s, n, [](vf v) { return vmath::gelu_tanh_grad_v(v); });
      }
      for (int64_t i = 0; i < n; ++i) {
        pda[s + i] = (pg[s + i] * pb[s + i]) * d[i];
        pdb[s + i] = pg[s + i] * f[i];
      }
    } else {
      for (int64_t i = s; i < s + n; ++i) {
        const T x = pa[i];
        const T f = act == GateAct::Silu ? x / (T(1) + std::exp(-x)) : gelu_tanh(x);
        const T d = act == GateAct::Silu ? silu_grad(x) : gelu_tanh_grad(x);
        pda[i] = (pg[i] * pb[i]) * d;
        pdb[i] = pg[i] * f;
      }
    }
  });
}

// The float operations of the composition in raw::adamw_step_, in its order: scale(x, a, b) is a·x + b.
// float32 goes 8 lanes at a time (libm's sqrt, which may set errno, keeps the scalar loop from vectorising).
template <class T, class V>
V adamw_lanes(V& m, V& v, V p, V g, const AdamWCoeffs& c, V (*sq)(V)) {
  const T b1 = T(c.beta1), nb1 = T(1 - c.beta1), b2 = T(c.beta2), nb2 = T(1 - c.beta2), ibc2 = T(1 / c.bc2),
          eps = T(c.eps), step = T(c.lr / c.bc1), decay = T(1 - c.lr * c.weight_decay), zero = T(0), one = T(1);
  m = (b1 * m + zero) + (nb1 * g + zero);
  v = (b2 * v + zero) + (nb2 * (g * g) + zero);
  const V denom = one * sq(ibc2 * v + zero) + eps;
  return (decay * p + zero) - (step * m + zero) / denom;
}

template <class T>
void adamw_step_t(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  T *pp = p.data<T>(), *pm = m.data<T>(), *pv = v.data<T>();
  const T* pg = g.data<T>();
  chunks(p.numel(), [&](int64_t s, int64_t n) {
    int64_t i = s;
    if constexpr (std::is_same_v<T, float>) {
      using vmath::vf;
      for (; i + vmath::kLanes <= s + n; i += vmath::kLanes) {
        vf vp, vm, vv, vg;
        std::memcpy(&vp, pp + i, sizeof vp);
        std::memcpy(&vm, pm + i, sizeof vm);
        std::memcpy(&vv, pv + i, sizeof vv);
        std::memcpy(&vg, pg + i, sizeof vg);
        vp = adamw_lanes<float, vf>(vm, vv, vp, vg, c, vmath::sqrt_v);
        std::memcpy(pp + i, &vp, sizeof vp);
        std::memcpy(pm + i, &vm, sizeof vm);
        std::memcpy(pv + i, &vv, sizeof vv);
      }
    }
    for (; i < s + n; ++i)
      pp[i] = adamw_lanes<T, T>(pm[i], pv[i], pp[i], pg[i], c, [](T x) -> T { return std::sqrt(x); });
  });
}

}  // namespace

void adamw_step(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  PONDER_DISPATCH_FLOAT(p.dtype(), "adamw_step", [&] { adamw_step_t<scalar_t>(p, m, v, g, c); });
}

void act_mul(GateAct act, const Tensor& out, const Tensor& a, const Tensor& b) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "act_mul", [&] { act_mul_t<scalar_t>(act, out, a, b); });
}

namespace {
// Row r of x is position r mod N. Each product rounded on its own, then their difference or sum, as the
// composition's separate kernels do: "+ zero" keeps the compiler from contracting a product into the subtraction
// (an FMA would round once), so float32 gives the composition's bits.
template <class T>
void rope_t(const Tensor& out, const Tensor& x, const Tensor& cs, const Tensor& sn) {
  const int64_t f = x.shape().back(), h = f / 2, N = x.shape()[x.dim() - 2], rows = x.numel() / std::max<int64_t>(f, 1);
  const T *px = x.data<T>(), *pc = cs.data<T>(), *ps = sn.data<T>();
  T* py = out.data<T>();
#pragma omp parallel for schedule(static) if (x.numel() >= (int64_t(1) << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = px + r * f, *c = pc + (r % N) * h, *s = ps + (r % N) * h;
    T* yr = py + r * f;
    for (int64_t i = 0; i < h; ++i) {
      const T a = xr[2 * i], b = xr[2 * i + 1], zero = T(0);
      const T ac = a * c[i] + zero, bs = b * s[i] + zero, as = a * s[i] + zero, bc = b * c[i] + zero;
      yr[2 * i] = ac - bs;
      yr[2 * i + 1] = as + bc;
    }
  }
}
}  // namespace

void rope(const Tensor& out, const Tensor& x, const Tensor& cs, const Tensor& sn) {
  PONDER_DISPATCH_FLOAT(x.dtype(), "rope", [&] { rope_t<scalar_t>(out, x, cs, sn); });
}

void act_mul_backward(GateAct act, const Tensor& da, const Tensor& db, const Tensor& a, const Tensor& b,
                      const Tensor& g) {
  PONDER_DISPATCH_FLOAT(da.dtype(), "act_mul_backward", [&] { act_mul_backward_t<scalar_t>(act, da, db, a, b, g); });
}

void copy(const Tensor& dst, const Tensor& src) {
  PONDER_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using out_t = scalar_t;
    PONDER_DISPATCH_ALL(src.dtype(), "copy", [&] {
      map1<out_t, scalar_t>(dst, src, [](scalar_t v) { return out_t(v); });
    });
  });
}

void fill(const Tensor& dst, double value) {
  PONDER_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    scalar_t v = scalar_t(value);
    map1<scalar_t, scalar_t>(dst, dst, [v](scalar_t) { return v; });
  });
}

void unary(UnaryOp op, double p0, double p1, const Tensor& out, const Tensor& x) {
  PONDER_DISPATCH_FLOAT(out.dtype(), "unary", [&] { unary_t<scalar_t>(op, scalar_t(p0), scalar_t(p1), out, x); });
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  PONDER_DISPATCH_ALL(out.dtype(), "binary", [&] { binary_t<scalar_t>(op, out, a, b); });
}

void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  PONDER_DISPATCH_ALL(out.dtype(), "where", [&] {
    using T = scalar_t;
    T* y = out.data<T>();
    const T* pc = cond.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const Shape& sh = out.shape();
    strided_rows<4>(sh, {out.strides(), broadcast_strides(cond, sh), broadcast_strides(a, sh), broadcast_strides(b, sh)},
                    [&](int64_t n, const int64_t* o, const int64_t* s) {
                      for (int64_t i = 0; i < n; ++i)
                        y[o[0] + i * s[0]] = pc[o[1] + i * s[1]] != T(0) ? pa[o[2] + i * s[2]] : pb[o[3] + i * s[3]];
                    });
  });
}

void tri(const Tensor& out, const Tensor& x, int64_t k, bool upper) {
  // out and x are contiguous with shape (…, R, C).
  const int64_t R = out.shape()[out.dim() - 2], C = out.shape().back();
  const int64_t batch = out.numel() / std::max<int64_t>(R * C, 1);
  PONDER_DISPATCH_ALL(out.dtype(), "tri", [&] {
    scalar_t* y = out.data<scalar_t>();
    const scalar_t* a = x.data<scalar_t>();
_Pragma("omp parallel for schedule(static) if (out.numel() >= kParallelMin)")
    for (int64_t bi = 0; bi < batch * R; ++bi) {
      int64_t i = bi % R;
      for (int64_t j = 0; j < C; ++j) {
        bool keep = upper ? (j - i >= k) : (j - i <= k);
        y[bi * C + j] = keep ? a[bi * C + j] : scalar_t(0);
      }
    }
  });
}

}  // namespace ponder::cpu
