#include "data/tokens.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ponder::data {

int64_t TokenStream::num_tokens() const {
  int64_t n = 0;
  for (const auto& d : docs) n += int64_t(d.size());
  return n;
}

TokenStream tokenize(const std::vector<Document>& docs, const ByteTokenizer& tokenizer) {
  TokenStream stream;
  stream.docs.reserve(docs.size());
  for (const Document& d : docs) stream.docs.push_back(tokenizer.encode(d.text));
  return stream;
}

double unigram_entropy_bits(const std::vector<std::vector<int32_t>>& docs) {
  std::vector<int64_t> counts;
  int64_t total = 0;
  for (const auto& doc : docs)
    for (int32_t id : doc) {
      if (id < 0) throw std::invalid_argument("unigram_entropy_bits: negative token id " + std::to_string(id));
      if (size_t(id) >= counts.size()) counts.resize(size_t(id) + 1, 0);
      ++counts[size_t(id)];
      ++total;
    }
  if (total == 0) throw std::invalid_argument("unigram_entropy_bits: the token stream is empty");
  double bits = 0.0;
  for (int64_t c : counts)
    if (c > 0) {
      double p = double(c) / double(total);
      bits -= p * std::log2(p);
    }
  return bits;
}

}  // namespace ponder::data
