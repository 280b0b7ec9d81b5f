// A folder corpus (data/dir_corpus.h) of one file holding the input: binary, empty, oversized or invalid UTF-8
// text is skipped or refused by the stated rule with a std::exception, never misread. Seeds: a few source files.
#include <filesystem>

#include "data/dir_corpus.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = ponder::fuzz::scratch_path("corpus");
  std::filesystem::create_directories(dir);
  ponder::fuzz::write_bytes(dir + "/doc.txt", data, size);
  ponder::fuzz::refuse_cleanly([&] { ponder::data::load_dir_corpus(dir); });
  return 0;
}
