#include "data/ngram.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <variant>

namespace ponder::data {
// A named namespace, not an anonymous one: NgramModel::Impl holds a Tables, and a type with external linkage may
// not hold one with internal linkage (GCC: -Wsubobject-linkage).
namespace ngram_impl {

using Docs = std::vector<std::vector<int32_t>>;
__extension__ typedef unsigned __int128 U128;  // 8 tokens of 16 bits; __extension__ keeps -Wpedantic quiet

// splitmix64's finaliser: packed k-grams are highly regular (small ids in fixed bit fields), so the table needs
// every key bit to reach the low bits it indexes with.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
inline uint64_t hash_key(uint64_t k) { return mix64(k); }
inline uint64_t hash_key(U128 k) { return mix64(uint64_t(k) ^ mix64(uint64_t(k >> 64))); }

// What order k knows about a context h: c(h•) and N1+(h•).
struct ContextStats {
  int64_t total = 0, types = 0;
  ContextStats& operator+=(const ContextStats& o) {
    total += o.total;
    types += o.types;
    return *this;
  }
  bool operator==(const ContextStats&) const = default;
};

// Open addressing with linear probing, for counts only: values only ever grow from V{} by positive amounts, so
// V{} marks an empty slot and no key value has to be given up as a sentinel (every packed key is a real k-gram,
// all-ones included). Iteration order depends only on the sequence of add() calls, hence is deterministic.
template <class Key, class V> class CountMap {
 public:
  // Adds `delta` (> V{} in every component) to the value of `key`, inserting it first when absent.
  void add(Key key, const V& delta) {
    if ((size_ + 1) * 10 > slots_.size() * 7) grow();  // load ≤ 0.7 keeps probe runs short
    Slot& s = slots_[probe(key)];
    if (s.value == V{}) {
      s.key = key;
      ++size_;
    }
    s.value += delta;
  }
  // The value of `key`, V{} when absent.
  V get(Key key) const { return slots_.empty() ? V{} : slots_[probe(key)].value; }
  size_t size() const { return size_; }
  template <class F> void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (!(s.value == V{})) f(s.key, s.value);
  }

