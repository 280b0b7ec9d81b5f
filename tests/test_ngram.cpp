// The interpolated Kneser–Ney n-gram baseline: normalisation, hand-computed values, a direct transcription of the
// formulas as reference, bits bookkeeping, document boundaries and errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/ngram.h"

using namespace ponder::data;

namespace {

using Docs = std::vector<std::vector<int32_t>>;
using Gram = std::vector<int32_t>;

Gram ids(const std::string& s) {  // bytes as ids, for readable corpora
  Gram g;
  for (unsigned char c : s) g.push_back(int32_t(c));
  return g;
}

Gram letters(const std::string& s) {  // "a" → 0, "b" → 1, …: small vocabularies for hand computation
  Gram g;
  for (char c : s) g.push_back(int32_t(c - 'a'));
  return g;
}

// mt19937's output sequence is fixed by the standard (its distributions are not), hence `% n`.
Docs random_docs(std::mt19937& rng, int n_docs, int max_len, int vocab) {
  Docs docs(static_cast<size_t>(n_docs));
  for (auto& d : docs) {
    d.resize(rng() % uint32_t(max_len + 1));
    for (auto& t : d) t = int32_t(rng() % uint32_t(vocab));
  }
  return docs;
}

// Text from a small phrase book: strongly predictable within a phrase, random between phrases.
std::string phrase_text(std::mt19937& rng, size_t bytes) {
  static const std::vector<std::string> phrases = {
      "the whale swam ", "call me ishmael ", "a sea of ink ", "the ship sailed north ", "queequeg slept ",
      "oil and bone ", "ahab stood on deck ", "the white whale ", "men of the sea ", "a harpoon flew "};
  std::string s;
  while (s.size() < bytes) s += phrases[rng() % phrases.size()];
  return s.substr(0, bytes);
}

double sum_over_vocab(const NgramModel& m, const Gram& context) {
  double s = 0.0;
  for (int32_t w = 0; w < m.vocab(); ++w) s += m.prob(context, w);
  return s;
}

// The formulas of data/ngram.h transcribed directly, with std::map over token vectors and explicit sets of left
// neighbours: slow, but with no packing, hashing or derived tables to get wrong.
struct ReferenceKn {
  int order, vocab;
  std::vector<std::map<Gram, int64_t>> counts;  // counts[k]: the count order k uses, for k-grams with one
  std::vector<double> discount;                 // discount[k] = D_k

  ReferenceKn(int order_, int vocab_, const Docs& train)
      : order(order_), vocab(vocab_), counts(size_t(order_ + 1)), discount(size_t(order_ + 1)) {
    std::vector<std::map<Gram, std::set<int32_t>>> left(size_t(order + 1));
    for (const auto& doc : train)
      for (size_t t = 0; t < doc.size(); ++t)  // the k-gram ending at t
        for (int k = 1; k <= order && size_t(k) <= t + 1; ++k) {
          Gram g(doc.begin() + long(t + 1 - size_t(k)), doc.begin() + long(t + 1));
          if (k == order)
            ++counts[size_t(k)][g];
          else if (t + 1 > size_t(k))
            left[size_t(k)][g].insert(doc[t - size_t(k)]);
        }
    for (int k = 1; k < order; ++k)
      for (const auto& [g, s] : left[size_t(k)]) counts[size_t(k)][g] = int64_t(s.size());
    for (int k = 1; k <= order; ++k) {
      int64_t n1 = 0, n2 = 0;
      for (const auto& [g, c] : counts[size_t(k)]) n1 += c == 1, n2 += c == 2;
      discount[size_t(k)] = n1 + 2 * n2 == 0 ? 0.1 : std::clamp(double(n1) / double(n1 + 2 * n2), 0.1, 0.9);
    }
  }

  // p_k(w | h) with k = |h| + 1.
  double p(const Gram& h, int32_t w) const {
    double lower = h.empty() ? 1.0 / vocab : p(Gram(h.begin() + 1, h.end()), w);
    const auto& c = counts[h.size() + 1];
    int64_t total = 0, types = 0;
    for (auto it = c.lower_bound(h); it != c.end() && std::equal(h.begin(), h.end(), it->first.begin()); ++it)
      total += it->second, ++types;
    if (total == 0) return lower;
    Gram hw = h;
    hw.push_back(w);
    auto it = c.find(hw);
    double chw = it == c.end() ? 0.0 : double(it->second);
    double d = discount[h.size() + 1];
    return std::max(chw - d, 0.0) / double(total) + d * double(types) / double(total) * lower;
  }

