// What the fuzz targets share: a scratch file per process for the readers that take a path (checkpoints,
// journals, corpora), and the rule every target checks. A reader may refuse its input only with an exception
// derived from std::exception (the CLI turns it into one line naming the problem); anything else that leaves
// (a crash, a sanitizer report, an unexpected exception type, a hang) is a finding.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>

namespace ponder::fuzz {

inline std::string scratch_path(const char* name) {
  return "/tmp/ponder_fuzz_" + std::to_string(getpid()) + "_" + name;
}

inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
}

// Runs `f`; a std::exception is an accepted refusal, anything else aborts so libFuzzer records the input.
template <class F>
void refuse_cleanly(F&& f) {
  try {
    f();
  } catch (const std::exception&) {
  } catch (...) {
    std::fprintf(stderr, "fuzz: an exception that is not a std::exception escaped\n");
    std::abort();
  }
}

}  // namespace ponder::fuzz
