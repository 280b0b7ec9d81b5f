// Rematerialisation: keep only a region's inputs, run it without recording, and re-run it during
// backward. Under create_graph the recomputation is recorded, so higher-order gradients still flow.
#pragma once
#include <functional>
#include <vector>

#include "autograd/ops.h"

namespace ponder {

using RegionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> checkpoint(const RegionFn& fn, const std::vector<Tensor>& inputs);

// The VJP of fn at xs for upstream grads (one per output of fn; shapes: the outputs' shapes in the forward), by
// running fn again with a graph and differentiating it; needs[i]: whether xs[i]'s gradient is wanted (the others
// come back undefined). Under grad mode (a backward with create_graph) the gradients stay differentiable with
// respect to xs. With count_forward false the re-run's own FLOPs are not counted (a fused op's backward that must
// count its composition's backward only). `who` names the caller in errors.
std::vector<Tensor> recompute_vjp(const RegionFn& fn, std::vector<Tensor> xs, const std::vector<Tensor>& grads,
                                  const std::vector<bool>& needs, const std::vector<Shape>& shapes, const char* who,
                                  bool count_forward = true);

}  // namespace ponder
