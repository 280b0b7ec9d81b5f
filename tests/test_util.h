// Helpers every unit-test file may use: closeness checks that say which index is off, and the message of the
// exception a call throws. One copy here, so a stricter check reaches every suite at once.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "tensor/kernels.h"

namespace ponder::test {

// While alive, every backend acts as one without fused kernels (raw::set_fused_kernels_hidden): CPU tests cover the
// path a backend takes for the kernels it lacks.
struct HiddenFusedKernels {
  HiddenFusedKernels() { raw::set_fused_kernels_hidden(true); }
  ~HiddenFusedKernels() { raw::set_fused_kernels_hidden(false); }
  HiddenFusedKernels(const HiddenFusedKernels&) = delete;
  HiddenFusedKernels& operator=(const HiddenFusedKernels&) = delete;
};

constexpr double kTol = 1e-9;

// True in a build instrumented by AddressSanitizer (scripts/sanitize.sh). Test cases that check what a long run learns
// (not how memory is used) are skipped there with doctest::skip(kSanitized): instrumented they cost ~15× their time,
// and the release build runs them.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

inline void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = kTol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("index " << i << ": got " << got[i] << ", want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= tol);
  }
}

inline void check_close(double got, double want, double tol = kTol) {
  INFO("got " << got << ", want " << want);
  CHECK(std::abs(got - want) <= tol);
}

// The message of the exception of type E that `f` throws; fails the test when it throws none (an exception of
// another type propagates and fails the test too).
template <class E = std::exception, class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  FAIL("expected an exception");
  return "";
}

}  // namespace ponder::test
