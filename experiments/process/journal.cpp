#include "experiments/process/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <vector>

#include "util/sha256.h"
#include "util/fault.h"
#include "util/files.h"

namespace ponder::cli {
namespace {

std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error("journal " + path + ": " + what + ": " + std::strerror(errno));
}

// What a record line's sha256 covers: its key and its record as written. A record edited by hand, or damaged
// on disk in a way that still parses, no longer matches and is dropped instead of changing the results.
std::string record_digest(const std::string& key, const nlohmann::json& record) {
  return util::sha256_hex(key + "\n" + record.dump());
}

}  // namespace

namespace {

// A journal file's text: its complete lines (one without its newline was cut short by an interruption), its head, and
// the records whose sha256 matches (the 1-based numbers of the others in `dropped`).
struct Parsed {
  size_t good_end = 0;  // bytes up to the end of the last complete line
  nlohmann::json head;
  std::map<std::string, nlohmann::json> records;
  std::vector<size_t> dropped;
  std::string kept;  // the head line and the records kept, as they were written
};

Parsed parse(const std::string& text) {
  Parsed p;
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    lines.push_back(text.substr(at, nl - at));
    p.good_end = nl + 1;
  }
  if (lines.empty()) return p;
  p.head = nlohmann::json::parse(lines[0], nullptr, false);
  p.kept = lines[0] + "\n";
  for (size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json line = nlohmann::json::parse(lines[i], nullptr, false);
    const bool whole = line.is_object() && line.contains("key") && line["key"].is_string() &&
                       line.contains("record") && line.contains("sha256") &&
                       line["sha256"] == record_digest(line["key"].get<std::string>(), line["record"]);
    if (!whole) { p.dropped.push_back(i + 1); continue; }
    p.records[line["key"].get<std::string>()] = line["record"];
    p.kept += lines[i] + "\n";
  }
  return p;
}

// Which fields of the run's fingerprint differ between a journal on disk and this run: "binary_sha256, command".
std::string differing_fields(const nlohmann::json& head, const nlohmann::json& fingerprint) {
  if (!head.is_object() || !head.contains("fingerprint")) return "it is not a ponder journal";
  const nlohmann::json& old = head["fingerprint"];
  if (!old.is_object() || !fingerprint.is_object()) return "its fingerprint differs";
  std::string fields;
  for (const auto& [key, value] : fingerprint.items())
    if (!old.contains(key) || old[key] != value) fields += (fields.empty() ? "" : ", ") + key;
  for (const auto& [key, value] : old.items())
    if (!fingerprint.contains(key)) fields += (fields.empty() ? "" : ", ") + key;
  return "its " + (fields.empty() ? std::string("fingerprint") : fields) + " differ" + (fields.find(',') == std::string::npos ? "s" : "");
}

// A name beside `path` that no file has yet: path.stale, path.stale.1, ...
std::string stale_name(const std::string& path) {
  std::error_code ec;
  std::string name = path + ".stale";
  for (int i = 1; std::filesystem::exists(name, ec); ++i) name = path + ".stale." + std::to_string(i);
  return name;
}

bool& strict_journals() {
  static bool strict = false;
  return strict;
}

std::string line_list(const std::vector<size_t>& numbers) {
  std::string which;
  for (size_t n : numbers) which += (which.empty() ? "" : ", ") + std::to_string(n);
  return which;
}

}  // namespace

Journal::Journal(std::string path, const nlohmann::json& fingerprint) : path_(std::move(path)) {
  const std::string text = util::read_file(path_).value_or("");  // no file yet: a new journal
  Parsed p = parse(text);
  if (!p.head.is_object() || p.head.value("fingerprint", nlohmann::json()) != fingerprint) {
    if (!text.empty()) {  // another run's journal: kept, never silently deleted
      const std::string why = differing_fields(p.head, fingerprint);
      if (strict_journals())
        throw std::runtime_error("journal " + path_ + " was written by another run (" + why + "): its cells would "
                                 "all be computed again; merge shards made by this build and command");
      const std::string kept = stale_name(path_);
      std::filesystem::rename(path_, kept);
      std::fprintf(stderr, "journal %s: from another run (%s); kept as %s, and its cells run again\n", path_.c_str(),
                   why.c_str(), kept.c_str());
    }
    append_line(nlohmann::json{{"journal", "ponder"}, {"fingerprint", fingerprint}}.dump());
    return;
  }
  records_ = std::move(p.records);
  reused_ = records_.size();
  if (!p.dropped.empty()) {
    std::fprintf(stderr, "journal %s: dropped %zu damaged or altered record(s) (line %s); those cells run again\n",
                 path_.c_str(), p.dropped.size(), line_list(p.dropped).c_str());
    util::write_atomically(path_, p.kept);  // what is appended next starts after the records kept
  } else if (p.good_end < text.size()) {
    std::filesystem::resize_file(path_, p.good_end);  // the torn tail, so the next record starts on a line of its own
  }
}

void require_matching_journals(bool on) { strict_journals() = on; }

JournalContents read_journal(const std::string& path) {
  const std::optional<std::string> text = util::read_file(path);
  if (!text) throw std::runtime_error("cannot read the journal '" + path + "'");
  Parsed p = parse(*text);
  if (!p.head.is_object() || !p.head.contains("fingerprint"))
    throw std::runtime_error("'" + path + "' is not a ponder journal (its first line holds no fingerprint)");
  if (!p.dropped.empty())
    std::fprintf(stderr, "journal %s: %zu damaged or altered record(s) left out (line %s); those cells run again\n",
                 path.c_str(), p.dropped.size(), line_list(p.dropped).c_str());
  return {p.head["fingerprint"], std::move(p.records)};
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
