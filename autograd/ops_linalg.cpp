// Matrix products and the triangular masks of matrices as differentiable ops.
#include <stdexcept>

#include "autograd/ops.h"

namespace ponder {

namespace {
Tensor tri_op(const Tensor& x, int64_t k, bool upper) {
  OpRecorder r(Op::Tri, {x});
  Tensor y = raw::tri(x, k, upper);
  return r.done(y, {}, [k, upper](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{tri_op(g, k, upper)};
  });
}
}  // namespace

Tensor tril(const Tensor& x, int64_t k) { return tri_op(x, k, false); }
Tensor triu(const Tensor& x, int64_t k) { return tri_op(x, k, true); }

Tensor matmul(const Tensor& a, const Tensor& b) {
  OpRecorder r(Op::Matmul, {a, b});
  Tensor y = raw::matmul(a, b);
  return r.done(y, {a, b}, [](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& n) {
    const Tensor &a = s[0], &b = s[1];
    Tensor ga, gb;
    if (n[0]) ga = sum_to(matmul(g, transpose(b, -1, -2)), a.shape());
    if (n[1]) {
      if (b.dim() == 2 && a.dim() > 2)  // weight of a batched linear map: one GEMM over all rows
        gb = matmul(transpose(reshape(a, {-1, a.shape().back()}), 0, 1), reshape(g, {-1, g.shape().back()}));
      else
        gb = sum_to(matmul(transpose(a, -1, -2), g), b.shape());
    }
    return std::vector<Tensor>{ga, gb};
  });
}

}  // namespace ponder
