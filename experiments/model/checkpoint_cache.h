// Checkpoint files read from disk once per process. A command on a checkpoint asks for it several times before it
// runs (its config for the options, the independence check of several models, the ranks' agreement, the journal's
// fingerprint), then loads the model from it: each of those reads the file through here. An entry is keyed by the
// file's path, size and modification time, so a file rewritten meanwhile is read again.
#pragma once
#include <string>

#include "ttt/checkpoint_io.h"

namespace ponder::cli {

// The checkpoint's config, metadata and step, without its tensors (they are kept only until checkpoint_for_model
// takes them). Throws naming `path` when it is missing, truncated or corrupt.
const ttt::Checkpoint& checkpoint_header(const std::string& path);
// The whole checkpoint, to build a model from: from the read checkpoint_header made when its tensors are still held
// (then they are handed over and no longer held here), else read now.
ttt::Checkpoint checkpoint_for_model(const std::string& path);
// The sha256 of the file's bytes (what journals and finished results are fingerprinted with), hashed once.
const std::string& checkpoint_sha256(const std::string& path);
// How many times this process has read a checkpoint file (to load it, or to hash it): what the cache saves.
int checkpoint_reads();

}  // namespace ponder::cli
