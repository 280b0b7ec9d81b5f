// tensor/dist.h's NCCL path: gradients of a model on the GPU summed over the ranks without leaving the devices.
// Built only with CUDA and when meson finds NCCL (and MPI, which hands the communicator's id to every rank).
// Each rank drives one GPU: the backend uses device 0, so give each rank its own GPU with CUDA_VISIBLE_DEVICES.
#include <nccl.h>

#include <stdexcept>
#include <string>

#include "tensor/cuda/common.cuh"
#include "tensor/cuda/transfer.h"
#include "tensor/dist.h"
#include "tensor/dist_transport.h"

namespace ponder::dist {
namespace {

void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(r));
}

// One communicator over every rank, made on first use: rank 0's unique id reaches the others through MPI.
ncclComm_t communicator() {
  static ncclComm_t comm = nullptr;
  if (comm) return comm;
  ncclUniqueId id{};
  if (rank() == 0) nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
  transport::broadcast(&id, sizeof id, 0);
  nccl_ok(ncclCommInitRank(&comm, size(), id, rank()), "ncclCommInitRank");
  return comm;
}

}  // namespace

bool have_nccl() { return true; }

void nccl_sum(const std::vector<Tensor>& device_tensors) {
  if (size() == 1) return;
  ncclComm_t comm = communicator();
  nccl_ok(ncclGroupStart(), "ncclGroupStart");
  for (const Tensor& t : device_tensors) {
    if (t.device() != Device::CUDA || t.dtype() != DType::F32 || !t.is_contiguous())
      throw std::invalid_argument("nccl_sum: needs contiguous float32 CUDA tensors, got " + shape_str(t.shape()) +
                                  " " + dtype_name(t.dtype()) + " on " + device_name(t.device()));
    nccl_ok(ncclAllReduce(t.data<float>(), t.data<float>(), size_t(t.numel()), ncclFloat32, ncclSum, comm,
                          cuda::stream()),
            "ncclAllReduce");
  }
  nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
  cuda::wait_stream("nccl_sum");
}

}  // namespace ponder::dist
