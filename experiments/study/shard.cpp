#include "experiments/study/shard.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>

#include "experiments/process/command_line.h"
#include "experiments/process/journal.h"
#include "tensor/dist.h"
#include "util/files.h"

namespace ponder::cli {
namespace {

namespace fs = std::filesystem;

bool& whole_run() {
  static bool on = false;
  return on;
}

// A count in 0..2^24 written in decimal digits only, or nullopt.
std::optional<int> digits(const std::string& s) {
  if (s.empty() || s.size() > 8 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(s);
}

// Every journal under `dir`, by its path relative to `dir`.
std::vector<std::string> journals_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() == "journal.jsonl")
      out.push_back(fs::relative(e.path(), dir).string());
  return out;
}

// The manifests of `dirs`, checked to be the n finished shards of one command, each once.
std::vector<ShardManifest> check_shards(const std::vector<std::string>& dirs, const std::string& out) {
  if (dirs.empty()) throw std::invalid_argument("merge: name the shards' folders");
  std::vector<ShardManifest> ms;
  for (const std::string& d : dirs) {
    if (fs::exists(out) && fs::exists(d) && fs::equivalent(d, out))
      throw std::invalid_argument("merge: --out '" + out + "' is one of the shards' folders; merge into another");
    ms.push_back(read_manifest(d));
  }
  const ShardManifest& first = ms[0];
  std::vector<std::string> holder(size_t(first.shard.count));
  for (size_t i = 0; i < ms.size(); ++i) {
    const ShardManifest& m = ms[i];
    if (m.command != first.command || m.args != first.args)
      throw std::invalid_argument("merge: '" + dirs[0] + "' and '" + dirs[i] + "' are shards of different runs: '" +
                                  joined_command(first.args) + "' and '" + joined_command(m.args) + "'");
    if (m.shard.count != first.shard.count)
      throw std::invalid_argument("merge: '" + dirs[0] + "' is shard " + first.shard.text() + " and '" + dirs[i] +
                                  "' is shard " + m.shard.text() + ": the shards of one run share their n");
    std::string& who = holder[size_t(m.shard.index)];
    if (!who.empty())
      throw std::invalid_argument("merge: '" + who + "' and '" + dirs[i] + "' are both shard " + m.shard.text());
    who = dirs[i];
    if (!m.finished)
      throw std::invalid_argument("merge: '" + dirs[i] + "' (shard " + m.shard.text() + ") has not finished; run its "
                                  "command again to complete it (finished cells are kept), then merge");
  }
  for (size_t i = 0; i < holder.size(); ++i)
    if (holder[i].empty())
      throw std::invalid_argument("merge: shard " + Shard{int(i), first.shard.count}.text() + " is missing: every one "
                                  "of the " + std::to_string(first.shard.count) + " shards' folders is needed");
  return ms;
}

// The records of every shard's journal at `rel`, checked to come from one run and to agree where they overlap.
JournalContents gather(const std::vector<std::string>& dirs, const std::string& rel) {
  std::optional<JournalContents> all;
  std::string first;
  for (const std::string& d : dirs) {
    const std::string path = (fs::path(d) / rel).string();
    if (!fs::exists(path)) continue;
    JournalContents j = read_journal(path);
    if (!all) {
      all = std::move(j);
      first = path;
      continue;
    }
    if (j.fingerprint != all->fingerprint)
      throw std::invalid_argument("merge: '" + first + "' and '" + path + "' come from different runs (another ponder "
                                  "build, checkpoint, config or command): their journals' fingerprints differ");
    for (auto& [key, record] : j.records) {
      const auto [it, added] = all->records.emplace(key, record);
      if (!added && it->second != record)
        throw std::invalid_argument("merge: cell '" + key + "' differs between '" + first + "' and '" + path + "'");
    }
  }
  return *all;
}

}  // namespace

