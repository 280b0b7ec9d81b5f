// The language model's composite ops, built from the primitives: embedding lookup, cross-entropy and the
// causal depthwise convolution. None has a node of its own; their gradients are their parts'.
#include <stdexcept>

#include "autograd/ops.h"

namespace ponder {

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  if (weight.dim() != 2) throw std::invalid_argument("embedding: weight must be (V, D), got " + shape_str(weight.shape()));
  Shape s = ids.shape();
  s.push_back(weight.shape()[1]);
  // Token ids are usually made on the host (data windows); they go where the table is.
  return reshape(index_select(weight, 0, raw::reshape(raw::to_device(ids, weight.device()), {-1})), s);
}

Tensor cross_entropy_per_token(const Tensor& logits, const Tensor& targets) {
  if (logits.dim() != 2 || targets.dim() != 1 || targets.shape()[0] != logits.shape()[0])
    throw std::invalid_argument("cross_entropy: expects logits (N, V) and targets (N), got " + shape_str(logits.shape()) +
                                " and " + shape_str(targets.shape()));
  Tensor lp = log_softmax(logits, -1);
  // Targets are usually made on the host (data windows); they go where the logits are.
  return neg(reshape(gather(lp, 1, raw::reshape(raw::to_device(targets, logits.device()), {-1, 1})), {-1}));
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets) { return mean(cross_entropy_per_token(logits, targets)); }

Tensor causal_conv1d(const Tensor& x, const Tensor& w, const Tensor& bias) {
  if (x.dim() != 3 || w.dim() != 2 || w.shape()[0] != x.shape()[2])
    throw std::invalid_argument("causal_conv1d: expects x (B, T, C) and w (C, K), got " + shape_str(x.shape()) + " and " +
                                shape_str(w.shape()));
  const int64_t K = w.shape()[1];
  Tensor wt = transpose(w, 0, 1);  // (K, C)
  Tensor y;
  for (int64_t k = 0; k < K; ++k) {
    Tensor term = mul(shift(x, 1, K - 1 - k), reshape(slice(wt, 0, k, k + 1), {w.shape()[0]}));
    y = y.defined() ? add(y, term) : term;
  }
  return bias.defined() ? add(y, bias) : y;
}

}  // namespace ponder
