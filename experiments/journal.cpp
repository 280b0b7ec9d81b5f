#include "experiments/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "data/files.h"
#include "data/sha256.h"
#include "util/fault.h"

namespace ponder::cli {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error("journal " + path + ": " + what + ": " + std::strerror(errno));
}

// What a record line's sha256 covers: its key and its record as written. A record edited by hand, or damaged
// on disk in a way that still parses, no longer matches and is dropped instead of changing the results.
std::string record_digest(const std::string& key, const nlohmann::json& record) {
  return data::sha256_hex(key + "\n" + record.dump());
}

}  // namespace

Journal::Journal(std::string path, const nlohmann::json& fingerprint) : path_(std::move(path)) {
  const std::string text = data::read_file(path_).value_or("");  // no file yet: a new journal
  // Complete lines only: one without its newline was cut short by an interruption.
  std::vector<std::string> lines;
  size_t good_end = 0;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(text.substr(at, nl - at));
    good_end = nl + 1;
  }
  const nlohmann::json head = lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines[0], nullptr, false);
  if (!head.is_object() || head.value("fingerprint", nlohmann::json()) != fingerprint) {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    append_line(nlohmann::json{{"journal", "ponder"}, {"fingerprint", fingerprint}}.dump());
    return;
  }
  std::vector<size_t> dropped;  // 1-based line numbers of damaged or altered records
  std::string kept = lines[0] + "\n";
  for (size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json line = nlohmann::json::parse(lines[i], nullptr, false);
    const bool whole = line.is_object() && line.contains("key") && line["key"].is_string() &&
                       line.contains("record") && line.contains("sha256") &&
                       line["sha256"] == record_digest(line["key"].get<std::string>(), line["record"]);
    if (!whole) { dropped.push_back(i + 1); continue; }
    records_[line["key"].get<std::string>()] = line["record"];
    kept += lines[i] + "\n";
  }
  reused_ = records_.size();
  if (!dropped.empty()) {
    std::string which;
    for (size_t n : dropped) which += (which.empty() ? "" : ", ") + std::to_string(n);
    std::fprintf(stderr, "journal %s: dropped %zu damaged or altered record(s) (line %s); those cells run again\n",
                 path_.c_str(), dropped.size(), which.c_str());
    data::write_atomically(path_, kept);  // what is appended next starts after the records kept
  } else if (good_end < text.size()) {
    std::filesystem::resize_file(path_, good_end);  // the torn tail, so the next record starts on a line of its own
  }
}

const nlohmann::json* Journal::find(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

void Journal::add(const std::string& key, const nlohmann::json& record) {
  if (!enabled()) return;
  append_line(nlohmann::json{{"key", key}, {"record", record}, {"sha256", record_digest(key, record)}}.dump());
  records_[key] = record;
}

void Journal::append_line(const std::string& line) const {
  const std::string text = line + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("cannot open for appending", path_);
  fault::point("journal.half", [&] {  // a torn line, as a kill inside write(2) leaves it
    if (::write(fd, text.data(), text.size() / 2) > 0) ::fsync(fd);
  });
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw io_error("write failed", path_);
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    throw io_error("fsync failed", path_);
  }
  ::close(fd);
  fault::point("journal.line");
}

void Journal::remove() {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace ponder::cli
