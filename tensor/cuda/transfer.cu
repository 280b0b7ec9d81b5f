// Host waits, staged uploads and deferred index checks (transfer.h).
#include <execinfo.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/cuda.h"
#include "tensor/cuda/transfer.h"

namespace ponder::cuda {
namespace {

std::atomic<int64_t> g_waits{0};

bool trace_waits() {
  static const bool on = [] {
    const char* v = std::getenv("PONDER_CUDA_TRACE_WAITS");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void trace(const char* why, int64_t n) {
  std::fprintf(stderr, "cuda: host wait %lld (%s), called from:\n", static_cast<long long>(n), why);
  void* frames[24];
  const int depth = backtrace(frames, 24);
  backtrace_symbols_fd(frames + 1, depth - 1, 2);  // frame 0 is this function
}

// Pinned blocks the small uploads pass through, used in turn; each block's event marks its last queued copy, so a
// block is refilled only after the GPU has read it (a wait only when the uploads run eight blocks ahead).
struct Staging {
  static constexpr int kBlocks = 8;
  std::array<char*, kBlocks> buf{};
  std::array<cudaEvent_t, kBlocks> done{};
  std::array<bool, kBlocks> queued{};
  int cur = 0;
  size_t used = 0;
  std::mutex mu;
};

Staging& staging() {
  static Staging* s = [] {
    auto* st = new Staging;  // never freed: uploads may happen during static destruction
    for (int i = 0; i < Staging::kBlocks; ++i) {
      cuda_check(cudaMallocHost(&st->buf[size_t(i)], kStageBytes));
      cuda_check(cudaEventCreateWithFlags(&st->done[size_t(i)], cudaEventDisableTiming));
    }
    return st;
  }();
  return *s;
}

// The deferred index checks since the last read: op, indices (kept alive until then) and bound, by sequence number.
struct Pending {
  struct Check {
    const char* op;
    Tensor idx;
    int64_t n;
  };
  static constexpr int kMaxChecks = 4096;  // then a check waits and reads first
  static constexpr int kPosBits = 40;
  std::vector<Check> checks;
  unsigned long long* word = nullptr;  // device: min over bad (seq << kPosBits | position); all ones when none
  std::mutex mu;
};

Pending& pending() {
  static Pending* p = [] {
    auto* q = new Pending;
    cuda_check(cudaMalloc(&q->word, sizeof(unsigned long long)));
    cuda_check(cudaMemsetAsync(q->word, 0xff, sizeof(unsigned long long), stream()));
    return q;
  }();
  return *p;
}

// Reads `n` bytes at dev into host on the drained stream.
void read_now(void* host, const void* dev, size_t n) {
  cuda_check(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream()));
  cuda_check(cudaStreamSynchronize(stream()));
}

}  // namespace

void wait_stream(const char* why) {
  const int64_t n = ++g_waits;
  if (trace_waits()) trace(why, n);
  cuda_check(cudaStreamSynchronize(stream()));
}

void wait_reporting(const char* why) {
  wait_stream(why);
  Pending& p = pending();
  std::vector<Pending::Check> checks;
  {
    std::lock_guard<std::mutex> lk(p.mu);
    if (p.checks.empty()) return;
    checks.swap(p.checks);
  }
  unsigned long long key = 0;
  read_now(&key, p.word, sizeof key);
  if (key == ~0ull) return;
  cuda_check(cudaMemsetAsync(p.word, 0xff, sizeof key, stream()));
  const size_t seq = size_t(key >> Pending::kPosBits);
  const int64_t pos = int64_t(key & ((1ull << Pending::kPosBits) - 1));
  if (seq >= checks.size()) throw std::logic_error("cuda: an index check recorded an unknown sequence number");
  const Pending::Check& c = checks[seq];
  int64_t v = 0;
  read_now(&v, c.idx.data<int64_t>() + pos, sizeof v);
  throw std::out_of_range(std::string(c.op) + ": index " + std::to_string(v) + " out of range [0, " +
                          std::to_string(c.n) + ")");
}

void upload(void* dev, const void* host, size_t n) {
  if (n > kStageBytes) {
    cuda_check(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream()));
    wait_stream("upload of more than 1 MiB");  // the caller may free `host` once this returns
    return;
  }
  Staging& s = staging();
  std::lock_guard<std::mutex> lk(s.mu);
  if (s.used + n > kStageBytes) {
    s.cur = (s.cur + 1) % Staging::kBlocks;
    s.used = 0;
    const size_t b = size_t(s.cur);
    const cudaError_t q = s.queued[b] ? cudaEventQuery(s.done[b]) : cudaSuccess;
    if (q == cudaErrorNotReady) {
      // "Not ready" can stay behind as the runtime's last error, which the next launch's cudaGetLastError check
      // would then report against an innocent kernel: clear it (every launch is checked as it is made, so nothing
      // else is lost).
      (void)cudaGetLastError();
      const int64_t w = ++g_waits;
      if (trace_waits()) trace("staging block still in flight", w);
      cuda_check(cudaEventSynchronize(s.done[b]));
    } else {
      cuda_check_at(q, "cudaEventQuery (staging block)", __FILE__, __LINE__);  // a fault: not overwritten blindly
    }
  }
  const size_t b = size_t(s.cur);
  char* at = s.buf[b] + s.used;
  std::memcpy(at, host, n);
  cuda_check(cudaMemcpyAsync(dev, at, n, cudaMemcpyHostToDevice, stream()));
  cuda_check(cudaEventRecord(s.done[b], stream()));
  s.queued[b] = true;
  s.used += (n + 255) / 256 * 256;  // keeps each copy's source 256-byte aligned
  debug_sync("upload", __FILE__, __LINE__);
}

IndexCheck begin_index_check(const char* op, const Tensor& idx, int64_t n) {
  Pending& p = pending();
  bool full;
  {
    std::lock_guard<std::mutex> lk(p.mu);
    full = int(p.checks.size()) >= Pending::kMaxChecks;
  }
  if (full) wait_reporting("index check records full");
  std::lock_guard<std::mutex> lk(p.mu);
  const unsigned long long seq = p.checks.size();
  p.checks.push_back({op, idx, n});
  return {p.word, seq << Pending::kPosBits};
}

void end_index_check() {
  if (sync_each_launch()) wait_reporting("index check (PONDER_CUDA_SYNC)");
}

}  // namespace ponder::cuda

namespace ponder {
int64_t cuda_host_waits() { return cuda::g_waits.load(); }
}  // namespace ponder
