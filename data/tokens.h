// A split as token ids, one sequence per document (boundaries kept), and its unigram entropy: the bits per
// token of the best context-free model, the bar a trained language model has to clear.
#pragma once
#include <cstdint>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/corpus.h"

namespace ponder::data {

struct TokenStream {
  std::vector<std::vector<int32_t>> docs;
  int64_t num_tokens() const;
};

TokenStream tokenize(const std::vector<Document>& docs, const ByteTokenizer& tokenizer = {});

// Entropy in bits of the empirical token distribution over all of `docs`; throws std::invalid_argument when
// there are no tokens or an id is negative.
double unigram_entropy_bits(const std::vector<std::vector<int32_t>>& docs);

}  // namespace ponder::data
