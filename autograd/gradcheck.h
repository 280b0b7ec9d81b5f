// Finite-difference checks of the engine's gradients (float64).
//   gradcheck:     analytical Jacobian (one backward per output element) vs central differences.
//   gradgradcheck: gradcheck of G(x, v) = grad(f(x), x, v, create_graph) with respect to x and v.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ponder {

using TensorFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct CheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 1234;  // for the random grad_outputs of gradgradcheck
};

struct CheckResult {
  bool ok = true;
  double max_abs_err = 0;
  size_t checked = 0;   // Jacobian entries compared
  std::string message;  // the first mismatch, when !ok
};

// `differentiable[i]` says which inputs to check (others, e.g. indices, are passed through).
CheckResult gradcheck(const TensorFn& f, const std::vector<Tensor>& inputs, const std::vector<bool>& differentiable,
                      const CheckOptions& opt = {});
CheckResult gradgradcheck(const TensorFn& f, const std::vector<Tensor>& inputs,
                          const std::vector<bool>& differentiable, const CheckOptions& opt = {});

// For pieces with too many inputs for a full Jacobian (a model block's parameters), checks along random directions
// instead: f must return a scalar. First order: <∇f, v> against (f(x+εv) − f(x−εv)) / 2ε; second order: the
// double-backward Hessian-vector product <H·v, w> against (<∇f(x+εw), v> − <∇f(x−εw), v>) / 2ε; for `directions`
// pairs of random unit directions (v, w) over all differentiable inputs at once. `checked` counts directions.
CheckResult directional_gradcheck(const TensorFn& f, const std::vector<Tensor>& inputs,
                                  const std::vector<bool>& differentiable, int directions = 4,
                                  const CheckOptions& opt = {});
CheckResult directional_gradgradcheck(const TensorFn& f, const std::vector<Tensor>& inputs,
                                      const std::vector<bool>& differentiable, int directions = 4,
                                      const CheckOptions& opt = {});

}  // namespace ponder
