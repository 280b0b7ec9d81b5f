#include "experiments/process/environment.h"

#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/fault.h"

namespace ponder::cli {
namespace {

struct Variable {
  const char* name;
  std::vector<std::string> values;  // empty: any value (a path); else the values its reader accepts
  const char* what;
};

// Every variable a ponder binary or its test harness reads, and where.
const std::vector<Variable>& variables() {
  static const std::vector<Variable> v = {
      {"PONDER_DATA_DIR", {}, "the data/ folder (data/files.h)"},
      {"PONDER_SHARED_DIR", {}, "the shared/ folder (data/files.h)"},
      {"PONDER_BENCH_DIR", {}, "the code-benchmark files (ponder codebench)"},
      {"PONDER_PYSTDLIB_DIR", {}, "the Python standard library corpus (data/)"},
      {"PONDER_DUAL_SCAN", {"0", "1"}, "the backend's scan kernels off (0) or on (1, the default)"},
      {"PONDER_CPU_BF16_GEMM", {"0", "1"}, "the AVX512-BF16 GEMM off (0) or on where the CPU has it (1)"},
      {"PONDER_CUDA_SYNC", {"0", "1"}, "a device synchronisation after every CUDA launch (1)"},
      {"PONDER_CUDA_TRACE_WAITS", {"0", "1"}, "report each host wait for the device (1)"},
      {"PONDER_CUDA_DUAL_UNROLL", {"1", "2", "4", "tiles", "mma"}, "the CUDA dual form's products"},
      {"PONDER_FAULT", {}, "fault injection for the crash tests (util/fault.h)"},
      {"PONDER_EXPECT_GPU", {}, "the test suites' demand for a GPU"},
      {"PONDER_SANITIZED", {}, "the test suites' sanitizer mode"},
  };
  return v;
}

std::string joined(const std::vector<std::string>& xs) {
  std::string s;
  for (const std::string& x : xs) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void check_one(const std::string& name, const std::string& value) {
  for (const Variable& v : variables()) {
    if (name != v.name) continue;
    if (name == "PONDER_FAULT") fault::parse_plan(value.c_str());  // throws naming the value
    bool ok = v.values.empty() || value.empty();                   // empty: as if unset
    for (const std::string& allowed : v.values) ok = ok || value == allowed;
    if (!ok) throw std::invalid_argument(name + "=" + value + " must be one of " + joined(v.values) + " (" + v.what + ")");
    return;
  }
  std::vector<std::string> known;
  for (const Variable& v : variables()) known.push_back(v.name);
  throw std::invalid_argument("unknown environment variable " + name + " (ponder reads " + joined(known) +
                              "); unset it or fix its name");
}

}  // namespace

void check_ponder_environment() {
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PONDER_", 7) != 0) continue;
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    check_one(entry.substr(0, eq), eq == std::string::npos ? "" : entry.substr(eq + 1));
  }
}

}  // namespace ponder::cli
