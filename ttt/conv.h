// Causal depthwise convolution over a sequence that arrives in chunks.
#pragma once
#include "autograd/ops.h"

namespace ponder::ttt {

// x (B, n, C) continues a sequence whose last w−1 inputs are in `hist` (B, w−1, C); an undefined
// hist means the sequence starts here (zeros before it). Returns causal_conv1d outputs for the
// chunk (B, n, C) and moves `hist` forward.
Tensor causal_conv_chunk(const Tensor& x, Tensor& hist, const Tensor& w, const Tensor& bias);

}  // namespace ponder::ttt