 private:
  struct Slot {
    Key key{};
    V value{};
  };
  // The slot holding `key`, or the empty slot where it would go.
  size_t probe(Key key) const {
    size_t mask = slots_.size() - 1, i = size_t(hash_key(key)) & mask;
    while (!(slots_[i].value == V{}) && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max<size_t>(16, old.size() * 2), Slot{});
    for (const Slot& s : old)
      if (!(s.value == V{})) slots_[probe(s.key)] = s;
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

// D = n1 / (n1 + 2 n2) from the count-of-counts of one order, clamped to [0.1, 0.9] (see ngram.h).
double kn_discount(int64_t n1, int64_t n2) {
  if (n1 + 2 * n2 == 0) return 0.1;
  return std::clamp(double(n1) / double(n1 + 2 * n2), 0.1, 0.9);
}

// All orders' tables for one key width. grams_[k−1] maps a packed k-gram (last token in the low bits) to the
// count order k uses; contexts_[k−1] maps its first k−1 tokens (the empty context is key 0) to c(h•), N1+(h•).
template <class Key> class Tables {
 public:
  Tables(int order, int vocab, int bits, const Docs& train);
  // `context` holds at most order−1 tokens, every id already checked.
  double prob(std::span<const int32_t> context, int32_t w) const;
  int64_t count(std::span<const int32_t> gram) const { return grams_[gram.size() - 1].get(pack(gram)); }
  double discount(int k) const { return discounts_[size_t(k - 1)]; }

 private:
  using Counts = CountMap<Key, int64_t>;
  Key mask(int k) const {  // the low k tokens' bits
    return k * bits_ >= int(8 * sizeof(Key)) ? ~Key(0) : (Key(1) << (k * bits_)) - 1;
  }
  Key pack(std::span<const int32_t> tokens) const {
    Key key = 0;
    for (int32_t t : tokens) key = (key << bits_) | Key(uint32_t(t));
    return key;
  }
  Counts raw_counts(const Docs& train, int k) const;
  Counts continuation_counts(const Docs& train, int k) const;
  void finish_order(int k);

  int order_, vocab_, bits_;
  std::vector<Counts> grams_;
  std::vector<CountMap<Key, ContextStats>> contexts_;
  std::vector<double> discounts_;
};

template <class Key>
Tables<Key>::Tables(int order, int vocab, int bits, const Docs& train)
    : order_(order), vocab_(vocab), bits_(bits), grams_(size_t(order)), contexts_(size_t(order)),
      discounts_(size_t(order)) {
  grams_[size_t(order - 1)] = raw_counts(train, order);
  for (int k = order - 1; k >= 1; --k) grams_[size_t(k - 1)] = continuation_counts(train, k);
  for (int k = 1; k <= order; ++k) finish_order(k);
}

// c(g) for every k-gram g inside a document: a rolling key, so one pass whatever k is.
template <class Key> typename Tables<Key>::Counts Tables<Key>::raw_counts(const Docs& train, int k) const {
  Counts counts;
  const Key m = mask(k);
  for (const auto& doc : train) {
    Key key = 0;
    for (size_t t = 0; t < doc.size(); ++t) {
      key = ((key << bits_) | Key(uint32_t(doc[t]))) & m;
      if (t + 1 >= size_t(k)) counts.add(key, 1);
    }
  }
  return counts;
}

// N1+(• g) for every k-gram g, from the distinct (k+1)-grams (order k+1 must be filled): each adds one to its
// last k tokens. The distinct (k+1)-grams are the keys of order k+1's table plus, when that order uses
// continuation counts, the (k+1)-grams that only ever open a document (count 0 there, yet they exist and give
// their suffix a left neighbour). Every other (k+1)-gram occurrence ends a (k+2)-gram, so is already a key.
template <class Key>
typename Tables<Key>::Counts Tables<Key>::continuation_counts(const Docs& train, int k) const {
  const Counts& upper = grams_[size_t(k)];
  const Key m = mask(k);
  Counts cont, openers;
  upper.for_each([&](Key g, int64_t) { cont.add(g & m, 1); });
  for (const auto& doc : train) {
    if (doc.size() < size_t(k + 1)) continue;
    Key g = pack(std::span(doc).first(size_t(k + 1)));
    if (upper.get(g) == 0) openers.add(g, 1);  // a map, so an opener shared by documents counts once
  }
  openers.for_each([&](Key g, int64_t) { cont.add(g & m, 1); });
  return cont;
}

// Order k's context table and discount, from its k-gram counts.
template <class Key> void Tables<Key>::finish_order(int k) {
  int64_t n1 = 0, n2 = 0;
  auto& contexts = contexts_[size_t(k - 1)];
  grams_[size_t(k - 1)].for_each([&](Key g, int64_t c) {
    contexts.add(g >> bits_, ContextStats{c, 1});
    n1 += c == 1;
    n2 += c == 2;
  });
  discounts_[size_t(k - 1)] = kn_discount(n1, n2);
}

// The recursion of ngram.h from the bottom up: p starts as the uniform p_0, and order k (context = the last k−1
// tokens, packed incrementally) mixes it in unless it never saw that context.
template <class Key> double Tables<Key>::prob(std::span<const int32_t> context, int32_t w) const {
  double p = 1.0 / double(vocab_);
  Key h = 0;
  for (int k = 1; k <= int(context.size()) + 1; ++k) {
    if (k >= 2) h |= Key(uint32_t(context[context.size() - size_t(k - 1)])) << ((k - 2) * bits_);
    ContextStats st = contexts_[size_t(k - 1)].get(h);
    if (st.total == 0) continue;
    double c = double(grams_[size_t(k - 1)].get((h << bits_) | Key(uint32_t(w))));
    double d = discounts_[size_t(k - 1)];
    p = (std::max(c - d, 0.0) + d * double(st.types) * p) / double(st.total);
  }
  return p;
}

int bits_for(int vocab) {  // bits to hold ids 0..vocab−1, at least 1
  int b = 1;
  while ((int64_t(1) << b) < vocab) ++b;
  return b;
}

bool in_vocab(int32_t id, int vocab) { return id >= 0 && id < vocab; }

// Callers test in_vocab first, so the message (`where`: "at position …") is only built to throw.
[[noreturn]] void bad_id(int32_t id, int vocab, const std::string& where) {
  throw std::invalid_argument("NgramModel: token id " + std::to_string(id) + " " + where + " is outside [0, " +
                              std::to_string(vocab) + ")");
}

void check_train(int order, int vocab, const Docs& train) {
  if (order < 1 || order > NgramModel::max_order)
    throw std::invalid_argument("NgramModel: order must be in 1..8, got " + std::to_string(order));
  if (vocab < 1 || vocab > NgramModel::max_vocab)
    throw std::invalid_argument("NgramModel: vocab must be in 1..65536, got " + std::to_string(vocab));
  size_t tokens = 0;
  for (size_t d = 0; d < train.size(); ++d) {
    for (size_t i = 0; i < train[d].size(); ++i)
      if (!in_vocab(train[d][i], vocab))
        bad_id(train[d][i], vocab, "at position " + std::to_string(i) + " of training document " + std::to_string(d));
    tokens += train[d].size();
  }
  if (tokens == 0)
    throw std::invalid_argument("NgramModel: the training set is empty (" + std::to_string(train.size()) +
                                " documents, 0 tokens)");
}

}  // namespace ngram_impl

using ngram_impl::bad_id;
using ngram_impl::bits_for;
using ngram_impl::check_train;
using ngram_impl::Docs;
using ngram_impl::in_vocab;
using ngram_impl::Tables;
using ngram_impl::U128;

struct NgramModel::Impl {
  std::variant<Tables<uint64_t>, Tables<U128>> tables;
};

NgramModel::NgramModel(int order, int vocab, const Docs& train) : order_(order), vocab_(vocab) {
  check_train(order, vocab, train);
  int bits = bits_for(vocab);
  if (order * bits <= 64)
    impl_ = std::make_shared<Impl>(Impl{Tables<uint64_t>(order, vocab, bits, train)});
  else
    impl_ = std::make_shared<Impl>(Impl{Tables<U128>(order, vocab, bits, train)});
}

double NgramModel::prob(std::span<const int32_t> context, int32_t w) const {
  if (!in_vocab(w, vocab_)) bad_id(w, vocab_, "(the predicted token)");
  size_t used = std::min(context.size(), size_t(order_ - 1));
  std::span<const int32_t> h = context.last(used);
  for (size_t i = 0; i < used; ++i)
    if (!in_vocab(h[i], vocab_))
      bad_id(h[i], vocab_, "at position " + std::to_string(context.size() - used + i) + " of the context");
  return std::visit([&](const auto& t) { return t.prob(h, w); }, impl_->tables);
}

std::vector<double> NgramModel::token_bits(std::span<const int32_t> doc, size_t from, size_t to) const {
  if (from > to || to > doc.size())
    throw std::invalid_argument("NgramModel::bits: range [" + std::to_string(from) + ", " + std::to_string(to) +
                                ") is not within a document of " + std::to_string(doc.size()) + " tokens");
  size_t first = from >= size_t(order_ - 1) ? from - size_t(order_ - 1) : 0;  // the first token read
  for (size_t i = first; i < to; ++i)
    if (!in_vocab(doc[i], vocab_)) bad_id(doc[i], vocab_, "at position " + std::to_string(i) + " of the document");
  std::vector<double> out;
  out.reserve(to - from);
  std::visit(
      [&](const auto& t) {
        for (size_t i = from; i < to; ++i) {
          size_t start = i >= size_t(order_ - 1) ? i - size_t(order_ - 1) : 0;
          out.push_back(-std::log2(t.prob(doc.subspan(start, i - start), doc[i])));
        }
      },
      impl_->tables);
  return out;
}

double NgramModel::bits(std::span<const int32_t> doc, size_t from, size_t to) const {
  double sum = 0.0;
  for (double b : token_bits(doc, from, to)) sum += b;
  return sum;
}

int64_t NgramModel::count(std::span<const int32_t> gram) const {
  if (gram.empty() || gram.size() > size_t(order_))
    throw std::invalid_argument("NgramModel::count: a gram of " + std::to_string(gram.size()) +
                                " tokens; the order is " + std::to_string(order_));
  for (size_t i = 0; i < gram.size(); ++i)
    if (!in_vocab(gram[i], vocab_)) bad_id(gram[i], vocab_, "at position " + std::to_string(i) + " of the gram");
  return std::visit([&](const auto& t) { return t.count(gram); }, impl_->tables);
}

double NgramModel::discount(int k) const {
  if (k < 1 || k > order_)
    throw std::invalid_argument("NgramModel::discount: order k must be in 1.." + std::to_string(order_) +
                                ", got " + std::to_string(k));
  return std::visit([&](const auto& t) { return t.discount(k); }, impl_->tables);
}

}  // namespace ponder::data
