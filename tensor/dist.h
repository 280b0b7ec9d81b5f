// Processes started together by an MPI launcher (`mpirun -np N`, or srun with PMI): which one this is, how many
// there are, and the few collectives ponder needs (data-parallel training, comparisons sharded over ranks). A build
// without MPI, or a process started without a launcher, is rank 0 of 1 and every collective returns its input.
//
// MPI is started only by the commands that run over ranks (init()), never at load time, so every other command runs
// under a launcher or without one alike. The collectives here fix the order in which ranks' values are combined, so
// their results do not depend on the transport (MPI_Allreduce does not promise an order).
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace ponder::dist {

// What the build has, for `ponder --version`: "MPI: Open MPI v4.1.4, …" or "MPI: not built …"; NCCL the same.
std::string mpi_status();
std::string nccl_status();

// Whether an MPI launcher started this process, from its environment (Open MPI's OMPI_COMM_WORLD_*, PMI_* of MPICH
// and srun --mpi=pmi2, PMIX_RANK); reads no MPI state.
bool launched();
// The rank and the number of ranks as the launcher's environment gives them, before init(): 0 and 1 when not launched;
// the size is 0 when the launcher says this process is one of several without saying how many (PMIx).
int launcher_rank();
int launcher_size();

// Starts MPI when a launcher started this process with more than one rank (idempotent). Throws when it did and this
// build has no MPI: every rank would then do the whole job alone.
void init();
// Ends MPI on a clean exit (idempotent; every rank calls it). Afterwards this process is rank 0 of 1.
void finalize();
// Ends every rank of the job at once after an error seen by this one only, so that none waits in a collective.
[[noreturn]] void abort(int code);

int rank();  // 0 when MPI is not started
int size();  // 1 when MPI is not started

// An error every rank raised at the same point (made so by first_error): the caller reports it once, from rank 0, and
// the ranks end together instead of aborting.
struct SharedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void barrier();
// True on every rank when `local` is true on any.
bool any(bool local);
// Every rank's `local` values (the same count on each), concatenated in rank order.
std::vector<double> allgather(const std::vector<double>& local);
std::vector<uint64_t> allgather(const std::vector<uint64_t>& local);
// The message of the lowest rank whose `local` is not empty, on every rank; "" when none has one.
std::string first_message(const std::string& local);
// Throws SharedError on every rank with the lowest rank's message when any rank's `local` is not empty; the ranks'
// setup can fail on one of them alone (a file missing on one node) and must not leave the others waiting.
void first_error(const std::string& local);
// Runs `setup` on every rank; an exception on any of them is raised on all of them as first_error does. On one rank
// the exception passes unchanged.
void together(const std::function<void()>& setup);

// Element-wise sum over the ranks, in place, identical on every rank and bit for bit what one process gets adding the
// ranks' buffers in rank order, ((x0 + x1) + x2) + …: each rank adds up one slice of the buffer from every rank in that
// order (a reduce-scatter by all-to-all), then the slices are shared (an all-gather). Each rank sends 2(n − 1)/n of
// the buffer, as in a ring all-reduce.
void sum_in_rank_order(std::vector<float>& buf);

// The same on CUDA tensors with NCCL (an all-reduce of each tensor in place, float32, NCCL's own order); only in
// builds with NCCL (nccl_status()), otherwise it throws. The caller copies device tensors to the host otherwise.
bool have_nccl();
void nccl_sum(const std::vector<Tensor>& device_tensors);

}  // namespace ponder::dist
