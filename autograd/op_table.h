// The op table: one or more sample cases per differentiable op, each with deterministic inputs
// (broadcast, non-contiguous and odd sizes among them), the engine function, a naive float64
// reference, and gradcheck tolerances. Tests and `ponder gradcheck --all` both run it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/op_list.h"
#include "autograd/reference.h"

namespace ponder {

struct OpCase {
  std::string name;
  std::vector<Op> covers;  // primitive ops this case exercises (every Op must be covered)
  std::function<std::vector<Tensor>(DType)> inputs;
  std::vector<bool> differentiable;
  TensorFn fn;
  std::function<ref::Dense(const std::vector<ref::Dense>&)> reference;
  CheckOptions check;
  double f32_tol = 1e-4;  // relative (to the reference's max magnitude) float32 forward tolerance
};

const std::vector<OpCase>& op_table();

struct OpCaseReport {
  std::string name;
  double fwd_f64_err = 0, fwd_f32_err = 0;
  bool fwd_ok = true;
  CheckResult grad, gradgrad;
  bool ok() const { return fwd_ok && grad.ok && gradgrad.ok; }
};

// Runs forward (f64 and f32 vs reference), gradcheck and gradgradcheck for one case. On another device
// the inputs are moved there with their strides kept (non-contiguous cases stay non-contiguous) and
// compared against the same float64 reference, computed on the host.
OpCaseReport run_op_case(const OpCase& c, Device device = Device::CPU);

}  // namespace ponder
