// Rematerialisation: keep only a region's inputs, run it without recording, and re-run it during
// backward. Under create_graph the recomputation is recorded, so higher-order gradients still flow.
#pragma once
#include <functional>
#include <vector>

#include "autograd/ops.h"

namespace ponder {

using RegionFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> checkpoint(const RegionFn& fn, const std::vector<Tensor>& inputs);

}  // namespace ponder