Shard parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const std::optional<int> i = slash == std::string::npos ? std::nullopt : digits(text.substr(0, slash));
  const std::optional<int> n = slash == std::string::npos ? std::nullopt : digits(text.substr(slash + 1));
  if (!i || !n)
    throw std::invalid_argument("--shard " + text + ": expected i/n, shard i of n counted from 0 (e.g. 0/4)");
  if (*n < 1) throw std::invalid_argument("--shard " + text + ": n must be at least 1");
  if (*i >= *n)
    throw std::invalid_argument("--shard " + text + ": the shard index must lie in 0.." + std::to_string(*n - 1) +
                                " (shards are counted from 0)");
  return {*i, *n};
}

CellShare cell_share(const Shard& shard, int64_t model, int64_t cells_per_model) {
  return {shard.index, shard.count, model * cells_per_model};
}

ScopedWholeRun::ScopedWholeRun() { whole_run() = true; }
ScopedWholeRun::~ScopedWholeRun() { whole_run() = false; }

Shard this_shard(const std::string& flag, const std::string& label) {
  const bool ranks = !whole_run() && dist::launched() && dist::launcher_size() != 1;
  if (!flag.empty()) {
    if (ranks)  // every rank sees it: said once
      throw dist::SharedError(label + ": --shard " + flag + " and mpirun both split the cells: use one of them "
                                  "(under mpirun -np N each rank computes its own shard)");
    return parse_shard(flag);
  }
  if (!ranks) return {};
  dist::init();
  return {dist::rank(), dist::size()};
}

std::string rank_shard_dir(const std::string& out, const Shard& shard) {
  return (fs::path(out) / ("shard-" + std::to_string(shard.index) + "-of-" + std::to_string(shard.count))).string();
}

void write_manifest(const std::string& dir, const ShardManifest& m) {
  fs::create_directories(dir);
  const nlohmann::ordered_json j = {{"ponder_shard", {{"index", m.shard.index}, {"count", m.shard.count}}},
                                    {"command", m.command}, {"args", m.args}, {"finished", m.finished}};
  util::write_atomically((fs::path(dir) / "shard.json").string(), j.dump(1) + "\n");
}

ShardManifest read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / "shard.json").string();
  const std::optional<std::string> text = util::read_file(path);
  if (!text)
    throw std::invalid_argument("merge: '" + dir + "' holds no shard.json: it is not a folder written by ponder "
                                "compare or ablate with --shard i/n (or under mpirun)");
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  ShardManifest m;
  try {
    m.shard = {j.at("ponder_shard").at("index").get<int>(), j.at("ponder_shard").at("count").get<int>()};
    m.command = j.at("command").get<std::string>();
    m.args = j.at("args").get<std::vector<std::string>>();
    m.finished = j.at("finished").get<bool>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("merge: '" + path + "' is damaged (not a shard manifest)");
  }
  if (m.shard.count < 1 || m.shard.index < 0 || m.shard.index >= m.shard.count)
    throw std::invalid_argument("merge: '" + path + "' names shard " + m.shard.text() + ", which cannot be");
  return m;
}

ShardManifest merge_shard_journals(const std::vector<std::string>& dirs, const std::string& out) {
  const std::vector<ShardManifest> ms = check_shards(dirs, out);
  util::lock_output_dir(out);  // after the checks: a refused merge writes nothing
  std::map<std::string, bool> rels;
  for (const std::string& d : dirs)
    for (const std::string& rel : journals_in(d)) rels[rel] = true;
  size_t cells = 0;
  for (const auto& [rel, unused] : rels) {
    const JournalContents all = gather(dirs, rel);
    const std::string path = (fs::path(out) / rel).string();
    fs::create_directories(fs::path(path).parent_path());
    Journal j(path, all.fingerprint);  // an earlier merge's records of the same run are kept
    for (const auto& [key, record] : all.records)
      if (!j.find(key)) j.add(key, record);
    cells += all.records.size();
  }
  std::fprintf(stderr, "merge: %zu shards, %zu journal(s), %zu records\n", dirs.size(), rels.size(), cells);
  return ms[0];
}

}  // namespace ponder::cli
