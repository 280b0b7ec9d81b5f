#include "data/dir_corpus.h"

#include <algorithm>
#include <map>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "util/sha256.h"
#include "util/files.h"

namespace ponder::data {
namespace fs = std::filesystem;
namespace {

bool hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

// Entries of `dir` in byte order of their names (directory_iterator's order is unspecified).
std::vector<fs::directory_entry> sorted_entries(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::runtime_error("cannot read the folder '" + dir.string() + "': " + ec.message());
  std::vector<fs::directory_entry> out(it, fs::directory_iterator());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  return out;
}

bool wanted_suffix(const fs::path& p, const std::vector<std::string>& extensions) {
  if (extensions.empty()) return true;
  const std::string ext = p.extension().string();
  return std::find(extensions.begin(), extensions.end(), ext) != extensions.end();
}

class Walker {
 public:
  Walker(const fs::path& root, const DirCorpusOptions& opt, Corpus& out) : root_(root), opt_(opt), out_(out) {}

  // Every file under `dir` (recursively, in byte order of names) as a document of `repo`.
  void walk(const fs::path& dir, const std::string& repo) {
    for (const fs::directory_entry& e : sorted_entries(dir)) {
      const fs::path& p = e.path();
      if (hidden(p)) {
        skip(p, repo, 0, "hidden");
      } else if (e.is_symlink()) {
        skip(p, repo, 0, "symlink");
      } else if (e.is_directory()) {
        walk(p, repo);
      } else if (e.is_regular_file()) {
        file(p, repo);
      } else {
        skip(p, repo, 0, "not a regular file");
      }
    }
  }

  void file(const fs::path& p, const std::string& repo) {
    std::error_code ec;
    const int64_t size = int64_t(fs::file_size(p, ec));
    if (ec) throw std::runtime_error("cannot read the size of '" + p.string() + "': " + ec.message());
    if (!wanted_suffix(p, opt_.extensions)) return skip(p, repo, size, "extension");
    if (size > opt_.max_file_bytes) return skip(p, repo, size, "over size cap");
    if (size == 0) return skip(p, repo, 0, "empty");
    std::optional<std::string> bytes = util::read_file(p.string());
    if (!bytes) throw std::runtime_error("cannot open '" + p.string() + "'");
    ManifestEntry m{relative(p), repo, int64_t(bytes->size()), util::sha256_hex(*bytes), ""};
    if (!is_text(*bytes)) {
      m.skipped = "binary";
      out_.manifest.push_back(m);
      return;
    }
    out_.manifest.push_back(m);
    out_.docs.push_back({m.path, std::move(*bytes), repo});
  }

 private:
  std::string relative(const fs::path& p) const {
    return root_ == p ? p.filename().string() : p.lexically_relative(root_).generic_string();
  }
  void skip(const fs::path& p, const std::string& repo, int64_t size, const std::string& why) {
    out_.manifest.push_back({relative(p), repo, size, "", why});
  }

  fs::path root_;
  const DirCorpusOptions& opt_;
  Corpus& out_;
};

std::string skip_summary(const Corpus& c) {
  std::map<std::string, int> counts;
  for (const ManifestEntry& m : c.manifest)
    if (!m.skipped.empty()) ++counts[m.skipped];
  std::string s;
  for (const auto& [why, n] : counts) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + why;
  return s.empty() ? "no files" : "skipped: " + s;
}

}  // namespace

bool is_text(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    // Lead byte: how many continuation bytes follow (a stray continuation byte or 0xF8+ is not UTF-8).
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + size_t(extra) >= s.size() + size_t(extra == 0)) return false;  // truncated sequence
    uint32_t cp = extra == 0 ? c : c & (0x3Fu >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not valid UTF-8.
    const uint32_t min_of[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_of[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += size_t(extra) + 1;
  }
  return true;
}

Corpus load_dir_corpus(const std::string& path, const DirCorpusOptions& opt) {
  if (opt.layout != "auto" && opt.layout != "documents" && opt.layout != "repositories")
    throw std::invalid_argument("layout must be auto, documents or repositories, got '" + opt.layout + "'");
  if (opt.max_file_bytes < 1)
    throw std::invalid_argument("max_file_bytes must be positive, got " + std::to_string(opt.max_file_bytes));
  const fs::path root(path);
  std::error_code ec;
  const fs::file_status st = fs::status(root, ec);
  if (ec || !fs::exists(st)) throw std::runtime_error("corpus path '" + path + "' does not exist");
  Corpus c;
  c.name = path;
  Walker w(root, opt, c);
  if (fs::is_regular_file(st)) {
    w.file(root, "");
  } else if (fs::is_directory(st)) {
    std::vector<fs::directory_entry> top;
    for (const fs::directory_entry& e : sorted_entries(root))
      if (!hidden(e.path())) top.push_back(e);
    auto is_folder = [](const fs::directory_entry& e) { return e.is_directory() && !e.is_symlink(); };
    c.repositories = opt.layout == "repositories" ||
                     (opt.layout == "auto" && !top.empty() && std::all_of(top.begin(), top.end(), is_folder));
    if (!c.repositories) {
      w.walk(root, "");
    } else {
      for (const fs::directory_entry& e : top) {
        const std::string repo = e.path().filename().string();
        if (!is_folder(e))
          c.manifest.push_back({repo, "", 0, "", "top-level file"});
        else if (std::find(opt.exclude_repos.begin(), opt.exclude_repos.end(), repo) != opt.exclude_repos.end())
          c.manifest.push_back({repo + "/", repo, 0, "", "excluded"});
        else
          w.walk(e.path(), repo);
      }
    }
  } else {
    throw std::runtime_error("corpus path '" + path + "' is neither a file nor a folder");
  }
  if (c.docs.empty())
    throw std::runtime_error("corpus path '" + path + "' holds no usable document (" + skip_summary(c) + ")");
  c.sha256 = util::sha256_hex(manifest_text(c));
  c.source = path + " (" + std::string(c.repositories ? "repository" : "document") + " layout, " +
             std::to_string(c.docs.size()) + " documents, manifest sha256 " + c.sha256 + ")";
  return c;
}

std::string manifest_text(const Corpus& c) {
  std::string s;
  for (const ManifestEntry& m : c.manifest)
    if (m.skipped.empty()) s += m.repo + "\t" + m.path + "\t" + std::to_string(m.bytes) + "\t" + m.sha256 + "\n";
  for (const ManifestEntry& m : c.manifest)
    if (!m.skipped.empty()) s += "skipped\t" + m.path + "\t" + m.skipped + "\n";
  return s;
}

}  // namespace ponder::data
