// Reading a file whole, replacing one without a window in which it is half written, and one writer per output
// folder: the file I/O every layer above shares.
#pragma once
#include <optional>
#include <string>

namespace ponder::util {

// The bytes of `path`, or nothing when it cannot be opened (errno says why); a read error throws naming it.
std::optional<std::string> read_file(const std::string& path);

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

}  // namespace ponder::util
