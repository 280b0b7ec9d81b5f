// The built-in corpora by name: what `data.corpus: NAME` in a config reads. A new named corpus is its loader (in
// data/corpora.h or a file of its own) and one entry in data/corpus_table.cpp; the config check, the error messages
// and the loading all read this table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"

namespace ponder::data {

struct NamedCorpus {
  const char* name;
  // Loads it; max_file_bytes caps each file of the corpora read from folders of files (pystdlib, pycode).
  Corpus (*load)(int64_t max_file_bytes);
};

// In the order error messages list them.
const std::vector<NamedCorpus>& named_corpora();
// The entry called `name`, or nullptr.
const NamedCorpus* find_named_corpus(const std::string& name);
// "moby_dick, tinyshakespeare, …": every name, for messages.
std::string named_corpus_list();

}  // namespace ponder::data
