// The table of differentiable ops: each primitive has one front end (autograd/ops_*.cpp) whose backward
// rule is written in these same ops, one CPU kernel family whose raw:: entry in tensor/kernels.cpp counts
// its FLOPs by the per-category rules of tensor/flops.h, and at least one case in the op table
// (autograd/op_table.cpp). Composite functions (softmax, …) are built from these and need no entry; the
// fused ops at the end are hot compositions with a kernel of their own. How to add one: docs/adding_an_op.md.
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
