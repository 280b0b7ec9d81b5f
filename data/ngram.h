// A count n-gram language model over token ids: interpolated Kneser–Ney (in the form Chen & Goodman call
// "interpolated Kneser–Ney" with one discount per order). It is the baseline that answers "does the neural model
// use context?": a neural model that is no better than an order-k count model uses at most about k−1 tokens of
// context in any way that matters.
//
// The model, in plain words. Order N predicts a token from the N−1 tokens before it. A k-gram is k consecutive
// tokens of one training document (contexts never cross a document boundary, so the first tokens of a document
// only add to the counts of the shorter k-grams they end).
//   * Counts. The highest order N uses raw counts c(h w) (how often the N-gram h w occurs). Every lower order
//     k < N uses continuation counts N1+(• h w): the number of distinct tokens seen right before h w in some
//     document. A k-gram that only ever opens a document has continuation count 0 (nothing precedes it).
//     Below, c(·) means the count the order in question uses, c(h•) = Σ_w c(h w) and N1+(h•) = the number of
//     w with c(h w) > 0.
//   * Discount. Order k subtracts one absolute discount D_k = n1 / (n1 + 2 n2), where n1 and n2 are the numbers
//     of k-grams whose count (raw or continuation, as the order uses) is exactly 1 and exactly 2. D_k is clamped
//     to [0.1, 0.9]: n1 = 0 gives 0.1, n2 = 0 (n1 > 0) gives 0.9, and n1 = n2 = 0 (no k-gram seen once or twice)
//     is taken as n1 = 0, i.e. 0.1.
//   * Recursion, for a context h of k−1 tokens and h' = h without its first token:
//       p_k(w | h) = max(c(h w) − D_k, 0) / c(h•) + D_k · N1+(h•) / c(h•) · p_{k−1}(w | h'),
//     and p_k(w | h) = p_{k−1}(w | h') when c(h•) = 0 (a context the order never saw). The bottom of the
//     recursion, p_0, is uniform over the vocabulary, so p_1(w) = max(c(w) − D_1, 0)/c(•) + D_1·N1+(•)/c(•) /
//     vocab (uniform when c(•) = 0, which happens only when no document is long enough to give a bigram).
//   * Queries. p(w | context) uses the last min(N−1, |context|) tokens of the context, and the order one more
//     than that: a token near the start of a document is predicted from the shorter context it has, with the
//     order of that length (continuation counts included when that order is below N).
// Every token of the vocabulary, seen or not, gets p > 0, and Σ_w p(w | h) = 1 for every context h.
//
// Storage: one open-addressing hash table per order, keyed by the k tokens packed into an integer
// (ceil(log2 vocab) bits per token: 64-bit keys when order·bits ≤ 64, e.g. bytes up to order 8, else 128-bit).
// Fitting makes one pass over the training tokens for the top order and derives every lower order from the
// distinct k-grams of the order above; the counts do not depend on hashing or on thread timing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace ponder::data {

class NgramModel {
 public:
  static constexpr int max_order = 8;
  static constexpr int max_vocab = 65536;

  // Fitted on every document of `train`. order in 1..8, vocab in 1..65536, every id in [0, vocab) and at least
  // one token in all; otherwise throws std::invalid_argument naming the offending value (and, for an id, its
  // document and position).
  NgramModel(int order, int vocab, const std::vector<std::vector<int32_t>>& train);

  int order() const { return order_; }
  int vocab() const { return vocab_; }

  // p(w | context): only the last order−1 tokens of `context` are used (fewer when the context is shorter).
  // Throws when w or a used context token is outside [0, vocab).
  double prob(std::span<const int32_t> context, int32_t w) const;

  // −log2 p(doc[t] | doc[0..t)) summed over t in [from, to) (the count of such t is to − from); t = 0 is
  // predicted from the empty context. Throws unless from ≤ to ≤ doc.size(), or when a token it reads is
  // outside [0, vocab).
  double bits(std::span<const int32_t> doc, size_t from, size_t to) const;
  // −log2 p(doc[t] | doc[0..t)) for each t in [from, to), in order; same checks as bits().
  std::vector<double> token_bits(std::span<const int32_t> doc, size_t from, size_t to) const;

  // For tests and diagnostics. count(g): the count order |g| uses for the |g|-gram g (raw at the top order,
  // continuation below), |g| in 1..order. discount(k): D_k, k in 1..order.
  int64_t count(std::span<const int32_t> gram) const;
  double discount(int k) const;

 private:
  struct Impl;  // the tables, keyed by 64- or 128-bit packed k-grams (ngram.cpp)
  int order_ = 0, vocab_ = 0;
  std::shared_ptr<const Impl> impl_;  // immutable after fitting, so copies may share it
};

}  // namespace ponder::data
