// The op table: every case forward vs naive float64 reference (f64 and f32), gradcheck and
// gradgradcheck in float64; and every primitive Op is exercised by at least one case.
#include <doctest/doctest.h>

#include <set>

#include "autograd/op_table.h"

using namespace ponder;

TEST_CASE("op table covers every primitive op") {
  std::set<Op> covered;
  for (const OpCase& c : op_table()) covered.insert(c.covers.begin(), c.covers.end());
  for (size_t i = 0; i < size_t(Op::Count); ++i) {
    Op op = Op(i);
    if (op == Op::Checkpoint) continue;  // a region, not a kernel: tested in test_nn.cpp
    CHECK_MESSAGE(covered.count(op), "no op-table case for ", op_name(op));
  }
}

TEST_CASE("op table: forward, gradcheck, gradgradcheck") {
  for (const OpCase& c : op_table()) {
    SUBCASE(c.name.c_str()) {
      OpCaseReport r = run_op_case(c);
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
