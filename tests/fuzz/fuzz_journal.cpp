// The comparison journal (experiments/process/journal.h): a damaged journal is read as far as it is whole or refused with a
// std::exception, and what it holds can be looked up. Seeds: small journals written by scripts/sanitize.sh.
#include <filesystem>

#include "experiments/process/journal.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = ponder::fuzz::scratch_path("journal.jsonl");
  ponder::fuzz::write_bytes(path, data, size);
  ponder::fuzz::refuse_cleanly([&] {
    ponder::cli::Journal j(path, nlohmann::json{{"fuzz", 1}});
    j.find("uniform-1 seed 0");
    j.find("");
  });
  std::error_code ec;
  std::filesystem::remove(path + ".stale", ec);  // another run's journal is set aside there: one at a time
  return 0;
}
