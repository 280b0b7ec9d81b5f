// Indexing ops: pairs that are each other's backward (select/add, gather/scatter), and one-hot.
#include <stdexcept>

#include "autograd/ops.h"

namespace ponder {

Tensor index_select(const Tensor& x, int axis, const Tensor& idx) {
  OpRecorder r(Op::IndexSelect, {x});
  int ax = normalize_axis(axis, x.dim(), "index_select");
  Tensor y = raw::index_select(x, ax, idx);
  Shape xs = x.shape();
  return r.done(y, {idx}, [xs, ax](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{index_add(xs, ax, s[0], g)};
  });
}

Tensor index_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src) {
  OpRecorder r(Op::IndexAdd, {src});
  int ax = normalize_axis(axis, shape.size(), "index_add");
  Tensor y = raw::index_add(shape, ax, idx, src);
  return r.done(y, {idx}, [ax](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{index_select(g, ax, s[0])};
  });
}

Tensor gather(const Tensor& x, int axis, const Tensor& idx) {
  OpRecorder r(Op::Gather, {x});
  int ax = normalize_axis(axis, x.dim(), "gather");
  Tensor y = raw::gather(x, ax, idx);
  Shape xs = x.shape();
  return r.done(y, {idx}, [xs, ax](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{scatter_add(xs, ax, s[0], g)};
  });
}

Tensor scatter_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src) {
  OpRecorder r(Op::ScatterAdd, {src});
  int ax = normalize_axis(axis, shape.size(), "scatter_add");
  Tensor y = raw::scatter_add(shape, ax, idx, src);
  return r.done(y, {idx}, [ax](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
    return std::vector<Tensor>{gather(g, ax, s[0])};
  });
}

Tensor one_hot(const Tensor& idx, int64_t n, DType dtype) { return raw::one_hot(idx, n, dtype); }

}  // namespace ponder
