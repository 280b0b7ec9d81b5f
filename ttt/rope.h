// Rotary position embedding, interleaved pairs (x[2i], x[2i+1]) rotated by p·θ^(−2i/f).
#pragma once
#include "autograd/ops.h"

namespace ponder::ttt {

// x: (B, H, N, f); position of token t = (offset + t) % period. Attention uses absolute positions
// (period 0 = never wrap); the TTT layer uses its mini-batch size, so positions restart in every
// mini-batch as in the official code.
Tensor rope(const Tensor& x, int64_t period, double theta, int64_t offset = 0);

}  // namespace ponder::ttt
