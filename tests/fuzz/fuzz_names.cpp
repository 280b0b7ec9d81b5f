// The name parsers a config or command line feeds: comparison methods (methods/registry.h) and eval schedules
// (ttt/eval.h), one name per input line. Seeds: the method and schedule names the configs use.
#include <sstream>

#include "methods/registry.h"
#include "tests/fuzz/fuzz_util.h"
#include "ttt/eval.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);) {
    ponder::fuzz::refuse_cleanly([&] {
      const ponder::methods::MethodSpec m = ponder::methods::parse_method(line);
      ponder::methods::schedule_policy(m, 1.0, {0, 1, 2, 4});
    });
    ponder::fuzz::refuse_cleanly([&] { ponder::ttt::make_schedule(ponder::ttt::parse_schedule(line)); });
  }
  return 0;
}
