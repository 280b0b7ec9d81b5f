// The name parsers a config or command line feeds: comparison methods (policy/methods.h) and eval schedules
// (ttt/eval.h), one name per input line. Seeds: the method and schedule names the configs use.
#include <sstream>

#include "policy/methods.h"
#include "tests/fuzz/fuzz_util.h"
#include "ttt/eval.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);) {
    ponder::fuzz::refuse_cleanly([&] {
      const ponder::policy::MethodSpec m = ponder::policy::parse_method(line);
      ponder::policy::make_schedule(m, 1.0, {0, 1, 2, 4});
    });
    ponder::fuzz::refuse_cleanly([&] { ponder::ttt::make_schedule(line); });
  }
  return 0;
}