  double prob(const Gram& context, int32_t w) const {
    size_t used = std::min(context.size(), size_t(order - 1));
    return p(Gram(context.end() - long(used), context.end()), w);
  }
};

bool close(double a, double b, double rel) { return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)); }

}  // namespace

TEST_CASE("ngram: probabilities over the vocabulary sum to 1 for every context, seen, unseen or short") {
  std::mt19937 rng(11);
  Docs random = random_docs(rng, 20, 30, 5);
  Docs text = {ids(phrase_text(rng, 600)), ids(phrase_text(rng, 300)), ids("a"), {}};
  for (int order = 1; order <= 5; ++order) {
    for (const auto& corpus : {std::pair{random, 5}, std::pair{text, 256}}) {
      const Docs& docs = corpus.first;
      int vocab = corpus.second;  // not structured bindings: clang rejects those inside CAPTURE's lambda
      CAPTURE(order);
      CAPTURE(vocab);
      NgramModel m(order, vocab, docs);
      std::vector<Gram> contexts = {{}};
      const Gram& doc = docs[0];  // every prefix: contexts shorter than order − 1 and seen ones
      for (size_t t = 1; t <= std::min<size_t>(doc.size(), 25); ++t)
        contexts.emplace_back(doc.begin(), doc.begin() + long(t));
      for (int i = 0; i < 25; ++i) {  // random contexts: mostly unseen for bytes, any length up to 7
        Gram c(rng() % 8);
        for (auto& t : c) t = int32_t(rng() % uint32_t(vocab));
        contexts.push_back(c);
      }
      for (const Gram& c : contexts) {
        CAPTURE(c.size());
        CHECK(std::abs(sum_over_vocab(m, c) - 1.0) < 1e-9);
      }
      CHECK(m.prob({}, vocab - 1) > 0.0);  // unseen in the text corpus, still possible
    }
  }
}

TEST_CASE("ngram: orders 1 and 2 match values computed by hand") {
  // Documents "abab" and "ca", vocabulary {a, b, c, d} (d never seen).
  Docs train = {letters("abab"), letters("ca")};
  const int32_t a = 0, b = 1, c = 2, d = 3;

  // Order 1, raw counts a:3 b:2 c:1 (c(•) = 6, 3 types); n1 = 1, n2 = 1 → D = 1/3.
  NgramModel m1(1, 4, train);
  CHECK(m1.discount(1) == doctest::Approx(1.0 / 3).epsilon(1e-15));
  double spread1 = (1.0 / 3) * 3 / 6 / 4;  // D·N1+(•)/c(•) · 1/vocab = 1/24
  CHECK(close(m1.prob({}, a), (3 - 1.0 / 3) / 6 + spread1, 1e-12));
  CHECK(close(m1.prob({}, b), (2 - 1.0 / 3) / 6 + spread1, 1e-12));
  CHECK(close(m1.prob({}, c), (1 - 1.0 / 3) / 6 + spread1, 1e-12));
  CHECK(close(m1.prob({}, d), spread1, 1e-12));
  CHECK(close(m1.prob(letters("bc"), a), m1.prob({}, a), 1e-15));  // order 1 ignores the context

  // Order 2. Bigrams (raw): ab:2 ba:1 ca:1 → n1 = 2, n2 = 1, D2 = 2/4. Unigram continuation counts:
  // a ← {b, c}: 2, b ← {a}: 1, c: 0 (it only opens "ca"); c(•) = 3, 2 types, n1 = n2 = 1 → D1 = 1/3.
  NgramModel m2(2, 4, train);
  CHECK(m2.count(letters("ab")) == 2);
  CHECK(m2.count(letters("a")) == 2);
  CHECK(m2.count(letters("c")) == 0);
  CHECK(m2.discount(2) == doctest::Approx(0.5).epsilon(1e-15));
  CHECK(m2.discount(1) == doctest::Approx(1.0 / 3).epsilon(1e-15));
  double spread = (1.0 / 3) * 2 / 3 / 4;  // 1/18
  double p1a = (2 - 1.0 / 3) / 3 + spread, p1b = (1 - 1.0 / 3) / 3 + spread, p1c = spread;  // 11/18, 5/18, 1/18
  CHECK(close(p1a, 11.0 / 18, 1e-15));
  CHECK(close(m2.prob({}, a), p1a, 1e-12));
  CHECK(close(m2.prob({}, b), p1b, 1e-12));
  CHECK(close(m2.prob({}, c), p1c, 1e-12));
  CHECK(close(m2.prob({}, d), spread, 1e-12));
  // Context a: c(a•) = 2, N1+(a•) = 1.
  CHECK(close(m2.prob(letters("a"), b), (2 - 0.5) / 2 + 0.5 * 1 / 2 * p1b, 1e-12));
  CHECK(close(m2.prob(letters("a"), a), 0.5 * 1 / 2 * p1a, 1e-12));
  CHECK(close(m2.prob(letters("a"), d), 0.5 * 1 / 2 * spread, 1e-12));
  // Contexts b and c: one bigram each (ba, ca), seen once.
  CHECK(close(m2.prob(letters("b"), a), (1 - 0.5) / 1 + 0.5 * p1a, 1e-12));
  CHECK(close(m2.prob(letters("c"), a), (1 - 0.5) / 1 + 0.5 * p1a, 1e-12));
  CHECK(close(m2.prob(letters("b"), c), 0.5 * p1c, 1e-12));
  // Context d never seen: order 2 falls through to order 1; a longer context only uses its last token.
  CHECK(close(m2.prob(letters("d"), b), p1b, 1e-12));
  CHECK(close(m2.prob(letters("dda"), b), m2.prob(letters("a"), b), 1e-15));
  // bits of "abab": a from the empty context, then b|a, a|b, b|a.
  double pba = (2 - 0.5) / 2 + 0.25 * p1b, pab = 0.5 + 0.5 * p1a;
  CHECK(close(m2.bits(letters("abab"), 0, 4), -std::log2(p1a) - 2 * std::log2(pba) - std::log2(pab), 1e-12));
}

