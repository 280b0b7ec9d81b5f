#include "data/files.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/sha256.h"

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

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error("error while reading '" + path + "'");
  return std::move(buffer).str();
}

std::string read_verified(const std::string& path, const std::string& expected_sha256,
                          const std::string& missing_hint) {
  std::optional<std::string> read = read_file(path);
  if (!read) throw std::runtime_error("cannot open '" + path + "': " + missing_hint);
  std::string bytes = std::move(*read);
  std::string actual = sha256_hex(bytes);
  if (actual != expected_sha256)
    throw std::runtime_error("sha256 mismatch for '" + path + "': expected " + expected_sha256 + ", got " + actual +
                             " (the file is corrupt or not the version this project was built for)");
  return bytes;
}

void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write '" + tmp + "' (disk full or read-only?)");
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace ponder::data
