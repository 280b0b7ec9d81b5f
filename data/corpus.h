// Documents, corpora and their splits: by document (in order, or from a named document on) for flat corpora, and
// by repository, then by file inside each held-out repository, for corpora of repositories.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ponder::data {

struct Document {
  std::string name;  // e.g. "chapter 12", an article title, a path relative to the corpus root
  std::string text;
  std::string repo;  // the repository it belongs to (repository corpora), else empty
};

// One file of a corpus read from the file system (data/dir_corpus.h), included or skipped.
struct ManifestEntry {
  std::string path;     // relative to the corpus root
  std::string repo;     // top-level folder in the repository layout, else empty
  int64_t bytes = 0;
  std::string sha256;   // of the file's bytes; empty when skipped before reading
  std::string skipped;  // why it was left out ("binary", "empty", …); empty when included
};

struct Corpus {
  std::string name;            // e.g. "moby_dick", or the path it was read from
  std::vector<Document> docs;  // in source order
  std::string source;          // the file(s) it was read from, and any caveat (e.g. evaluation-only)
  std::string sha256;          // of that file, or of the manifest's canonical text (data/dir_corpus.h)
  bool repositories = false;   // documents are grouped into repositories (Document::repo)
  std::vector<ManifestEntry> manifest;  // corpora read from a folder: every file seen
};

// A held-out stream: documents read in order as one sequence whose model state carries from start to end. The
// adaptation part is read but not scored; the evaluation part is scored.
struct HeldOut {
  std::string name;             // the document's name, or the repository's
  std::vector<Document> adapt;  // read first, not scored (a held-out repository's adaptation files)
  std::vector<Document> eval;   // scored
};

struct Split {
  std::vector<Document> train, valid, test;  // valid/test: the scored documents of the held-out streams
  std::vector<HeldOut> valid_streams, test_streams;
};

// Contiguous split by document, in order: the first documents train, then valid, then the last ones test,
// so no text of a held-out document is seen in training. Counts are round(frac · n) for valid and test;
// throws std::invalid_argument when a fraction is outside [0, 1) or when any split would be empty.
// Each held-out document is a stream of its own.
Split split_by_document(const Corpus& corpus, double valid_frac, double test_frac);

// Documents named `test_from` or later in byte order of names are the test split (for a chronological split:
// names that start with a year); of the earlier ones the last round(valid_frac · n) validate and the rest train.
Split split_from_name(const Corpus& corpus, const std::string& test_from, double valid_frac);

// Repository corpora. Repositories are ordered by the sha256 of their names; the first ones train, then
// round(valid_frac · n) validate and the last round(test_frac · n) are held out for test. Inside a held-out
// repository, files are ranked by the sha256 of their paths: the first round(adapt_frac · n) are its adaptation part,
// the rest (at least one) its evaluation part; each part keeps path order. A held-out repository with a single
// file has no adaptation part. Throws when a split would hold no repository.
Split split_by_repository(const Corpus& corpus, double valid_frac, double test_frac, double adapt_frac);

// The consecutive documents of each repository in `docs` joined into one, in their order, named by the repository:
// what training windows are drawn from when they may cross a file boundary (data.train_across_files). Documents of
// one repository that are not consecutive stay apart. Throws on a document that names no repository.
std::vector<Document> join_by_repository(const std::vector<Document>& docs);

// What each document is in `split`: "train", "valid-adapt", "valid-eval", "test-adapt" or "test-eval", by name.
std::vector<std::pair<std::string, std::string>> split_roles(const Split& split);

// Total bytes of text in `docs`.
size_t total_bytes(const std::vector<Document>& docs);

}  // namespace ponder::data
