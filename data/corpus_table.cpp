#include "data/corpus_table.h"

#include "data/corpora.h"
#include "data/planted.h"

namespace ponder::data {
namespace {

// Only WikiText-2's validation and test files exist offline: their articles, in that order, are the corpus.
Corpus load_wikitext2_offline(int64_t) {
  Corpus c = load_wikitext2("valid");
  Corpus test = load_wikitext2("test");
  c.docs.insert(c.docs.end(), test.docs.begin(), test.docs.end());
  c.name = "wikitext2";
  c.source += " + " + test.source;
  c.sha256 += "," + test.sha256;
  return c;
}

}  // namespace

const std::vector<NamedCorpus>& named_corpora() {
  static const std::vector<NamedCorpus> table = {
      {"moby_dick", [](int64_t) { return load_moby_dick(); }},
      {"tinyshakespeare", [](int64_t) { return load_tinyshakespeare(); }},
      {"wikitext2", load_wikitext2_offline},
      {"sotu", [](int64_t) { return load_sotu(); }},
      {"pystdlib", [](int64_t max_file_bytes) { return load_pystdlib(max_file_bytes); }},
      {"pycode", [](int64_t max_file_bytes) { return load_pycode(default_data_dir(), max_file_bytes); }},
      {"planted", [](int64_t) { return make_planted(0, 600, 64); }},        // 600 documents of 1,024 bytes
      {"planted64", [](int64_t) { return make_planted(0, 400, 48, 64); }},  // 400 documents of 3,072 bytes
  };
  return table;
}

const NamedCorpus* find_named_corpus(const std::string& name) {
  for (const NamedCorpus& c : named_corpora())
    if (name == c.name) return &c;
  return nullptr;
}

std::string named_corpus_list() {
  std::string out;
  for (const NamedCorpus& c : named_corpora()) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

}  // namespace ponder::data
