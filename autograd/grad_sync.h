// Data-parallel training (tensor/dist.h): after each rank has accumulated the gradients of its own micro-batches,
// every parameter's gradient is replaced by its sum over the ranks, identical on every rank, so that identical
// optimiser steps keep the replicas in lock-step.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace ponder {

// Sums each parameter's .grad over the ranks, in place (a no-op on one rank). CPU gradients, and CUDA ones in a build
// without NCCL, are summed on the host in rank order (dist::sum_in_rank_order: bit for bit what one process adds up);
// CUDA gradients with NCCL on the devices. A parameter that has no gradient on any rank keeps none (AdamW then skips
// it, as in one process); one with a gradient on some ranks only gets the sum with zeros for the others.
// Throws for a parameter that is not float32.
void sum_gradients_over_ranks(const std::vector<Tensor>& params);

}  // namespace ponder
