#include "util/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>

namespace ponder::util {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw std::runtime_error("error while reading '" + path + "'");
  return std::move(buffer).str();
}

void refuse_unless_replaceable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st)) return;
  const char* what = fs::is_symlink(st) ? "a symbolic link" : fs::is_directory(st) ? "a folder"
                     : fs::is_fifo(st) ? "a FIFO" : fs::is_socket(st) ? "a socket" : "a device or other special file";
  throw std::runtime_error("'" + path + "' exists and is " + what + ", not a regular file: refusing to replace it");
}

namespace {

// Writes all of `text` to a new file `tmp` and flushes it to the disk; false with errno set when any step fails.
bool write_whole(const std::string& tmp, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n == 0 ? ENOSPC : errno;
      ::close(fd);
      errno = e;
      return false;
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {  // EINVAL: a file system without fsync
    const int e = errno;
    ::close(fd);
    errno = e;
    return false;
  }
  return ::close(fd) == 0;
}

}  // namespace

void write_atomically(const std::string& path, const std::string& text) {
  refuse_unless_replaceable(path);
  const std::string tmp = path + ".tmp";
  refuse_unless_replaceable(tmp);
  if (!write_whole(tmp, text)) {
    const int e = errno;
    std::error_code ec;
    std::filesystem::remove(tmp, ec);  // no 0-byte or cut .tmp left behind
    throw std::runtime_error("cannot write '" + path + "': " + std::strerror(e) + " (nothing was replaced)");
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error("cannot replace '" + path + "': " + std::strerror(e));
  }
}

namespace {

std::string command_line_of_self() {
  std::string cmd = read_file("/proc/self/cmdline").value_or("");
  for (char& c : cmd)
    if (c == '\0') c = ' ';
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  return cmd;
}

}  // namespace

void lock_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  static std::mutex mutex;
  static std::set<std::string> held;  // canonical folders this process (or the parent it was forked from) locked
  std::lock_guard<std::mutex> guard(mutex);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw std::runtime_error("output folder '" + dir + "' exists and is not a folder (--out names a folder)");
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create the output folder '" + dir + "': " + ec.message());
  const std::string key = fs::canonical(dir).string();
  if (held.count(key)) return;
  const std::string path = key + "/.ponder.lock";
  refuse_unless_replaceable(path);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw std::runtime_error("cannot open the lock file '" + path + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    ::close(fd);
    if (e != EWOULDBLOCK) throw std::runtime_error("cannot lock '" + path + "': " + std::strerror(e));
    std::string holder = read_file(path).value_or("");
    holder = holder.substr(0, holder.find_last_not_of('\n') + 1);
    if (const size_t nl = holder.find('\n'); nl != std::string::npos) holder.replace(nl, 1, ": ");
    throw std::runtime_error("'" + dir + "' is in use by another run (" + (holder.empty() ? "pid unknown" : holder) +
                             "); wait for it to finish, stop it, or choose another --out");
  }
  const std::string me = "pid " + std::to_string(getpid()) + "\n" + command_line_of_self() + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) != ssize_t(me.size()))
    std::fprintf(stderr, "warning: could not record this run in '%s': %s\n", path.c_str(), std::strerror(errno));
  held.insert(key);  // the descriptor stays open, and the lock held, until this process and its children end
}

}  // namespace ponder::util
