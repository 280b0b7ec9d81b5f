#include "experiments/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "data/files.h"

namespace ponder::cli {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error("journal " + path + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

Journal::Journal(std::string path, const nlohmann::json& fingerprint) : path_(std::move(path)) {
  const std::string text = data::read_file(path_).value_or("");  // no file yet: a new journal
  // Complete lines only: one without its newline was cut short by an interruption.
  std::vector<nlohmann::json> lines;
  size_t good_end = 0;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    nlohmann::json line = nlohmann::json::parse(text.substr(at, nl - at), nullptr, false);
    if (line.is_discarded() || !line.is_object()) break;
    lines.push_back(std::move(line));
    good_end = nl + 1;
  }
  if (!lines.empty() && lines[0].value("fingerprint", nlohmann::json()) == fingerprint) {
    for (size_t i = 1; i < lines.size(); ++i)
      if (lines[i].contains("key") && lines[i].contains("record"))
        records_[lines[i]["key"].get<std::string>()] = std::move(lines[i]["record"]);
    reused_ = records_.size();
    // Drop the torn tail, so the records appended next start on a line of their own.
    if (good_end < text.size()) std::filesystem::resize_file(path_, good_end);
    return;
  }
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  append_line(nlohmann::json{{"journal", "ponder"}, {"fingerprint", fingerprint}}.dump());
}

const nlohmann::json* Journal::find(const std::string& key) const {
  auto it = records_.find(key);
  return it == records_.end() ? nullptr : &it->second;
}

void Journal::add(const std::string& key, const nlohmann::json& record) {
  if (!enabled()) return;
  append_line(nlohmann::json{{"key", key}, {"record", record}}.dump());
  records_[key] = record;
}

void Journal::append_line(const std::string& line) const {
  const std::string text = line + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("cannot open for appending", path_);
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
}

void Journal::remove() {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace ponder::cli
