#include "ttt/checkpoint_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "util/sha256.h"
#include "tensor/kernels.h"
#include "util/fault.h"
#include "util/files.h"

namespace ponder::ttt {
namespace {

constexpr char kMagic[8] = {'P', 'O', 'N', 'D', 'E', 'R', 'C', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = sizeof kMagic + sizeof(uint32_t) + sizeof(uint64_t);
constexpr size_t kDigest = 64;        // hex sha256
constexpr size_t kChunk = 1 << 20;    // write size, and the granularity of the test hook

// ---- encoding

class Writer {
 public:
  template <class T> void pod(T v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    out_ += s;
  }
  void tensor(const NamedTensor& t) {
    const Tensor c = raw::contiguous(raw::to_device(t.value, Device::CPU));
    str(t.name);
    pod<uint8_t>(uint8_t(c.dtype()));
    pod<uint32_t>(uint32_t(c.dim()));
    for (int64_t s : c.shape()) pod<int64_t>(s);
    // The view's offset counts elements, so its first byte is found through the storage.
    const char* src = static_cast<const char*>(c.storage().data) + size_t(c.offset()) * dtype_size(c.dtype());
    out_.append(src, size_t(c.numel()) * dtype_size(c.dtype()));
  }
  void tensors(const std::vector<NamedTensor>& ts) {
    pod<uint64_t>(ts.size());
    for (const NamedTensor& t : ts) tensor(t);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& path) : in_(bytes), path_(path) {}
  template <class T> T pod() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    return std::string(take(n), n);
  }
  // A count of records of at least `each` bytes: one the rest of the payload cannot hold is refused before anything
  // is allocated for it (a crafted count would otherwise ask for terabytes, and the error would blame the config).
  uint64_t count(uint64_t each, const char* what) {
    const uint64_t n = pod<uint64_t>();
    if (n > (in_.size() - at_) / each)
      fail(std::to_string(n) + " " + what + " cannot fit in the " + std::to_string(in_.size() - at_) +
           " bytes left of the payload");
    return n;
  }
  NamedTensor tensor() {
    NamedTensor t;
    t.name = str();
    const auto dt = DType(pod<uint8_t>());
    if (uint8_t(dt) > uint8_t(DType::I64)) fail("tensor '" + t.name + "' has an unknown dtype");
    const uint32_t rank = pod<uint32_t>();
    if (rank > (in_.size() - at_) / sizeof(int64_t)) fail("tensor '" + t.name + "' has more dimensions than bytes left");
    Shape shape(rank);
    uint64_t bytes = dtype_size(dt);  // saturates instead of overflowing
    bool empty = false;
    for (int64_t& s : shape) {
      s = pod<int64_t>();
      if (s < 0) fail("tensor '" + t.name + "' has a negative dimension");
      empty = empty || s == 0;
      bytes = s > 0 && bytes > UINT64_MAX / uint64_t(s) ? UINT64_MAX : bytes * uint64_t(std::max<int64_t>(s, 1));
    }
    if (!empty && bytes > in_.size() - at_) fail("tensor '" + t.name + "' is larger than the bytes left of the payload");
    t.value = Tensor::empty(shape, dt);
    const size_t n = size_t(t.value.numel()) * dtype_size(dt);
    std::memcpy(t.value.storage().data, take(n), n);
    return t;
  }
  std::vector<NamedTensor> tensors() {
    std::vector<NamedTensor> ts(count(13, "tensors"));  // a name's length, a dtype, a rank: 13 bytes at least
    for (NamedTensor& t : ts) t = tensor();
    return ts;
  }
  void done() const {
    if (at_ != in_.size()) fail(std::to_string(in_.size() - at_) + " unexpected bytes after the last record");
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("checkpoint '" + path_ + "' is malformed: " + why);
  }

 private:
  const char* take(uint64_t n) {
    if (n > in_.size() - at_) fail("a record runs past the end of the payload");
    const char* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  std::string_view in_;
  const std::string& path_;
  size_t at_ = 0;
};

std::string encode(const Checkpoint& ck) {
  Writer w;
  w.str(ck.config_text);
  w.pod<uint64_t>(ck.meta.size());
  for (const auto& [k, v] : ck.meta) {
    w.str(k);
    w.str(v);
  }
  w.pod<int64_t>(ck.step);
  w.pod<uint64_t>(ck.sampler_state);
  w.pod<uint64_t>(ck.schedule_state);
  w.pod<int64_t>(ck.optimizer_steps);
  w.tensors(ck.params);
  w.tensors(ck.exp_avg);
  w.tensors(ck.exp_avg_sq);
  return w.take();
}

Checkpoint decode(std::string_view payload, const std::string& path) {
  Reader r(payload, path);
  Checkpoint ck;
  ck.config_text = r.str();
  ck.meta.resize(r.count(16, "metadata entries"));  // two string lengths at least
  for (auto& [k, v] : ck.meta) {
    k = r.str();
    v = r.str();
  }
  ck.step = r.pod<int64_t>();
  ck.sampler_state = r.pod<uint64_t>();
  ck.schedule_state = r.pod<uint64_t>();
  ck.optimizer_steps = r.pod<int64_t>();
  if (ck.step < 0 || ck.optimizer_steps < 0)  // only a crafted file gets past the payload hash with these
    r.fail("negative step " + std::to_string(ck.step) + " / optimiser steps " + std::to_string(ck.optimizer_steps));
  ck.params = r.tensors();
  ck.exp_avg = r.tensors();
  ck.exp_avg_sq = r.tensors();
  r.done();
  return ck;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw std::runtime_error("cannot write checkpoint '" + path + "': " + what + ": " + std::strerror(errno));
}

// Writes `bytes` to a new file at `tmp` and makes it durable.
void write_durably(const std::string& tmp, const std::string& bytes, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("creating " + tmp, path);
  try {
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + at, std::min(kChunk, bytes.size() - at));
      if (n < 0) {
        if (errno == EINTR) continue;
        io_error("writing " + tmp, path);
      }
      at += size_t(n);
      if (checkpoint_write_hook) checkpoint_write_hook(at);
    }
    if (::fsync(fd) != 0) io_error("syncing " + tmp, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) io_error("closing " + tmp, path);
}

}  // namespace

std::string Checkpoint::meta_value(const std::string& key) const {
  for (const auto& [k, v] : meta)
    if (k == key) return v;
  return "";
}

void save_checkpoint(const std::string& path, const Checkpoint& ck) {
  const std::string payload = encode(ck);
  std::string bytes(kMagic, sizeof kMagic);
  const uint32_t version = kVersion;
  const uint64_t size = payload.size();
  bytes.append(reinterpret_cast<const char*>(&version), sizeof version);
  bytes.append(reinterpret_cast<const char*>(&size), sizeof size);
  bytes += payload;
  bytes += util::sha256_hex(payload);

  const std::filesystem::path target(path);
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  const std::string tmp = path + ".tmp";  // same folder, so the rename cannot cross file systems
  try {
    write_durably(tmp, bytes, path);
    fault::point("checkpoint.tmp");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) io_error("renaming " + tmp, path);
    fault::point("checkpoint.rename");
  } catch (...) {
    std::remove(tmp.c_str());  // the old checkpoint, if any, is untouched
    throw;
  }
  // The rename is durable only once the folder's entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) io_error("opening folder " + dir.string(), path);
  const int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) io_error("syncing folder " + dir.string(), path);
}

