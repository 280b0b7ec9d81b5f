// The op table's checks on one device, shared by the CPU suite (tests/test_ops.cpp) and the GPU suite
// (tests/test_cuda.cpp): every case a subcase, its forward against the float64 reference, gradcheck and
// gradgradcheck.
#pragma once
#include <doctest/doctest.h>

#include "autograd/op_table.h"

namespace ponder::test {

inline void check_op_table(Device device = Device::CPU) {
  REQUIRE(!op_table().empty());  // the checks live in the per-case subcases below
  for (const OpCase& c : op_table()) {
    SUBCASE(c.name.c_str()) {
      OpCaseReport r = run_op_case(c, device);
      INFO("case: ", c.name);
      CHECK_MESSAGE(r.fwd_f64_err <= 1e-12, "f64 forward error ", r.fwd_f64_err);
      CHECK_MESSAGE(r.fwd_f32_err <= c.f32_tol, "f32 forward error ", r.fwd_f32_err);
      CHECK_MESSAGE(r.grad.ok, "gradcheck: ", r.grad.message);
      CHECK_MESSAGE(r.gradgrad.ok, "gradgradcheck: ", r.gradgrad.message);
      CHECK(r.grad.checked > 0);
      CHECK(r.gradgrad.checked > 0);
    }
  }
}

}  // namespace ponder::test
