// A split as token ids, one sequence per document (boundaries kept), and its unigram entropy: the bits per
// token of the best context-free model, the bar a trained language model has to clear.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/corpus.h"

namespace ponder::data {

struct TokenStream {
  std::vector<std::vector<int32_t>> docs;
  int64_t num_tokens() const;
};

TokenStream tokenize(const std::vector<Document>& docs, const ByteTokenizer& tokenizer = {});

// A held-out stream as tokens: its documents (adaptation part, then evaluation part) concatenated in order. The
// prediction of tokens[t] is scored for t ≥ first_scored; first_scored ≥ 1 since the first token has no context.
struct StreamTokens {
  std::string name;
  std::vector<int32_t> tokens;
  int64_t first_scored = 1;
  // Where each document after the first begins: ascending offsets into tokens, each in (0, size). Empty: the stream
  // is one document (or its documents are not known). What split_at_documents cuts at.
  std::vector<int64_t> doc_starts = {};
  int64_t scored() const { return std::max<int64_t>(0, int64_t(tokens.size()) - first_scored); }
};
std::vector<StreamTokens> tokenize_streams(const std::vector<HeldOut>& streams, const ByteTokenizer& tokenizer = {});
// `s` shortened for a quick look: at most the last `max_adapt` tokens of its unscored part (those right before the
// scored part) and at most the first `max_scored` scored tokens; 0 leaves a part whole.
StreamTokens cap_stream(const StreamTokens& s, int64_t max_adapt, int64_t max_scored);
// The scored part of `s` cut into consecutive segments of `max_scored` tokens, each read after at most the `max_adapt`
// tokens right before it (adaptation files or earlier scored text; 0: everything before), so that every scored token
// is scored exactly once with a bounded context; `max_segments` > 0 keeps only that many, evenly spaced from the first.
// max_scored = 0 gives one segment, the whole scored part. Segment j of a stream cut in several is named "<name>#j".
// With max_segments = 1 the result is cap_stream(s, max_adapt, max_scored).
std::vector<StreamTokens> segment_stream(const StreamTokens& s, int64_t max_adapt, int64_t max_scored,
                                         int64_t max_segments);
// `s` read with its state reset at every document's start: one stream per document that holds a scored token, named
// "<name>/<j>" for the stream's j-th document. Each begins with the token right before its document (the previous
// document's last, as input only; none for the stream's first document), so every prediction `s` scores is scored by
// exactly one piece, and from the same input token; before the first scored token a piece reads its document from
// its start, unscored. A stream without doc_starts gives itself.
std::vector<StreamTokens> split_at_documents(const StreamTokens& s);
// Scored tokens over all streams.
int64_t scored_tokens(const std::vector<StreamTokens>& streams);
// Tokens over all streams, scored or not: what reading them costs (progress weights).
double stream_tokens(const std::vector<StreamTokens>& streams);

// Entropy in bits of the empirical token distribution over all of `docs`; throws std::invalid_argument when
// there are no tokens or an id is negative.
double unigram_entropy_bits(const std::vector<std::vector<int32_t>>& docs);

}  // namespace ponder::data
