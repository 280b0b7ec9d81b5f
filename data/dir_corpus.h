// Corpora read from the file system: one text file, a folder of documents, or a folder of repositories, with a
// manifest (every file's size and sha256, and every skipped file with the reason) that results files carry, so a
// number can be traced to the exact bytes it was computed on.
//
// Layout, decided from the top-level entries of the folder (hidden entries, names starting with '.', are ignored):
//   - a regular file: one document;
//   - a folder whose visible top-level entries are all folders: each top-level folder is a *repository* and every
//     file found under it (recursively) is one of its documents;
//   - any other folder: every file found under it (recursively) is a document.
// Files are visited in byte order of their relative paths. A file is skipped, with its reason in the manifest, when it
// is a symbolic link ("symlink": links are not followed, so no loop or escape from the root), has a suffix not in
// `extensions` ("extension"), is larger than `max_file_bytes` ("over size cap"), is empty ("empty"), or is not text
// ("binary": it holds a NUL byte or is not valid UTF-8). Hidden files and folders are skipped silently
// ("hidden" in the manifest).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus.h"

namespace ponder::data {

struct DirCorpusOptions {
  std::vector<std::string> extensions;      // e.g. {".py"}; empty = every suffix
  int64_t max_file_bytes = 1 << 20;         // larger files are skipped
  std::vector<std::string> exclude_repos;   // repository layout: top-level folders left out ("excluded")
  // "auto" (the rule above), "documents", or "repositories" (top-level files are then skipped as "top-level file").
  std::string layout = "auto";
};

// Reads `path` as described above. Documents are named by their path relative to `path` (for a single file, its
// file name); in the repository layout Document::repo is the top-level folder. Throws std::runtime_error naming the
// path when it does not exist or cannot be read, and naming the skip counts when no document is left.
Corpus load_dir_corpus(const std::string& path, const DirCorpusOptions& opt = {});

// The manifest's canonical text: one line "repo\tpath\tbytes\tsha256" per included file, then one line
// "skipped\tpath\treason" per skipped file, in visiting order. Its sha256 is Corpus::sha256 of a loaded folder.
std::string manifest_text(const Corpus& corpus);

// True when `bytes` is text by the rule above (no NUL, valid UTF-8).
bool is_text(std::string_view bytes);

}  // namespace ponder::data