TEST_CASE("ngram: matches a direct transcription of the formulas, every key width") {
  std::mt19937 rng(5);
  struct Case {
    int order, vocab;
    std::vector<int32_t> alphabet;  // the ids the corpus draws from (few, so counts repeat)
  };
  std::vector<Case> cases = {{1, 4, {0, 1, 2, 3}}, {2, 4, {0, 1, 2, 3}}, {3, 4, {0, 1, 2}},
                             {4, 3, {0, 1, 2}},    {5, 5, {0, 1, 4}},    {3, 1, {0}},
                             {8, 256, {0, 255, 7}},                       // 64-bit keys, all-ones key possible
                             {5, 65536, {65535, 40000, 3}},               // 128-bit keys
                             {8, 65536, {65535, 65534, 0}}};
  for (const Case& cs : cases) {
    CAPTURE(cs.order);
    CAPTURE(cs.vocab);
    Docs train = random_docs(rng, 12, 40, int(cs.alphabet.size()));
    for (auto& d : train)
      for (auto& t : d) t = cs.alphabet[size_t(t)];
    train.push_back({cs.alphabet[0]});  // a one-token document: an opener of nothing
    ReferenceKn ref(cs.order, cs.vocab, train);
    NgramModel m(cs.order, cs.vocab, train);
    for (int k = 1; k <= cs.order; ++k) CHECK(m.discount(k) == ref.discount[size_t(k)]);
    int checked = 0;
    for (int i = 0; i < 60; ++i) {
      Gram context(rng() % 10);
      for (auto& t : context) t = cs.alphabet[rng() % cs.alphabet.size()];
      int32_t w = rng() % 4 == 0 ? int32_t(rng() % uint32_t(cs.vocab)) : cs.alphabet[rng() % cs.alphabet.size()];
      checked += close(m.prob(context, w), ref.prob(context, w), 1e-12);
    }
    CHECK(checked == 60);
  }
}

TEST_CASE("ngram: bits is the sum of -log2 prob, token_bits sums to bits") {
  std::mt19937 rng(3);
  Docs train = {ids(phrase_text(rng, 2000))};
  Gram doc = ids(phrase_text(rng, 200));
  for (int order : {1, 3, 5}) {
    CAPTURE(order);
    NgramModel m(order, 256, train);
    for (auto [from, to] : {std::pair<size_t, size_t>{0, 200}, {3, 150}, {7, 7}, {199, 200}}) {
      double expect = 0.0;
      for (size_t t = from; t < to; ++t) expect -= std::log2(m.prob(std::span(doc).first(t), doc[t]));
      std::vector<double> per = m.token_bits(doc, from, to);
      double sum = 0.0;
      for (double b : per) sum += b;
      CHECK(per.size() == to - from);
      CHECK(m.bits(doc, from, to) == doctest::Approx(expect).epsilon(1e-12));
      CHECK(sum == doctest::Approx(m.bits(doc, from, to)).epsilon(1e-12));
    }
    CHECK(m.bits(doc, 5, 5) == 0.0);
  }
}

