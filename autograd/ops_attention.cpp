// Causal softmax attention as one differentiable op: a node (autograd/fused.h) around the backend's attention
// kernel, or around the composition of autograd/compose.cpp where the backend has none. The node saves q, k, v,
// the output and the kernel's log-normalisers (undefined when the composition ran: its backward recomputes
// them); its backward is one kernel at first order and the recorded composition of the softmax's VJP under
// create_graph, so gradients of any order flow.
#include "autograd/compose.h"
#include "autograd/fused.h"
#include "autograd/ops.h"

namespace ponder {

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo) {
  if (!fused::node(FusedOp::Attention, q)) return compose::attention(q, k, v, geo);
  OpRecorder r(Op::Attention, {q, k, v});
  auto [y, lse] = fused::forward(FusedOp::Attention, q, [&] { return raw::attention(q, k, v, geo); },
                                 [&] { return std::make_pair(compose::attention(q, k, v, geo), Tensor()); });
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
