#include "tensor/dist.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "tensor/dist_transport.h"

namespace ponder::dist {
namespace {

struct State {
  bool running = false;  // MPI started and not yet ended
  int rank = 0, size = 1;
};

State& state() {
  static State s;
  return s;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= 0 && n <= 1 << 24 ? int(n) : fallback;
}

}  // namespace

std::string mpi_status() {
#ifdef PONDER_HAVE_MPI
  return "MPI: " + transport::library() + " (mpirun -np N ponder train|compare|ablate ...)";
#else
  return "MPI: not built (none found at build time, or -Dmpi=disabled; Debian: libopenmpi-dev, then reconfigure)";
#endif
}

std::string nccl_status() {
#ifdef PONDER_HAVE_NCCL
  return "NCCL: built (gradients of CUDA models are all-reduced on the GPUs)";
#else
  return "NCCL: not built (needs a CUDA build and NCCL found at build time; CUDA gradients go through the host)";
#endif
}

bool launched() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

int launcher_rank() {
  return env_int("OMPI_COMM_WORLD_RANK", env_int("PMI_RANK", env_int("PMIX_RANK", 0)));
}

int launcher_size() {
  if (!launched()) return 1;
  return env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 0));
}

void init() {
  State& s = state();
  if (s.running || !launched() || launcher_size() == 1) return;
  if (!transport::start())
    throw SharedError("this ponder was built without MPI, but an MPI launcher started it as rank " +
                             std::to_string(launcher_rank()) + " of several: each rank would do the whole job alone. "
                             "Install libopenmpi-dev (bash scripts/setup.sh does) and rebuild, or run without mpirun");
  s.running = true;
  s.rank = transport::rank();
  s.size = transport::size();
}

void finalize() {
  State& s = state();
  if (!s.running) return;
  transport::stop();
  s = State{};
}

void abort(int code) {
  if (state().running) transport::abort_all(code);
  std::_Exit(code);
}

int rank() { return state().rank; }
int size() { return state().size; }

void barrier() {
  if (size() > 1) transport::barrier();
}

bool any(bool local) {
  if (size() == 1) return local;
  const std::vector<uint64_t> all = allgather(std::vector<uint64_t>{local ? 1u : 0u});
  return std::any_of(all.begin(), all.end(), [](uint64_t v) { return v != 0; });
}

std::vector<double> allgather(const std::vector<double>& local) {
  if (size() == 1) return local;  // MPI may not be started at all
  std::vector<double> out(local.size() * size_t(size()));
  transport::allgather(local.data(), out.data(), local.size() * sizeof(double));
  return out;
}

std::vector<uint64_t> allgather(const std::vector<uint64_t>& local) {
  if (size() == 1) return local;  // MPI may not be started at all
  std::vector<uint64_t> out(local.size() * size_t(size()));
  transport::allgather(local.data(), out.data(), local.size() * sizeof(uint64_t));
  return out;
}

std::string first_message(const std::string& local) {
  if (size() == 1) return local;
  const std::vector<uint64_t> lengths = allgather(std::vector<uint64_t>{local.size()});
  const auto first = std::find_if(lengths.begin(), lengths.end(), [](uint64_t n) { return n > 0; });
  if (first == lengths.end()) return "";
  const int root = int(first - lengths.begin());
  std::string msg = rank() == root ? local : std::string(size_t(*first), '\0');
  transport::broadcast(msg.data(), msg.size(), root);
  return msg;
}

void first_error(const std::string& local) {
  const std::string msg = first_message(local);
  if (!msg.empty()) throw SharedError(msg);
}

void together(const std::function<void()>& setup) {
  if (size() == 1) return setup();
  std::string failed;
  try {
    setup();
  } catch (const std::exception& e) {
    failed = e.what();
    if (failed.empty()) failed = "an error without a message";
  }
  first_error(failed);
}

void sum_in_rank_order(std::vector<float>& buf) {
  const size_t n = size_t(size());
  if (n == 1) return;
  // Padded to a multiple of the ranks: slice j of every rank goes to rank j, which adds the slices up in rank order.
  const size_t slice = (buf.size() + n - 1) / n;
  std::vector<float> send(slice * n, 0.0f), got(slice * n);
  std::copy(buf.begin(), buf.end(), send.begin());
  transport::alltoall(send.data(), got.data(), slice);
  std::vector<float> mine(got.begin(), got.begin() + long(slice));  // rank 0's slice r
  for (size_t from = 1; from < n; ++from)
    for (size_t i = 0; i < slice; ++i) mine[i] += got[from * slice + i];
  transport::allgather(mine.data(), send.data(), slice * sizeof(float));
  std::copy(send.begin(), send.begin() + long(buf.size()), buf.begin());
}

#ifndef PONDER_HAVE_NCCL
bool have_nccl() { return false; }
void nccl_sum(const std::vector<Tensor>&) {
  throw std::logic_error("nccl_sum: this build has no NCCL (ponder --version)");
}
#endif

}  // namespace ponder::dist
