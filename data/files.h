// Where corpus files live and how they are read checked against a known sha256 (plain file I/O: util/files.h).
#pragma once
#include <optional>
#include <string>

namespace ponder::data {

// The repository's data/ folder (holds moby_dick/); env PONDER_DATA_DIR overrides it.
std::string default_data_dir();
// The shared/ folder beside the project (holds data/tinyshakespeare.txt, data/wikitext-2/);
// env PONDER_SHARED_DIR overrides it.
std::string default_shared_dir();

// Reads `path` whole and checks its sha256 against `expected_sha256`. A missing file throws
// std::runtime_error naming the path followed by `missing_hint` (what to do about it); a different hash
// throws naming the path, the expected and the actual hash.
std::string read_verified(const std::string& path, const std::string& expected_sha256,
                          const std::string& missing_hint);

}  // namespace ponder::data
