// Folder corpora (data/dir_corpus.h) and their manifests, built from the input: its first byte picks the layout (a
// folder of documents, or of two repositories), the size cap and an extension filter; the rest, cut at 0xFF bytes,
// becomes up to four files. Binary, empty, oversized or invalid UTF-8 files must be skipped by the stated rule, or
// the load refused with a std::exception, never misread: every file seen is in the manifest exactly once, as a
// document or as a skip, and the manifest's sha256 is the corpus's. Seeds: a few source files.
#include <filesystem>
#include <string>
#include <vector>

#include "data/dir_corpus.h"
#include "util/sha256.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_corpus: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const std::string dir = ponder::fuzz::scratch_path("corpus");
  fs::remove_all(dir);
  const uint8_t mode = size > 0 ? data[0] : 0;
  const bool repos = mode & 1;
  std::vector<std::string> parts(1);
  for (size_t i = 1; i < size && parts.size() <= 4; ++i) {
    if (data[i] == 0xFF) parts.emplace_back();
    else parts.back() += char(data[i]);
  }
  const char* names[] = {"a.py", "b.txt", "sub/c.py", ".hidden.py"};
  for (size_t i = 0; i < parts.size() && i < 4; ++i) {
    const fs::path p = fs::path(dir) / (repos ? (i % 2 ? "r2" : "r1") : "") / names[i];
    fs::create_directories(p.parent_path());
    ponder::fuzz::write_bytes(p.string(), reinterpret_cast<const uint8_t*>(parts[i].data()), parts[i].size());
  }
  ponder::data::DirCorpusOptions opt;
  opt.max_file_bytes = (mode & 2) ? 16 : 1 << 20;
  if (mode & 4) opt.extensions = {".py"};
  opt.layout = (mode & 8) ? (repos ? "repositories" : "documents") : "auto";
  ponder::fuzz::refuse_cleanly([&] {
    const ponder::data::Corpus c = ponder::data::load_dir_corpus(dir, opt);
    check(!c.docs.empty(), "a corpus loaded without documents");
    for (const auto& d : c.docs) check(ponder::data::is_text(d.text) && !d.text.empty(), "a document is not text");
    check(ponder::util::sha256_hex(ponder::data::manifest_text(c)) == c.sha256, "manifest sha256 differs");
    check(c.manifest.size() >= c.docs.size(), "a document missing from the manifest");
  });
  return 0;
}
