// The device formulas of the unary maps (tensor/cpu/elementwise.cpp's, written the same way so results agree to
// rounding), in one place for the unary kernel (elementwise.cu) and the fused gated products (fused.cu), so a fused
// kernel's activation is the composition's bit for bit.
#pragma once
#include <cuda_runtime.h>

#include "tensor/backend.h"

namespace ponder::cuda {

// float/double overloads of the device libm functions the maps need.
__device__ inline float m_exp(float v) { return expf(v); }
__device__ inline double m_exp(double v) { return exp(v); }
__device__ inline float m_log(float v) { return logf(v); }
__device__ inline double m_log(double v) { return log(v); }
__device__ inline float m_sqrt(float v) { return sqrtf(v); }
__device__ inline double m_sqrt(double v) { return sqrt(v); }
__device__ inline float m_tanh(float v) { return tanhf(v); }
__device__ inline double m_tanh(double v) { return tanh(v); }
__device__ inline float m_abs(float v) { return fabsf(v); }
__device__ inline double m_abs(double v) { return fabs(v); }
__device__ inline float m_pow(float v, float p) { return powf(v, p); }
__device__ inline double m_pow(double v, double p) { return pow(v, p); }

template <class T>
struct UnaryFn {
  UnaryOp op;
  T p0, p1;
  __device__ T operator()(T v) const {
    switch (op) {
      case UnaryOp::Neg: return -v;
      case UnaryOp::Exp: return m_exp(v);
      case UnaryOp::Log: return m_log(v);
      case UnaryOp::Sqrt: return m_sqrt(v);
      case UnaryOp::Rsqrt: return T(1) / m_sqrt(v);
      case UnaryOp::Tanh: return m_tanh(v);
      case UnaryOp::Sigmoid: return T(1) / (T(1) + m_exp(-v));
      case UnaryOp::Relu: return v > T(0) ? v : T(0);
      case UnaryOp::GeluTanh: {
        const T c = T(0.7978845608028654);  // sqrt(2/pi)
        return T(0.5) * v * (T(1) + m_tanh(c * (v + T(0.044715) * v * v * v)));
      }
      case UnaryOp::Silu: return v / (T(1) + m_exp(-v));
      case UnaryOp::Abs: return m_abs(v);
      case UnaryOp::Sign: return T((v > T(0)) - (v < T(0)));
      case UnaryOp::Pow: return m_pow(v, p0);
      case UnaryOp::Affine: return p0 * v + p1;
      case UnaryOp::Clamp: return v < p0 ? p0 : (v > p1 ? p1 : v);
      case UnaryOp::Step: return v > T(0) ? T(1) : T(0);
      case UnaryOp::InRange: return v > p0 && v < p1 ? T(1) : T(0);
      case UnaryOp::GeluTanhGrad: {
        const T c = T(0.7978845608028654), a = T(0.044715);
        const T t = m_tanh(c * (v + a * v * v * v));
        return T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * c * (T(1) + T(3) * a * v * v);
      }
      case UnaryOp::SiluGrad: {
        const T s = T(1) / (T(1) + m_exp(-v));
        return s * (T(1) + v * (T(1) - s));
      }
      default: return v;  // unreachable: unary() rejects unknown ops on the host
    }
  }
};

}  // namespace ponder::cuda