Checkpoint load_checkpoint(const std::string& path) {
  const std::optional<std::string> read = util::read_file(path);
  if (!read) throw std::runtime_error("cannot open checkpoint '" + path + "': " + std::strerror(errno));
  const std::string& bytes = *read;
  const std::string where = "checkpoint '" + path + "'";
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw std::runtime_error(where + " is not a ponder checkpoint (bad magic header)");
  if (bytes.size() < kHeader) throw std::runtime_error(where + " is truncated: " + std::to_string(bytes.size()) +
                                                       " bytes, shorter than the header");
  uint32_t version = 0;
  uint64_t size = 0;
  std::memcpy(&version, bytes.data() + sizeof kMagic, sizeof version);
  std::memcpy(&size, bytes.data() + sizeof kMagic + sizeof version, sizeof size);
  if (version != kVersion)
    throw std::runtime_error(where + " has format version " + std::to_string(version) + "; this build reads version " +
                             std::to_string(kVersion));
  const uint64_t expected = kHeader + size + kDigest;
  if (size > bytes.size() || bytes.size() != expected)
    throw std::runtime_error(where + " is " + (bytes.size() < expected ? "truncated" : "too long") + ": " +
                             std::to_string(bytes.size()) + " bytes, the header says " + std::to_string(expected));
  const std::string_view payload(bytes.data() + kHeader, size);
  const std::string stored = bytes.substr(kHeader + size), actual = util::sha256_hex(payload);
  if (stored != actual)
    throw std::runtime_error(where + " is corrupt: sha256 of the payload is " + actual + ", the file records " +
                             stored);
  return decode(payload, path);
}

}  // namespace ponder::ttt
