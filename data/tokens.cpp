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

namespace {

// A document's tokens appended to `s`, its start recorded (an empty document starts nothing).
void append_document(StreamTokens& s, const std::vector<int32_t>& ids) {
  if (ids.empty()) return;
  if (!s.tokens.empty()) s.doc_starts.push_back(int64_t(s.tokens.size()));
  s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
}

// The document starts of `s` inside tokens [from, to), as offsets from `from` (a start at `from` is the cut's own).
std::vector<int64_t> starts_within(const StreamTokens& s, int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t a : s.doc_starts)
    if (a > from && a < to) out.push_back(a - from);
  return out;
}

}  // namespace

std::vector<StreamTokens> tokenize_streams(const std::vector<HeldOut>& streams, const ByteTokenizer& tokenizer) {
  std::vector<StreamTokens> out;
  for (const HeldOut& h : streams) {
    StreamTokens s{h.name, {}, 1};
    for (const Document& d : h.adapt) append_document(s, tokenizer.encode(d.text));
    s.first_scored = std::max<int64_t>(1, int64_t(s.tokens.size()));
    for (const Document& d : h.eval) append_document(s, tokenizer.encode(d.text));
    out.push_back(std::move(s));
  }
  return out;
}

StreamTokens cap_stream(const StreamTokens& s, int64_t max_adapt, int64_t max_scored) {
  const int64_t n = int64_t(s.tokens.size());
  const int64_t unscored = std::min(n, s.first_scored);  // tokens before the first scored one (incl. token 0)
  const int64_t from = max_adapt > 0 ? std::max<int64_t>(0, unscored - std::max<int64_t>(1, max_adapt)) : 0;
  const int64_t to = max_scored > 0 ? std::min(n, unscored + max_scored) : n;
  StreamTokens out{s.name, std::vector<int32_t>(s.tokens.begin() + from, s.tokens.begin() + to), unscored - from,
                   starts_within(s, from, to)};
  return out;
}

std::vector<StreamTokens> segment_stream(const StreamTokens& s, int64_t max_adapt, int64_t max_scored,
                                         int64_t max_segments) {
  const int64_t n = int64_t(s.tokens.size()), unscored = std::min(n, s.first_scored), scored = n - unscored;
  if (max_scored <= 0 || scored <= max_scored) return {cap_stream(s, max_adapt, max_scored)};
  const int64_t count = (scored + max_scored - 1) / max_scored;
  const int64_t keep = max_segments > 0 ? std::min(count, max_segments) : count;
  std::vector<StreamTokens> out;
  for (int64_t i = 0; i < keep; ++i) {
    const int64_t j = i * count / keep;  // evenly spaced, distinct because keep <= count
    const int64_t start = unscored + j * max_scored, end = std::min(n, start + max_scored);
    const int64_t from = max_adapt > 0 ? std::max<int64_t>(0, start - std::max<int64_t>(1, max_adapt)) : 0;
    out.push_back({s.name + "#" + std::to_string(j), std::vector<int32_t>(s.tokens.begin() + from, s.tokens.begin() + end),
                   start - from, starts_within(s, from, end)});
  }
  if (keep == 1) out.front().name = s.name;  // what cap_stream gives
  return out;
}

std::vector<StreamTokens> split_at_documents(const StreamTokens& s) {
  if (s.doc_starts.empty()) return {s};
  const int64_t n = int64_t(s.tokens.size());
  std::vector<int64_t> bounds = {0};
  for (int64_t a : s.doc_starts) {
    if (a <= bounds.back() || a >= n)
      throw std::invalid_argument("split_at_documents: stream '" + s.name + "' has document start " +
                                  std::to_string(a) + " out of order or outside its " + std::to_string(n) + " tokens");
    bounds.push_back(a);
  }
  bounds.push_back(n);
  std::vector<StreamTokens> out;
  for (size_t j = 0; j + 1 < bounds.size(); ++j) {
    const int64_t a = bounds[j], b = bounds[j + 1];
    if (b <= s.first_scored) continue;  // no scored token in this document
    const int64_t lead = a > 0 ? a - 1 : 0;
    out.push_back({s.name + "/" + std::to_string(j), std::vector<int32_t>(s.tokens.begin() + lead, s.tokens.begin() + b),
                   std::max(s.first_scored, a) - lead});
  }
  return out;
}

int64_t scored_tokens(const std::vector<StreamTokens>& streams) {
  int64_t n = 0;
  for (const StreamTokens& s : streams) n += s.scored();
  return n;
}

double stream_tokens(const std::vector<StreamTokens>& streams) {
  double n = 0;
  for (const StreamTokens& s : streams) n += double(s.tokens.size());
  return n;
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
