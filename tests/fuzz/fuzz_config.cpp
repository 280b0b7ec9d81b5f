// The YAML config loader (experiments/model/config.h): any bytes either parse into a config that passed every check or
// are refused with a std::exception. Seeds: configs/*.yaml.
#include "experiments/model/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  ponder::fuzz::refuse_cleanly([&] { ponder::cli::parse_config(text, "fuzz.yaml"); });
  return 0;
}