TEST_CASE("ngram: more context helps on repetitive text") {
  std::mt19937 rng(7);
  Docs train = {ids(phrase_text(rng, 20000))};
  Gram held_out = ids(phrase_text(rng, 4000));  // same generator, text not in training
  double per_token[4];
  for (int order = 1; order <= 3; ++order)
    per_token[order] = NgramModel(order, 256, train).bits(held_out, 0, held_out.size()) / double(held_out.size());
  // Unigram entropy of this text is about 4 bits; within phrases the next letter is nearly determined.
  CHECK(per_token[1] > 3.5);
  CHECK(per_token[2] < per_token[1] - 1.0);
  CHECK(per_token[3] < per_token[2] - 0.5);
  CHECK(per_token[3] < 1.5);
}

TEST_CASE("ngram: invalid arguments throw naming the offending value") {
  Docs train = {ids("hello")};
  CHECK_THROWS_WITH_AS(NgramModel(0, 256, train), doctest::Contains("order must be in 1..8, got 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(9, 256, train), doctest::Contains("got 9"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(3, 0, train), doctest::Contains("vocab must be in 1..65536, got 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(3, 65537, train), doctest::Contains("got 65537"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(3, 256, Docs{ids("ab"), {104, 105, 300}}),
                       doctest::Contains("token id 300 at position 2 of training document 1 is outside [0, 256)"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(3, 256, Docs{{-1}}), doctest::Contains("token id -1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(3, 256, Docs{}), doctest::Contains("training set is empty (0 documents"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(NgramModel(3, 256, Docs{{}, {}}), doctest::Contains("training set is empty (2 documents"),
                       std::invalid_argument);

  NgramModel m(3, 256, train);
  CHECK_THROWS_WITH_AS(m.prob({}, 256), doctest::Contains("token id 256"), std::invalid_argument);
  Gram context = {999, 104, 300};  // only the last 2 tokens are read: 999 is ignored, 300 is not
  CHECK_THROWS_WITH_AS(m.prob(context, 1), doctest::Contains("token id 300 at position 2 of the context"),
                       std::invalid_argument);
  CHECK(m.prob(Gram{999, 104, 101}, 108) > 0.0);
  Gram doc = ids("hello");
  CHECK_THROWS_WITH_AS(m.bits(doc, 3, 6), doctest::Contains("[3, 6)"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(m.token_bits(doc, 4, 2), doctest::Contains("[4, 2)"), std::invalid_argument);
  doc[1] = 777;
  CHECK_THROWS_WITH_AS(m.bits(doc, 2, 5), doctest::Contains("token id 777 at position 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(m.count(Gram{1, 2, 3, 4}), doctest::Contains("4 tokens"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(m.discount(4), doctest::Contains("got 4"), std::invalid_argument);
}

TEST_CASE("ngram: contexts never cross a document boundary") {
  const int32_t x = 0, y = 1, z = 2, w = 3;
  NgramModel split(2, 4, Docs{{x, y}, {z, w}});
  NgramModel joined(2, 4, Docs{{x, y, z, w}});
  CHECK(split.count(Gram{x, y}) == 1);
  CHECK(split.count(Gram{y, z}) == 0);
  CHECK(joined.count(Gram{y, z}) == 1);
  CHECK(split.count(Gram{z}) == 0);  // z opens a document: nothing precedes it
  CHECK(joined.count(Gram{z}) == 1);
  // y is never followed by anything in `split`, so p(z | y) is the lower order's p(z), exactly.
  CHECK(split.prob(Gram{y}, z) == split.prob({}, z));
  CHECK(joined.prob(Gram{y}, z) > split.prob(Gram{y}, z) + 0.1);

  // Order 3: (x, y) opens a document, so as a lower-order (continuation) count it is 0; the context (y, z) was
  // never seen whole, so order 3 falls through to order 2's p(w | z), and (x, y) → z through to p(z).
  NgramModel split3(3, 4, Docs{{x, y}, {z, w}});
  CHECK(split3.count(Gram{x, y}) == 0);
  CHECK(split3.count(Gram{y, z}) == 0);
  CHECK(split3.prob(Gram{y, z}, w) == split3.prob(Gram{z}, w));
  CHECK(split3.prob(Gram{x, y}, z) == split3.prob({}, z));
}
