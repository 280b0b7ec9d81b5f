// doctest's main, after one re-execution where OpenBLAS fell back to kernels older than the CPU: tests that train
// models are bound by the products, and they run the kernels that `ponder` runs (tensor/cpu/runtime.h says why).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tensor/cpu/runtime.h"

int main(int argc, char** argv) {
  if (const std::string core = ponder::cpu::blas_core_override(); !core.empty())
    if (setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0) execv("/proc/self/exe", argv);  // returns only on failure
  doctest::Context context(argc, argv);
  return context.run();
}
