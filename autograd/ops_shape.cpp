// View and layout ops: reshape, permute, slice, expand, concatenation, dtype conversion.
#include <numeric>
#include <stdexcept>

#include "autograd/ops.h"

namespace ponder {

Tensor reshape(const Tensor& x, const Shape& shape) {
  OpRecorder r(Op::Reshape, {x});
  Tensor y = raw::reshape(x, shape);
  Shape xs = x.shape();
  return r.done(y, {}, [xs](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{reshape(g, xs)};
  });
}

Tensor flatten(const Tensor& x, int64_t start, int64_t end) {
  if (x.dim() == 0) return reshape(x, {1});
  int s = normalize_axis(start, x.dim(), "flatten"), e = normalize_axis(end, x.dim(), "flatten");
  Shape sh(x.shape().begin(), x.shape().begin() + s);
  int64_t n = 1;
  for (int i = s; i <= e; ++i) n *= x.shape()[size_t(i)];
  sh.push_back(n);
  sh.insert(sh.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, sh);
}

Tensor permute(const Tensor& x, const std::vector<int>& perm) {
  OpRecorder r(Op::Permute, {x});
  Tensor y = raw::permute(x, perm);
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[size_t(normalize_axis(perm[i], x.dim(), "permute"))] = int(i);
  return r.done(y, {}, [inv](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{permute(g, inv)};
  });
}

Tensor transpose(const Tensor& x, int a, int b) {
  std::vector<int> perm(x.dim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[size_t(normalize_axis(a, x.dim(), "transpose"))], perm[size_t(normalize_axis(b, x.dim(), "transpose"))]);
  return permute(x, perm);
}

Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step) {
  OpRecorder r(Op::Slice, {x});
  int ax = normalize_axis(axis, x.dim(), "slice");
  Tensor y = raw::slice(x, ax, start, end, step);
  // Resolved start: the view's offset moved by start·stride along ax.
  int64_t n = x.shape()[size_t(ax)];
  int64_t s0 = start < 0 ? start + n : start;
  s0 = std::min(std::max<int64_t>(s0, 0), n);
  Shape xs = x.shape();
  return r.done(y, {}, [xs, ax, s0, step](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{pad_slice(g, xs, ax, s0, step)};
  });
}

Tensor pad_slice(const Tensor& src, const Shape& shape, int axis, int64_t start, int64_t step) {
  OpRecorder r(Op::PadSlice, {src});
  int ax = normalize_axis(axis, shape.size(), "pad_slice");
  Tensor y = raw::pad_slice(src, shape, ax, start, step);
  int64_t len = src.shape()[size_t(ax)];
  return r.done(y, {}, [ax, start, step, len](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{slice(g, ax, start, start + len * step, step)};
  });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  OpRecorder r(Op::Expand, {x});
  Tensor y = raw::expand(x, shape);
  if (y.shape() == x.shape()) return x;
  Shape xs = x.shape();
  return r.done(y, {}, [xs](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{sum_to(g, xs)};
  });
}

Tensor unsqueeze(const Tensor& x, int axis) {
  Shape s = x.shape();
  s.insert(s.begin() + normalize_axis(axis, x.dim() + 1, "unsqueeze"), 1);
  return reshape(x, s);
}

Tensor squeeze(const Tensor& x, int axis) { return reshape(x, raw::squeeze(x, axis).shape()); }

Tensor cat(const std::vector<Tensor>& xs, int axis) {
  OpRecorder r(Op::Cat, xs);
  Tensor y = raw::cat(xs, axis);
  int ax = normalize_axis(axis, y.dim(), "cat");
  std::vector<int64_t> lens;
  for (const Tensor& t : xs) lens.push_back(t.shape()[size_t(ax)]);
  return r.done(y, {}, [ax, lens](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>& n) {
    std::vector<Tensor> out(lens.size());
    int64_t at = 0;
    for (size_t i = 0; i < lens.size(); at += lens[i], ++i)
      if (n[i]) out[i] = slice(g, ax, at, at + lens[i]);
    return out;
  });
}

Tensor stack(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw std::invalid_argument("stack: no tensors given");
  int ax = normalize_axis(axis, xs[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (const Tensor& t : xs) u.push_back(unsqueeze(t, ax));
  return cat(u, ax);
}

namespace {
// The node behind split's pieces: its gradient is the concatenation of theirs (the engine fills zeros in
// for pieces that received none), recorded through cat when a graph is being built.
class SplitNode final : public Node {
 public:
  explicit SplitNode(int axis) : axis_(axis) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grads, const std::vector<bool>&) override {
    return {grads.size() == 1 ? grads[0] : cat(grads, axis_)};
  }
  std::string name() const override { return op_name(Op::Split); }

 private:
  int axis_;
};
}  // namespace

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis) {
  int ax = normalize_axis(axis, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::invalid_argument("split: negative size " + std::to_string(s));
    total += s;
  }
  if (total != x.shape()[size_t(ax)])
    throw std::invalid_argument("split: sizes add up to " + std::to_string(total) + ", axis has " +
                                std::to_string(x.shape()[size_t(ax)]));
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(raw::slice(x, ax, at, at + s));
    at += s;
  }
  if (!GradMode::enabled() || !requires_grad(x)) return out;
  auto node = std::make_shared<SplitNode>(ax);
  node->next.push_back(gradient_edge(x));
  node->seq = next_node_seq();
  attach_outputs(node, out);
  return out;
}

Tensor shift(const Tensor& x, int axis, int64_t s) {
  int ax = normalize_axis(axis, x.dim(), "shift");
  int64_t n = x.shape()[size_t(ax)];
  if (s == 0) return x;
  if (s >= n || -s >= n) return mul(x, scalar_like(x, 0));
  if (s > 0) return pad_slice(slice(x, ax, 0, n - s), x.shape(), ax, s);
  return pad_slice(slice(x, ax, -s, n), x.shape(), ax, 0);
}

Tensor clone(const Tensor& x) {
  OpRecorder r(Op::Clone, {x});
  Tensor y = raw::clone(x);
  return r.done(y, {}, [](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{g};
  });
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  OpRecorder r(Op::ToDtype, {x});
  Tensor y = raw::to_dtype(x, dtype);
  DType from = x.dtype();
  return r.done(y, {}, [from](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
    return std::vector<Tensor>{to_dtype(g, from)};
  });
}

}  // namespace ponder
