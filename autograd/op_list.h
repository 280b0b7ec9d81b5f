// The table of differentiable ops: each primitive has one front end (autograd/ops_*.cpp) whose backward
// rule is written in these same ops, one CPU kernel family whose raw:: entry in tensor/kernels.cpp counts
// its FLOPs by the per-category rules of tensor/flops.h, and at least one case in the op table
// (autograd/op_table.cpp). Composite functions (softmax, …) are built from these and need no entry; the
// fused ops at the end are hot compositions with a kernel of their own. How to add one: docs/adding_an_op.md.
#pragma once
#include <cstdint>

namespace ponder {

// X(id, name): the id nodes record and the name graph dumps and the coverage test print, in one list. The fused
// ops (one kernel each where the device has one; autograd/ops_norm.cpp, ops_elementwise.cpp) and the one
// multi-output view op come last.
#define PONDER_OPS(X)                                                                                          \
  X(Neg, "neg") X(Exp, "exp") X(Log, "log") X(Sqrt, "sqrt") X(Rsqrt, "rsqrt") X(Pow, "pow") X(Tanh, "tanh")  \
  X(Sigmoid, "sigmoid") X(Relu, "relu") X(GeluTanh, "gelu_tanh") X(Silu, "silu") X(Abs, "abs")                \
  X(Clamp, "clamp") X(Affine, "affine")                                                                        \
  X(Add, "add") X(Sub, "sub") X(Mul, "mul") X(Div, "div") X(Maximum, "maximum") X(Minimum, "minimum")         \
  X(Where, "where")                                                                                            \
  X(Sum, "sum") X(Max, "max") X(SumTo, "sum_to") X(Expand, "expand") X(Cumsum, "cumsum") X(Tri, "tri")        \
  X(Matmul, "matmul")                                                                                          \
  X(Reshape, "reshape") X(Permute, "permute") X(Slice, "slice") X(PadSlice, "pad_slice") X(Cat, "cat")        \
  X(IndexSelect, "index_select") X(IndexAdd, "index_add") X(Gather, "gather") X(ScatterAdd, "scatter_add")    \
  X(ToDtype, "to_dtype") X(Clone, "clone") X(Checkpoint, "checkpoint")                                         \
  X(LayerNorm, "layer_norm") X(LayerNormBackward, "layer_norm_backward") X(RmsNorm, "rms_norm")                \
  X(RmsNormBackward, "rms_norm_backward") X(GeluTanhGrad, "gelu_tanh_grad") X(SiluGrad, "silu_grad")           \
  X(Split, "split") X(ActMul, "act_mul") X(LayerNormAffine, "layer_norm_affine") X(LnL2Grad, "ln_l2_grad")     \
  X(RmsNormAffine, "rms_norm_affine") X(Attention, "attention") X(TttLinearDual, "ttt_linear_dual")    \
  X(Rope, "rope") X(TttPrefixSteps, "ttt_prefix_steps") X(TttMlpDual, "ttt_mlp_dual")  \
  X(TttLinearScan, "ttt_linear_scan") X(TttMlpScan, "ttt_mlp_scan")

#define PONDER_OP_ID(id, name) id,
enum class Op : uint8_t { PONDER_OPS(PONDER_OP_ID) Count };
#undef PONDER_OP_ID

const char* op_name(Op op);

}  // namespace ponder
