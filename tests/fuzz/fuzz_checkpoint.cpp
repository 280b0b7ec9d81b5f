// The checkpoint reader (ttt/checkpoint_io.h): a damaged or crafted file is refused with a std::exception, never
// read out of bounds or allocated from an unchecked length. Seeds: checkpoints of the CI config (scripts/sanitize.sh).
#include "tests/fuzz/fuzz_util.h"
#include "ttt/checkpoint_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = ponder::fuzz::scratch_path("checkpoint.ckpt");
  ponder::fuzz::write_bytes(path, data, size);
  ponder::fuzz::refuse_cleanly([&] { ponder::ttt::load_checkpoint(path); });
  return 0;
}
