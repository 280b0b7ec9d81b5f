#include "data/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "util/files.h"
#include "util/sha256.h"

#ifndef PONDER_SOURCE_ROOT
#error "PONDER_SOURCE_ROOT must be defined by the build (data/meson.build passes meson.project_source_root())"
#endif

namespace ponder::data {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace

std::string default_data_dir() { return env_or("PONDER_DATA_DIR", std::string(PONDER_SOURCE_ROOT) + "/data"); }

std::string default_shared_dir() {
  return env_or("PONDER_SHARED_DIR", std::string(PONDER_SOURCE_ROOT) + "/../shared");
}

std::string read_verified(const std::string& path, const std::string& expected_sha256,
                          const std::string& missing_hint) {
  std::optional<std::string> read = util::read_file(path);
  if (!read) throw std::runtime_error("cannot open '" + path + "': " + missing_hint);
  std::string bytes = std::move(*read);
  std::string actual = util::sha256_hex(bytes);
  if (actual != expected_sha256)
    throw std::runtime_error("sha256 mismatch for '" + path + "': expected " + expected_sha256 + ", got " + actual +
                             " (the file is corrupt or not the version this project was built for)");
  return bytes;
}

}  // namespace ponder::data
