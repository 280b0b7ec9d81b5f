// The table of primitive differentiable ops: each has one front end (autograd/ops_*.cpp) whose
// backward rule is written in these same ops, one CPU kernel family, one FLOP rule
// (tensor/flops.h) and one entry in the op table (autograd/op_table.cpp). Composite functions
// (softmax, layer norm, …) are built from these and need no rule of their own.
#pragma once
#include <cstdint>

namespace ponder {

enum class Op : uint8_t {
  Neg, Exp, Log, Sqrt, Rsqrt, Pow, Tanh, Sigmoid, Relu, GeluTanh, Silu, Abs, Clamp, Affine,
  Add, Sub, Mul, Div, Maximum, Minimum, Where,
  Sum, Max, SumTo, Expand, Cumsum, Tri, Matmul,
  Reshape, Permute, Slice, PadSlice, Cat,
  IndexSelect, IndexAdd, Gather, ScatterAdd,
  ToDtype, Clone, Checkpoint,
  // Fused ops (one kernel each where the device has one; autograd/ops_norm.cpp, ops_elementwise.cpp)
  // and the one multi-output view op.
  LayerNorm, LayerNormBackward, RmsNorm, RmsNormBackward, GeluTanhGrad, SiluGrad, Split, ActMul,
  LayerNormAffine, LnL2Grad, RmsNormAffine,
  Count
};

const char* op_name(Op op);

}  // namespace ponder
