// The transport under tensor/dist.h: what dist_mpi.cpp does with MPI and dist_none.cpp does for a rank of one.
// Only tensor/dist*.cpp include it; everything else uses tensor/dist.h.
#pragma once
#include <cstddef>
#include <string>

namespace ponder::dist::transport {

std::string library();  // the MPI library's own version line; "" without MPI
bool start();           // MPI_Init; false in a build without MPI
void stop();            // MPI_Finalize
[[noreturn]] void abort_all(int code);
int rank();
int size();
void barrier();
// Each rank's `bytes` bytes at `in`, concatenated in rank order at `out` (size() · bytes bytes).
void allgather(const void* in, void* out, size_t bytes);
// `bytes` bytes from rank `root` to every rank, in place.
void broadcast(void* data, size_t bytes, int root);
// Rank r's slice j (`count` floats at in + j · count) goes to rank j's slice r (at out + r · count).
void alltoall(const float* in, float* out, size_t count);

}  // namespace ponder::dist::transport
