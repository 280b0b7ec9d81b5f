#include "data/corpus.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "util/sha256.h"

namespace ponder::data {
namespace {

void check_frac(double frac, const char* fn, const char* what, double lo = 0.0) {
  if (!(frac >= lo && frac < 1.0))
    throw std::invalid_argument(std::string(fn) + ": " + what + " must be in [" + (lo > 0 ? "a positive" : "0") +
                                ", 1), got " + std::to_string(frac));
}

// Each held-out document a stream of its own, scored whole.
std::vector<HeldOut> one_stream_each(const std::vector<Document>& docs) {
  std::vector<HeldOut> out;
  for (const Document& d : docs) out.push_back({d.name, {}, {d}});
  return out;
}

std::string counts_text(long train, long valid, long test) {
  return std::to_string(train) + "/" + std::to_string(valid) + "/" + std::to_string(test);
}

}  // namespace

Split split_by_document(const Corpus& corpus, double valid_frac, double test_frac) {
  check_frac(valid_frac, "split_by_document", "valid_frac");
  check_frac(test_frac, "split_by_document", "test_frac");
  const auto n = static_cast<long>(corpus.docs.size());
  const long n_valid = std::lround(valid_frac * double(n));
  const long n_test = std::lround(test_frac * double(n));
  const long n_train = n - n_valid - n_test;
  if (n_train < 1 || n_valid < 1 || n_test < 1)
    throw std::invalid_argument("split_by_document: corpus '" + corpus.name + "' has " + std::to_string(n) +
                                " documents; valid_frac " + std::to_string(valid_frac) + " and test_frac " +
                                std::to_string(test_frac) + " give train/valid/test = " +
                                counts_text(n_train, n_valid, n_test) + " documents, and every split needs at least one");
  auto first = corpus.docs.begin();
  Split split;
  split.train.assign(first, first + n_train);
  split.valid.assign(first + n_train, first + n_train + n_valid);
  split.test.assign(first + n_train + n_valid, corpus.docs.end());
  split.valid_streams = one_stream_each(split.valid);
  split.test_streams = one_stream_each(split.test);
  return split;
}

Split split_from_name(const Corpus& corpus, const std::string& test_from, double valid_frac) {
  check_frac(valid_frac, "split_from_name", "valid_frac");
  std::vector<Document> docs = corpus.docs;
  std::stable_sort(docs.begin(), docs.end(), [](const Document& a, const Document& b) { return a.name < b.name; });
  const auto cut = std::find_if(docs.begin(), docs.end(), [&](const Document& d) { return d.name >= test_from; });
  const long before = long(cut - docs.begin());
  const long n_valid = std::lround(valid_frac * double(before));
  const long n_train = before - n_valid, n_test = long(docs.size()) - before;
  if (n_train < 1 || n_valid < 1 || n_test < 1)
    throw std::invalid_argument("split_from_name: corpus '" + corpus.name + "' has " + std::to_string(before) +
                                " documents before '" + test_from + "' and " + std::to_string(n_test) +
                                " from it on; with valid_frac " + std::to_string(valid_frac) +
                                " that gives train/valid/test = " + counts_text(n_train, n_valid, n_test) +
                                " documents, and every split needs at least one");
  Split split;
  split.train.assign(docs.begin(), docs.begin() + n_train);
  split.valid.assign(docs.begin() + n_train, cut);
  split.test.assign(cut, docs.end());
  split.valid_streams = one_stream_each(split.valid);
  split.test_streams = one_stream_each(split.test);
  return split;
}

namespace {

// A held-out repository as one stream: files ranked by the hash of their paths, the first `adapt_frac` of them
// adaptation, the rest evaluation; each part in path order.
HeldOut held_out_repo(const std::string& name, std::vector<Document> files, double adapt_frac) {
  std::vector<std::pair<std::string, size_t>> ranked;
  for (size_t i = 0; i < files.size(); ++i) ranked.push_back({util::sha256_hex(files[i].name), i});
  std::sort(ranked.begin(), ranked.end());
  const long n = long(files.size());
  const long n_adapt = std::min(n - 1, std::lround(adapt_frac * double(n)));
  std::vector<size_t> adapt, eval;
  for (long r = 0; r < n; ++r) (r < n_adapt ? adapt : eval).push_back(ranked[size_t(r)].second);
  std::sort(adapt.begin(), adapt.end());  // files are in path order already: indices keep it
  std::sort(eval.begin(), eval.end());
  HeldOut h{name, {}, {}};
  for (size_t i : adapt) h.adapt.push_back(files[i]);
  for (size_t i : eval) h.eval.push_back(files[i]);
  return h;
}

}  // namespace

Split split_by_repository(const Corpus& corpus, double valid_frac, double test_frac, double adapt_frac) {
  check_frac(valid_frac, "split_by_repository", "valid_frac");
  check_frac(test_frac, "split_by_repository", "test_frac");
  check_frac(adapt_frac, "split_by_repository", "adapt_frac");
  std::map<std::string, std::vector<Document>> repos;  // documents keep corpus (path) order inside a repository
  for (const Document& d : corpus.docs) repos[d.repo].push_back(d);
  std::vector<std::pair<std::string, std::string>> order;  // (sha256 of the name, name)
  for (const auto& [name, docs] : repos) order.push_back({util::sha256_hex(name), name});
  std::sort(order.begin(), order.end());
  const long n = long(order.size());
  const long n_valid = std::lround(valid_frac * double(n)), n_test = std::lround(test_frac * double(n));
  const long n_train = n - n_valid - n_test;
  if (n_train < 1 || n_valid < 1 || n_test < 1)
    throw std::invalid_argument("split_by_repository: corpus '" + corpus.name + "' has " + std::to_string(n) +
                                " repositories; valid_frac " + std::to_string(valid_frac) + " and test_frac " +
                                std::to_string(test_frac) + " give train/valid/test = " +
                                counts_text(n_train, n_valid, n_test) +
                                " repositories, and every split needs at least one");
  Split split;
  for (long i = 0; i < n; ++i) {
    const std::string& name = order[size_t(i)].second;
    std::vector<Document>& docs = repos[name];
    if (i < n_train) {
      split.train.insert(split.train.end(), docs.begin(), docs.end());
      continue;
    }
    HeldOut h = held_out_repo(name, docs, adapt_frac);
    std::vector<Document>& scored = i < n_train + n_valid ? split.valid : split.test;
    scored.insert(scored.end(), h.eval.begin(), h.eval.end());
    (i < n_train + n_valid ? split.valid_streams : split.test_streams).push_back(std::move(h));
  }
  return split;
}

std::vector<Document> join_by_repository(const std::vector<Document>& docs) {
  std::vector<Document> out;
  for (const Document& d : docs) {
    if (d.repo.empty())
      throw std::invalid_argument("join_by_repository: document '" + d.name + "' belongs to no repository");
    if (out.empty() || out.back().repo != d.repo) {
      out.push_back({d.repo, d.text, d.repo});
      continue;
    }
    out.back().text += d.text;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> split_roles(const Split& split) {
  std::vector<std::pair<std::string, std::string>> roles;
  for (const Document& d : split.train) roles.push_back({d.name, "train"});
  for (const auto& [streams, prefix] : {std::pair{&split.valid_streams, "valid"}, {&split.test_streams, "test"}})
    for (const HeldOut& h : *streams) {
      for (const Document& d : h.adapt) roles.push_back({d.name, std::string(prefix) + "-adapt"});
      for (const Document& d : h.eval) roles.push_back({d.name, std::string(prefix) + "-eval"});
    }
  return roles;
}

size_t total_bytes(const std::vector<Document>& docs) {
  size_t bytes = 0;
  for (const Document& d : docs) bytes += d.text.size();
  return bytes;
}

}  // namespace ponder::data
