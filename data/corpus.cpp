#include "data/corpus.h"

#include <cmath>
#include <stdexcept>

namespace ponder::data {

Split split_by_document(const Corpus& corpus, double valid_frac, double test_frac) {
  auto check_frac = [&](double frac, const char* what) {
    if (!(frac >= 0.0 && frac < 1.0))
      throw std::invalid_argument(std::string("split_by_document: ") + what + " must be in [0, 1), got " +
                                  std::to_string(frac));
  };
  check_frac(valid_frac, "valid_frac");
  check_frac(test_frac, "test_frac");
  const auto n = static_cast<long>(corpus.docs.size());
  const long n_valid = std::lround(valid_frac * double(n));
  const long n_test = std::lround(test_frac * double(n));
  const long n_train = n - n_valid - n_test;
  if (n_train < 1 || n_valid < 1 || n_test < 1)
    throw std::invalid_argument("split_by_document: corpus '" + corpus.name + "' has " + std::to_string(n) +
                                " documents; valid_frac " + std::to_string(valid_frac) + " and test_frac " +
                                std::to_string(test_frac) + " give train/valid/test = " + std::to_string(n_train) +
                                "/" + std::to_string(n_valid) + "/" + std::to_string(n_test) +
                                " documents, and every split needs at least one");
  auto first = corpus.docs.begin();
  Split split;
  split.train.assign(first, first + n_train);
  split.valid.assign(first + n_train, first + n_train + n_valid);
  split.test.assign(first + n_train + n_valid, corpus.docs.end());
  return split;
}

size_t total_bytes(const std::vector<Document>& docs) {
  size_t bytes = 0;
  for (const Document& d : docs) bytes += d.text.size();
  return bytes;
}

}  // namespace ponder::data
