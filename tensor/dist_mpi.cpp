// tensor/dist_transport.h over MPI (built when meson finds an MPI library). Every call is on MPI_COMM_WORLD and
// blocking: ranks call them in the same order, so no message needs a tag or a request.
// The C API only: the MPI-2 C++ bindings that mpi.h would pull in are deprecated and warn under -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "tensor/dist_transport.h"

namespace ponder::dist::transport {
namespace {

void ok(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + std::string(text, size_t(len)));
}

// MPI counts are ints: a larger message would be cut short silently.
int count_of(size_t n, const char* what) {
  if (n > size_t(INT_MAX))
    throw std::runtime_error(std::string(what) + ": " + std::to_string(n) + " elements exceed MPI's int count");
  return int(n);
}

}  // namespace

std::string library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, size_t(len));
  const size_t end = s.find_first_of(",\n");  // "Open MPI v4.1.4, package: …": the name and version
  return end == std::string::npos ? s : s.substr(0, end);
}

bool start() {
  int started = 0;
  MPI_Initialized(&started);
  if (!started) ok(MPI_Init(nullptr, nullptr), "MPI_Init");
  // Errors come back as codes (turned into exceptions above) instead of ending the job without a word.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return true;
}

void stop() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

void abort_all(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps the compiler sure of it
}

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void barrier() { ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void allgather(const void* in, void* out, size_t bytes) {
  ok(MPI_Allgather(in, count_of(bytes, "MPI_Allgather"), MPI_BYTE, out, int(bytes), MPI_BYTE, MPI_COMM_WORLD),
     "MPI_Allgather");
}

void broadcast(void* data, size_t bytes, int root) {
  ok(MPI_Bcast(data, count_of(bytes, "MPI_Bcast"), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

void alltoall(const float* in, float* out, size_t count) {
  ok(MPI_Alltoall(in, count_of(count, "MPI_Alltoall"), MPI_FLOAT, out, int(count), MPI_FLOAT, MPI_COMM_WORLD),
     "MPI_Alltoall");
}

}  // namespace ponder::dist::transport
