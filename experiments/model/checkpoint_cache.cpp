#include "experiments/model/checkpoint_cache.h"

#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <system_error>

#include "util/sha256.h"
#include "util/files.h"

namespace ponder::cli {
namespace checkpoint_cache {
namespace {

struct Entry {
  uintmax_t size = 0;
  std::filesystem::file_time_type mtime;
  ttt::Checkpoint header;                  // tensors moved out, or never read (see `whole`)
  std::optional<ttt::Checkpoint> whole;    // the tensors, until checkpoint_for_model takes them
  std::string sha256;
};

std::map<std::string, Entry>& entries() {
  static std::map<std::string, Entry> e;
  return e;
}

int& reads() {
  static int n = 0;
  return n;
}

ttt::Checkpoint read(const std::string& path) {
  ++reads();
  return ttt::load_checkpoint(path);
}

// Everything but the tensors (whatever fields a checkpoint gains, they come along).
ttt::Checkpoint header_of(const ttt::Checkpoint& ck) {
  ttt::Checkpoint h = ck;  // the tensors' storage is shared, not copied, and dropped below
  h.params.clear();
  h.exp_avg.clear();
  h.exp_avg_sq.clear();
  return h;
}

// The entry of `path` as the file is now; a new or changed file is read (whole) into it.
Entry& entry(const std::string& path) {
  std::error_code ec;
  const std::string key = std::filesystem::weakly_canonical(path, ec).string();
  const uintmax_t size = std::filesystem::file_size(path, ec);
  const auto mtime = ec ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(path, ec);
  auto it = entries().find(key.empty() ? path : key);
  if (ec || it == entries().end() || it->second.size != size || it->second.mtime != mtime) {
    ttt::Checkpoint ck = read(path);  // throws naming the path (missing, truncated, corrupt)
    Entry e{size, mtime, header_of(ck), std::move(ck), ""};
    it = entries().insert_or_assign(key.empty() ? path : key, std::move(e)).first;
  }
  return it->second;
}

}  // namespace
}  // namespace checkpoint_cache

const ttt::Checkpoint& checkpoint_header(const std::string& path) {
  using namespace checkpoint_cache;
  return entry(path).header;
}

ttt::Checkpoint checkpoint_for_model(const std::string& path) {
  using namespace checkpoint_cache;
  Entry& e = entry(path);
  if (!e.whole) return read(path);
  ttt::Checkpoint ck = std::move(*e.whole);
  e.whole.reset();  // a model is built from it: the tensors live there, not here as well
  return ck;
}

const std::string& checkpoint_sha256(const std::string& path) {
  using namespace checkpoint_cache;
  Entry& e = entry(path);
  if (e.sha256.empty()) {
    const std::optional<std::string> bytes = util::read_file(path);
    if (!bytes) throw std::runtime_error("cannot read " + path);
    ++reads();
    e.sha256 = util::sha256_hex(*bytes);
  }
  return e.sha256;
}

int checkpoint_reads() { return checkpoint_cache::reads(); }

}  // namespace ponder::cli
