// A crash-safe record of the finished cells of a long run (a comparison's method × seed results, its
// methods' calibration and training, its oracle frontier), so that running the same command again after an
// interruption reuses them instead of computing them again. The runs are deterministic, so a reused
// cell equals a recomputed one.
//
// One JSON object per line: the first holds the fingerprint of the run (code, command line, model,
// config); each later one a record with its key and the sha256 of both. Every line is written and fsync'ed on its
// own, so an interruption loses at most the cell in progress; a torn last line is cut off when the file is opened,
// and a record that is damaged or was edited (its sha256 no longer matches) is dropped with a warning naming its
// line, so its cell is computed again rather than trusted.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace ponder::cli {

class Journal {
 public:
  Journal() = default;  // disabled: finds nothing, records nothing
  // Opens `path`. Its records are reused only when its first line holds `fingerprint`; otherwise it is kept as
  // path.stale (saying on stderr which fields of the fingerprint differ) and a new journal started, or, under
  // require_matching_journals, that is an error.
  Journal(std::string path, const nlohmann::json& fingerprint);

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // The record stored under `key`, or null.
  const nlohmann::json* find(const std::string& key) const;
  // Stores `record` under `key` and makes it durable before returning.
  void add(const std::string& key, const nlohmann::json& record);
  // How many records came from an earlier run.
  size_t reused() const { return reused_; }
  // Deletes the file: the run's results are written, so there is nothing left to resume.
  void remove();

 private:
  void append_line(const std::string& line) const;
  std::string path_;
  std::map<std::string, nlohmann::json> records_;
  size_t reused_ = 0;
};

// Reads the record `rec` stored under `key` with `read`. A record whose sha256 holds but that lacks a field this build
// reads (written by another build, or crafted) is an error naming the journal and the key, not a raw JSON exception.
template <class F>
auto read_record(const Journal& j, const std::string& key, const nlohmann::json& rec, F&& read) -> decltype(read(rec)) {
  try {
    return read(rec);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("journal " + j.path() + ": the record '" + key + "' lacks what this build reads (" +
                             e.what() + "); delete the journal to compute its cells again");
  }
}

// From now on a journal on disk whose fingerprint differs from its run's is an error rather than set aside: ponder
// merge turns it on, so merged shards are reused or refused, never silently recomputed.
void require_matching_journals(bool on);

// A journal's fingerprint and intact records as they are on disk, the file left as it is (ponder merge reads each
// shard's this way); a damaged or altered record is left out with a warning, so its cell is computed again. Throws
// naming `path` when it cannot be read or is not a journal.
struct JournalContents {
  nlohmann::json fingerprint;
  std::map<std::string, nlohmann::json> records;
};
JournalContents read_journal(const std::string& path);

}  // namespace ponder::cli
