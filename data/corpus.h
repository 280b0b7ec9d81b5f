// Documents, corpora and the by-document train/valid/test split.
#pragma once
#include <string>
#include <vector>

namespace ponder::data {

struct Document {
  std::string name;  // e.g. "chapter 12", an article title, "part 7"
  std::string text;
};

struct Corpus {
  std::string name;            // e.g. "moby_dick"
  std::vector<Document> docs;  // in source order
  std::string source;          // the file(s) it was read from, and any caveat (e.g. evaluation-only)
  std::string sha256;          // of that file, for results files
};

struct Split {
  std::vector<Document> train, valid, test;
};

// Contiguous split by document, in order: the first documents train, then valid, then the last ones test,
// so no text of a held-out document is seen in training. Counts are round(frac · n) for valid and test;
// throws std::invalid_argument when a fraction is outside [0, 1) or when any split would be empty.
Split split_by_document(const Corpus& corpus, double valid_frac, double test_frac);

// Total bytes of text in `docs`.
size_t total_bytes(const std::vector<Document>& docs);

}  // namespace ponder::data
