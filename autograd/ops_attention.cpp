// Causal softmax attention as one differentiable op: a node around the backend's attention kernel where it has
// one (autograd/fused.h), the composition of autograd/compose.cpp everywhere else. The node saves q, k, v, the
// output and the kernel's log-normalisers; its backward is one kernel at first order and the recorded
// composition of the softmax's VJP under create_graph, so gradients of any order flow.
#include "autograd/compose.h"
#include "autograd/fused.h"
#include "autograd/ops.h"

namespace ponder {

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo) {
  if (!fused::use(FusedOp::Attention, q)) return compose::attention(q, k, v, geo);
  OpRecorder r(Op::Attention, {q, k, v});
  auto [y, lse] = raw::attention(q, k, v, geo);
  fused::count(FusedOp::Attention, fused::attention_sizes(q, k));
  return r.done(
      y, {q, k, v, lse},
      [geo](const Tensor& dy, const std::vector<Tensor>& s, const std::vector<bool>& n) {
        auto [dq, dk, dv] = attention_backward(s[0], s[1], s[2], s[4], s[3], dy, geo);
        return std::vector<Tensor>{n[0] ? dq : Tensor(), n[1] ? dk : Tensor(), n[2] ? dv : Tensor()};
      },
      /*save_output=*/true);
}

}  // namespace ponder
