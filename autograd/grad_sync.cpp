#include "autograd/grad_sync.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "autograd/node.h"
#include "tensor/dist.h"
#include "tensor/kernels.h"

namespace ponder {
namespace {

// Which parameters have a gradient on any rank.
std::vector<bool> defined_anywhere(const std::vector<Tensor>& params) {
  std::vector<uint64_t> mine;
  for (const Tensor& p : params) mine.push_back(grad_of(p).defined() ? 1 : 0);
  const std::vector<uint64_t> all = dist::allgather(mine);
  std::vector<bool> any(params.size(), false);
  for (size_t i = 0; i < all.size(); ++i) any[i % params.size()] = any[i % params.size()] || all[i] != 0;
  return any;
}

// The NCCL path: gradients stay on the GPU; missing ones become zeros there first.
void sum_on_devices(const std::vector<Tensor>& params, const std::vector<bool>& needed) {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!needed[i]) continue;
    const Tensor g = grad_of(params[i]);
    const Tensor own = g.defined() ? raw::contiguous(g) : raw::zeros_like(params[i]);
    set_grad(params[i], own);
    grads.push_back(own);
  }
  dist::nccl_sum(grads);
}

}  // namespace

void sum_gradients_over_ranks(const std::vector<Tensor>& params) {
  if (dist::size() == 1 || params.empty()) return;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].dtype() != DType::F32)
      throw std::invalid_argument("data-parallel training sums float32 gradients; parameter " + std::to_string(i) +
                                  " is " + dtype_name(params[i].dtype()));
  const std::vector<bool> needed = defined_anywhere(params);
  if (params[0].device() == Device::CUDA && dist::have_nccl()) return sum_on_devices(params, needed);
  // One host buffer holding every gradient in parameter order, summed over the ranks in one collective.
  size_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) total += needed[i] ? size_t(params[i].numel()) : 0;
  std::vector<float> buf(total, 0.0f);
  size_t at = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!needed[i]) continue;
    if (const Tensor g = grad_of(params[i]); g.defined()) {
      const Tensor host = raw::contiguous(raw::to_device(g, Device::CPU));
      std::memcpy(buf.data() + at, host.data<float>(), size_t(host.numel()) * sizeof(float));
    }
    at += size_t(params[i].numel());
  }
  dist::sum_in_rank_order(buf);
  at = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!needed[i]) continue;
    Tensor sum = Tensor::empty(params[i].shape(), DType::F32, Device::CPU);
    std::memcpy(sum.data<float>(), buf.data() + at, size_t(sum.numel()) * sizeof(float));
    set_grad(params[i], params[i].device() == Device::CPU ? sum : raw::to_device(sum, params[i].device()));
    at += size_t(params[i].numel());
  }
}

}  // namespace ponder
