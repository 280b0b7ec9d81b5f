// Where corpus files live, how they are read (whole, and checked against a known sha256) and how results files are
// replaced without a window in which they are half written.
#pragma once
#include <optional>
#include <string>

namespace ponder::data {

// The repository's data/ folder (holds moby_dick/); env PONDER_DATA_DIR overrides it.
std::string default_data_dir();
// The shared/ folder beside the project (holds data/tinyshakespeare.txt, data/wikitext-2/);
// env PONDER_SHARED_DIR overrides it.
std::string default_shared_dir();

// The bytes of `path`, or nothing when it cannot be opened (errno says why); a read error throws naming it.
std::optional<std::string> read_file(const std::string& path);

// Reads `path` whole and checks its sha256 against `expected_sha256`. A missing file throws
// std::runtime_error naming the path followed by `missing_hint` (what to do about it); a different hash
// throws naming the path, the expected and the actual hash.
std::string read_verified(const std::string& path, const std::string& expected_sha256,
                          const std::string& missing_hint);

// Throws naming `path` when it exists and is not a regular file (a symbolic link, folder, FIFO, socket or device):
// what an output path may replace.
void refuse_unless_replaceable(const std::string& path);

// Writes `text` to `path` through a file beside it (flushed to the disk) and a rename, so an interruption leaves the
// old file whole; a failed write (disk full, read-only) is an error naming the file and leaves no .tmp behind. A
// `path` that exists and is not a regular file is refused (refuse_unless_replaceable).
void write_atomically(const std::string& path, const std::string& text);

// Takes an advisory lock on the output folder `dir` (its file .ponder.lock, which records the holder's pid and
// command line) for the rest of this process; children forked afterwards share it, so a `--jobs` parent and its
// parts count as one writer. Taking it again for the same folder in the same process is a no-op. Throws naming the
// folder and the holder when another process has it: two runs must not write into one folder at once.
void lock_output_dir(const std::string& dir);

}  // namespace ponder::data
