#include "tensor/kernels.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <numeric>
#include <stdexcept>

#include "tensor/mat_layout.h"

namespace ponder {

// Profile labels: batched products apart from single ones, reductions over the last axis apart from others.
const char* matmul_label(const Tensor& out) {
  const int64_t mn = out.shape()[out.dim() - 2] * out.shape().back();
  return out.numel() > mn ? "matmul (batched)" : "matmul";
}
const char* reduce_label(ReduceOp op, const Tensor& out, const Tensor& x) {
  const bool last = x.dim() > 0 && out.shape().back() == 1 && x.shape().back() != 1;
  if (op != ReduceOp::Sum) return op == ReduceOp::Max ? "max" : "min";
  return last ? "sum (last axis)" : "sum (other axes)";
}

#define PONDER_NAME(id, name, ...) name,
const char* unary_name(UnaryOp op) {
  static const char* names[] = {PONDER_UNARY_OPS(PONDER_NAME)};
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(UnaryOp::Count), "one name per UnaryOp");
  return names[size_t(op)];
}

const char* binary_name(BinaryOp op) {
  static const char* names[] = {PONDER_BINARY_OPS(PONDER_NAME)};
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(BinaryOp::Count), "one name per BinaryOp");
  return names[size_t(op)];
}

const char* fused_op_name(FusedOp op) {
  static const char* names[] = {
#define PONDER_KERNEL(...)
#define PONDER_FUSED_KERNEL(op, ret, name, ...) #name,
#define PONDER_SCAN_KERNEL(...)
#include "tensor/kernels.def"
  };
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(FusedOp::Count), "one name per FusedOp");
  return names[size_t(op)];
}

void Backend::unsupported(FusedOp op) const {
  throw std::logic_error(std::string("this backend has no fused kernel ") + fused_op_name(op) +
                         " (its supports() says so; autograd/fused.h runs the composition instead)");
}
#undef PONDER_NAME

// ---- the Backend's kernel methods (tensor/kernels.def): each times its call under the kernel's kind and label,
// the same on every device, with the backend's clock, and runs the backend's function.

namespace {
// One timed call: the backend's clock from construction to destruction (so a kernel that throws is timed too).
class Timed {
 public:
  Timed(const KernelClock& clock, prof::Kind kind, const char* label)
      : clock_(clock), kind_(kind), label_(label), token_(clock.start()) {}
  ~Timed() { clock_.stop(token_, kind_, label_); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  const KernelClock& clock_;
  prof::Kind kind_;
  const char* label_;
  uint64_t token_;
};
}  // namespace

// With profiling off, one relaxed load and the call; the label is computed only when it is on.
#define PONDER_KERNEL(ret, name, kind, label, params, args) \
  ret Backend::name params {                                \
    if (!prof::enabled()) return k_.name args;              \
    const Timed timed(clock_, prof::Kind::kind, label);     \
    return k_.name args;                                    \
  }
#define PONDER_FUSED_KERNEL(op, ret, name, kind, label, params, args) \
  ret Backend::name params {                                          \
    if (!k_.name) unsupported(FusedOp::op);                           \
    if (!prof::enabled()) return k_.name args;                        \
    const Timed timed(clock_, prof::Kind::kind, label);               \
    return k_.name args;                                              \
  }
#define PONDER_SCAN_KERNEL PONDER_FUSED_KERNEL
#include "tensor/kernels.def"

bool Backend::supports(FusedOp op) const {
  switch (op) {
#define PONDER_KERNEL(...)
#define PONDER_FUSED_KERNEL(op, ret, name, ...) \
  case FusedOp::op:                             \
    return k_.name != nullptr;
#define PONDER_SCAN_KERNEL(...)
#include "tensor/kernels.def"
    case FusedOp::Count:
      break;
  }
  return false;
}

namespace raw {
namespace {

Backend& be(const Tensor& t) { return backend(t.device()); }

// Throws std::invalid_argument(msg) unless ok. A macro, so the message (shape strings and all) is only
// built when the check fails: these checks run on every kernel call.
#define PONDER_NEED(ok, msg)                             \
  do {                                                   \
    if (!(ok)) throw std::invalid_argument(msg);         \
  } while (0)

// A device kernel would read indices on another device as its own memory, so the devices are checked here.
Tensor int64_contiguous(const Tensor& idx, Device data_device, const char* op) {
  PONDER_NEED(!is_float(idx.dtype()), std::string(op) + ": indices must be an integer tensor, got " + dtype_name(idx.dtype()));
  PONDER_NEED(idx.device() == data_device, std::string(op) + ": indices are on " + device_name(idx.device()) +
                                        " but the data is on " + device_name(data_device));
  return contiguous(idx.dtype() == DType::I64 ? idx : to_dtype(idx, DType::I64));
}

}  // namespace

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  PONDER_NEED(a.defined() && b.defined(), std::string(op) + ": undefined tensor");
  PONDER_NEED(a.device() == b.device(), std::string(op) + ": tensors are on different devices (" + device_name(a.device()) +
                                     " and " + device_name(b.device()) + ")");
  PONDER_NEED(a.dtype() == b.dtype(), std::string(op) + ": dtype mismatch (" + dtype_name(a.dtype()) + " and " +
                                   dtype_name(b.dtype()) + ")");
}

Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return Tensor::zeros(t.shape(), t.dtype(), t.device()); }

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  return clone(t);
}

Tensor clone(const Tensor& t) {
  Tensor out = empty_like(t);
  be(t).copy(out, t);
  flops::add_bytes(uint64_t(t.numel()) * dtype_size(t.dtype()));
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  be(t).copy(out, t);
  return out;
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  Tensor c = contiguous(t);
  Tensor out = Tensor::empty(t.shape(), t.dtype(), device);
  size_t n = size_t(t.numel()) * dtype_size(t.dtype());
  // The view's offset counts elements, so the first byte is found through the storage, not data<char>().
  const char* src = static_cast<const char*>(c.storage().data) + size_t(c.offset()) * dtype_size(c.dtype());
  if (device == Device::CPU) be(c).to_host(out.data<char>(), src, n);
  else backend(device).from_host(out.data<char>(), src, n);
  return out;
}

Tensor to_device_keep_layout(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  const int64_t elems = int64_t(t.storage().nbytes / dtype_size(t.dtype()));
  Tensor moved = to_device(make_view(t, {elems}, {1}, 0), device);
  return make_view(moved, t.shape(), t.strides(), t.offset());
}

void to_device_(const Tensor& t, Device device) {
  if (t.device() == device) return;
  const Tensor moved = to_device(t, device);  // contiguous, offset 0
  moved.storage().version.store(t.version() + 1);
  TensorImpl* impl = t.impl();
  impl->storage = moved.impl_ptr()->storage;
  impl->strides = moved.strides();
  impl->offset = 0;
}

void copy_(const Tensor& dst, const Tensor& src) {
  PONDER_NEED(dst.device() == src.device(), "copy_: tensors are on different devices");
  PONDER_NEED(shape_numel(broadcast_shapes(dst.shape(), src.shape(), "copy_")) == dst.numel(),
       "copy_: source " + shape_str(src.shape()) + " does not broadcast to destination " + shape_str(dst.shape()));
  be(dst).copy(dst, src);
  dst.bump_version();
}

void fill_(const Tensor& dst, double value) {
  be(dst).fill(dst, value);
  dst.bump_version();
}

// ---- views

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape s = shape;
  int64_t known = 1, neg = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      PONDER_NEED(neg < 0, std::string(op) + ": more than one -1 in shape " + shape_str(shape));
      neg = int64_t(i);
    } else {
      PONDER_NEED(s[i] >= 0, std::string(op) + ": invalid dimension in shape " + shape_str(shape));
      known *= s[i];
    }
  }
  if (neg >= 0) {
    PONDER_NEED(known > 0 && numel % known == 0,
         std::string(op) + ": cannot infer -1 in " + shape_str(shape) + " for " + std::to_string(numel) + " elements");
    s[size_t(neg)] = numel / known;
  }
  PONDER_NEED(shape_numel(s) == numel, std::string(op) + ": shape " + shape_str(shape) + " does not hold " +
                                    std::to_string(numel) + " elements");
  return s;
}

namespace {
// Strides that show `t`'s elements, in row-major order, with shape `s`, when its strides allow that
// without a copy (merged axes must be laid out contiguously with respect to each other; size-1 axes are
// free); false otherwise. The rule of PyTorch's computeStride.
bool view_strides(const Tensor& t, const Shape& s, Shape& out) {
  const Shape &os = t.shape(), &ost = t.strides();
  out.assign(s.size(), 0);
  if (os.empty() || t.numel() == 0) return false;
  int64_t view_d = int64_t(s.size()) - 1, chunk_base = ost.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[size_t(d)];
    if (d == 0 || (os[size_t(d - 1)] != 1 && ost[size_t(d - 1)] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || s[size_t(view_d)] == 1)) {
        out[size_t(view_d)] = view_numel * chunk_base;
        view_numel *= s[size_t(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base = ost[size_t(d - 1)];
        tensor_numel = view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor reshape(const Tensor& t, const Shape& shape) {
  Shape s = infer_shape(shape, t.numel(), "reshape");
  Shape st;
  if (!t.is_contiguous() && view_strides(t, s, st)) return make_view(t, s, st, t.offset());
  Tensor c = contiguous(t);
  return make_view(c, s, contiguous_strides(s), c.offset());
}

Tensor permute(const Tensor& t, const std::vector<int>& perm) {
  PONDER_NEED(perm.size() == t.dim(), "permute: permutation has " + std::to_string(perm.size()) + " axes for a " +
                                   std::to_string(t.dim()) + "-d tensor");
  std::vector<int> seen(perm.size(), 0);
  Shape sh(perm.size()), st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    int p = normalize_axis(perm[i], t.dim(), "permute");
    PONDER_NEED(!seen[size_t(p)]++, "permute: axis repeated in permutation");
    sh[i] = t.shape()[size_t(p)];
    st[i] = t.strides()[size_t(p)];
  }
  return make_view(t, sh, st, t.offset());
}

Tensor transpose(const Tensor& t, int a, int b) {
  std::vector<int> perm(t.dim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[size_t(normalize_axis(a, t.dim(), "transpose"))], perm[size_t(normalize_axis(b, t.dim(), "transpose"))]);
  return permute(t, perm);
}

Tensor slice(const Tensor& t, int axis, int64_t start, int64_t end, int64_t step) {
  int ax = normalize_axis(axis, t.dim(), "slice");
  PONDER_NEED(step > 0, "slice: step must be positive, got " + std::to_string(step));
  int64_t n = t.shape()[size_t(ax)];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sh = t.shape(), st = t.strides();
  sh[size_t(ax)] = (end - start + step - 1) / step;
  st[size_t(ax)] *= step;
  return make_view(t, sh, st, t.offset() + start * t.strides()[size_t(ax)]);
}

Tensor expand(const Tensor& t, const Shape& shape) {
  PONDER_NEED(shape.size() >= t.dim(), "expand: cannot expand " + shape_str(t.shape()) + " to fewer axes " + shape_str(shape));
  size_t lead = shape.size() - t.dim();
  Shape sh(shape.size()), st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      PONDER_NEED(shape[i] >= 0, "expand: invalid target " + shape_str(shape));
      sh[i] = shape[i];
      continue;
    }
    int64_t have = t.shape()[i - lead];
    int64_t want = shape[i] == -1 ? have : shape[i];
    PONDER_NEED(have == want || have == 1, "expand: cannot expand " + shape_str(t.shape()) + " to " + shape_str(shape));
    sh[i] = want;
    st[i] = have == want ? t.strides()[i - lead] : 0;
  }
  return make_view(t, sh, st, t.offset());
}

Tensor unsqueeze(const Tensor& t, int axis) {
  int ax = normalize_axis(axis, t.dim() + 1, "unsqueeze");
  Shape sh = t.shape(), st = t.strides();
  int64_t s = size_t(ax) < t.dim() ? t.strides()[size_t(ax)] * t.shape()[size_t(ax)] : 1;
  sh.insert(sh.begin() + ax, 1);
  st.insert(st.begin() + ax, s);
  return make_view(t, sh, st, t.offset());
}

Tensor squeeze(const Tensor& t, int axis) {
  int ax = normalize_axis(axis, t.dim(), "squeeze");
  PONDER_NEED(t.shape()[size_t(ax)] == 1, "squeeze: axis " + std::to_string(axis) + " of " + shape_str(t.shape()) +
                                       " has size " + std::to_string(t.shape()[size_t(ax)]) + ", not 1");
  Shape sh = t.shape(), st = t.strides();
  sh.erase(sh.begin() + ax);
  st.erase(st.begin() + ax);
  return make_view(t, sh, st, t.offset());
}

// ---- compute

Tensor unary(UnaryOp op, const Tensor& x, double p0, double p1) {
  PONDER_NEED(is_float(x.dtype()), std::string(unary_name(op)) + ": needs a floating tensor, got " + dtype_name(x.dtype()));
  Tensor out = empty_like(x);
  be(x).unary(op, p0, p1, out, x);
  flops::add(FlopCat::Elementwise, uint64_t(out.numel()));
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  check_same(binary_name(op), a, b);
  Tensor out = Tensor::empty(broadcast_shapes(a.shape(), b.shape(), binary_name(op)), a.dtype(), a.device());
  be(a).binary(op, out, a, b);
  flops::add(FlopCat::Elementwise, uint64_t(out.numel()));
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same("where", a, b);
  check_same("where", cond, a);
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(s, a.dtype(), a.device());
  be(a).where(out, cond, a, b);
  flops::add(FlopCat::Elementwise, uint64_t(out.numel()));
  return out;
}

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  std::vector<int> ax = normalize_axes(axes, x.dim(), "reduce");
  if (op != ReduceOp::Sum)
    for (int a : ax)
      PONDER_NEED(x.shape()[size_t(a)] > 0, "max/min: cannot reduce over an empty axis of " + shape_str(x.shape()));
  Tensor out = Tensor::empty(reduced_shape(x.shape(), ax, true), x.dtype(), x.device());
  be(x).reduce(op, out, x);
  flops::add(FlopCat::Reduction, uint64_t(x.numel()));
  return keepdim ? out : make_view(out, reduced_shape(x.shape(), ax, false),
                                   contiguous_strides(reduced_shape(x.shape(), ax, false)), 0);
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  if (t.shape() == shape) return t;
  PONDER_NEED(t.dim() >= shape.size(), "sum_to: cannot sum " + shape_str(t.shape()) + " to " + shape_str(shape));
  size_t lead = t.dim() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < t.dim(); ++i) {
    if (i < lead) { axes.push_back(int64_t(i)); continue; }
    int64_t want = shape[i - lead];
    PONDER_NEED(want == t.shape()[i] || want == 1, "sum_to: cannot sum " + shape_str(t.shape()) + " to " + shape_str(shape));
    if (want == 1 && t.shape()[i] != 1) axes.push_back(int64_t(i));
  }
  if (axes.empty()) return reshape(t, shape);
  return reshape(reduce(ReduceOp::Sum, t, axes, true), shape);
}

Tensor cumsum(const Tensor& x, int axis, bool reverse) {
  int ax = normalize_axis(axis, x.dim(), "cumsum");
  Tensor out = empty_like(x);
  be(x).cumsum(out, x, ax, reverse);
  flops::add(FlopCat::Reduction, uint64_t(x.numel()));
  return out;
}

Tensor tri(const Tensor& x, int64_t k, bool upper) {
  PONDER_NEED(x.dim() >= 2, std::string(upper ? "triu" : "tril") + ": needs at least 2 axes, got " + shape_str(x.shape()));
  Tensor c = contiguous(x);
  Tensor out = empty_like(c);
  be(x).tri(out, c, k, upper);
  flops::add(FlopCat::Elementwise, uint64_t(out.numel()));
  return out;
}

namespace {
bool blas_ready(const Tensor& t) { return blas_layout(t).has_value(); }
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same("matmul", a, b);
  PONDER_NEED(is_float(a.dtype()), "matmul: needs floating tensors");
  PONDER_NEED(a.dim() >= 2 && b.dim() >= 2, "matmul: operands need at least 2 axes, got " + shape_str(a.shape()) + " and " +
                                         shape_str(b.shape()));
  const int64_t m = a.shape()[a.dim() - 2], k = a.shape()[a.dim() - 1], n = b.shape()[b.dim() - 1];
  PONDER_NEED(b.shape()[b.dim() - 2] == k, "matmul: inner dimensions differ: " + shape_str(a.shape()) + " · " +
                                        shape_str(b.shape()));
  // (…, m, k)·(k, n) with a row-contiguous a is one GEMM over all rows.
  if (b.dim() == 2 && a.dim() > 2 && a.is_contiguous()) {
    Shape os(a.shape().begin(), a.shape().end() - 1);
    os.push_back(n);
    return reshape(matmul(reshape(a, {-1, k}), b), os);
  }
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul (batch axes)");
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  so.insert(so.end(), {m, n});
  Tensor ea = expand(blas_ready(a) ? a : contiguous(a), sa);
  Tensor eb = expand(blas_ready(b) ? b : contiguous(b), sb);
  Tensor out = Tensor::empty(so, a.dtype(), a.device());
  be(a).matmul(out, ea, eb);
  flops::add(FlopCat::Matmul, uint64_t(2 * m * k * n * shape_numel(batch)));
  return out;
}

Tensor cat(const std::vector<Tensor>& ts, int axis) {
  PONDER_NEED(!ts.empty(), "cat: no tensors given");
  int ax = normalize_axis(axis, ts[0].dim(), "cat");
  Shape s = ts[0].shape();
  int64_t total = 0;
  for (const Tensor& t : ts) {
    check_same("cat", ts[0], t);
    PONDER_NEED(t.dim() == s.size(), "cat: rank mismatch " + shape_str(s) + " vs " + shape_str(t.shape()));
    for (size_t d = 0; d < s.size(); ++d)
      PONDER_NEED(int(d) == ax || t.shape()[d] == s[d], "cat: shapes " + shape_str(s) + " and " + shape_str(t.shape()) +
                                                    " differ off the concatenation axis");
    total += t.shape()[size_t(ax)];
  }
  s[size_t(ax)] = total;
  Tensor out = Tensor::empty(s, ts[0].dtype(), ts[0].device());
  int64_t at = 0;
  for (const Tensor& t : ts) {
    int64_t len = t.shape()[size_t(ax)];
    if (len) be(t).copy(slice(out, ax, at, at + len), t);
    at += len;
  }
  flops::add_bytes(uint64_t(out.numel()) * dtype_size(out.dtype()));
  return out;
}

Tensor pad_slice(const Tensor& src, const Shape& shape, int axis, int64_t start, int64_t step) {
  int ax = normalize_axis(axis, shape.size(), "pad_slice");
  Tensor out = Tensor::zeros(shape, src.dtype(), src.device());
  Tensor view = slice(out, ax, start, start + src.shape()[size_t(ax)] * step, step);
  PONDER_NEED(view.shape() == src.shape(), "pad_slice: slice " + shape_str(view.shape()) + " of " + shape_str(shape) +
                                        " does not match source " + shape_str(src.shape()));
  be(src).copy(view, src);
  return out;
}

Tensor index_select(const Tensor& x, int axis, const Tensor& idx) {
  int ax = normalize_axis(axis, x.dim(), "index_select");
  Tensor i = int64_contiguous(idx, x.device(), "index_select");
  PONDER_NEED(i.dim() == 1, "index_select: indices must be 1-d, got " + shape_str(i.shape()));
  Shape s = x.shape();
  s[size_t(ax)] = i.numel();
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  be(x).index_select(out, contiguous(x), ax, i);
  return out;
}

Tensor index_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src) {
  int ax = normalize_axis(axis, shape.size(), "index_add");
  Tensor i = int64_contiguous(idx, src.device(), "index_add");
  Shape expect = shape;
  expect[size_t(ax)] = i.numel();
  PONDER_NEED(src.shape() == expect, "index_add: source " + shape_str(src.shape()) + " should be " + shape_str(expect));
  Tensor out = Tensor::zeros(shape, src.dtype(), src.device());
  be(src).index_add(out, ax, i, contiguous(src));
  flops::add(FlopCat::Elementwise, uint64_t(src.numel()));
  return out;
}

Tensor gather(const Tensor& x, int axis, const Tensor& idx) {
  int ax = normalize_axis(axis, x.dim(), "gather");
  Tensor i = int64_contiguous(idx, x.device(), "gather");
  PONDER_NEED(i.dim() == x.dim(), "gather: index rank differs from input rank");
  for (size_t d = 0; d < x.dim(); ++d)
    PONDER_NEED(int(d) == ax || i.shape()[d] == x.shape()[d], "gather: index " + shape_str(i.shape()) + " and input " +
                                                          shape_str(x.shape()) + " differ off the gather axis");
  Tensor out = Tensor::empty(i.shape(), x.dtype(), x.device());
  be(x).gather(out, contiguous(x), ax, i);
  return out;
}

Tensor scatter_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src) {
  int ax = normalize_axis(axis, shape.size(), "scatter_add");
  Tensor i = int64_contiguous(idx, src.device(), "scatter_add");
  PONDER_NEED(i.shape() == src.shape(), "scatter_add: index " + shape_str(i.shape()) + " and source " +
                                     shape_str(src.shape()) + " differ");
  Tensor out = Tensor::zeros(shape, src.dtype(), src.device());
  be(src).scatter_add(out, ax, i, contiguous(src));
  flops::add(FlopCat::Elementwise, uint64_t(src.numel()));
  return out;
}

// ---- fused kernels: checks, outputs and the device's kernel. No composition and no FLOP count here: both
// belong to the op's one definition in autograd (autograd/fused.h), which calls these only where
// fused_available() holds.

namespace {
std::atomic<bool> g_fused{true};
std::atomic<uint64_t> g_fused_off{0};  // bit i: FusedOp i runs as its composition
std::atomic<bool> g_kernels_hidden{false};  // set_fused_kernels_hidden
static_assert(size_t(FusedOp::Count) <= 64, "one bit per fused op");

// x as a contiguous float tensor with at least one axis, and t broadcast to x's shape, contiguous.
Tensor rows_input(const Tensor& x, const char* op) {
  PONDER_NEED(is_float(x.dtype()), std::string(op) + ": needs a floating tensor, got " + dtype_name(x.dtype()));
  PONDER_NEED(x.dim() >= 1, std::string(op) + ": needs at least one axis");
  return contiguous(x);
}
Tensor rows_like(const Tensor& t, const Tensor& x, const char* op) {
  check_same(op, x, t);
  if (t.shape() == x.shape()) return contiguous(t);
  PONDER_NEED(shape_numel(broadcast_shapes(x.shape(), t.shape(), op)) == x.numel(),
       std::string(op) + ": " + shape_str(t.shape()) + " does not broadcast to " + shape_str(x.shape()));
  return clone(expand(t, x.shape()));
}

// γ and β checked against x and made contiguous, with the offset of each row's γ: γ broadcast to x's
// shape must keep the last axis (size D, unit stride after the copy).
struct RowParams {
  Tensor gamma, beta;
  RowOffsets rows;
};
RowParams row_params(const Tensor& x, const Tensor& gamma, const Tensor& beta, const char* op) {
  check_row_params(op, x, gamma, beta);
  RowParams rp{contiguous(gamma), contiguous(beta), {}};
  const Tensor ge = expand(rp.gamma, x.shape());
  const int64_t D = x.shape().back(), rows = D ? x.numel() / D : 0;
  const int nd = int(x.dim()) - 1;
  rp.rows.sizes.assign(x.shape().begin(), x.shape().begin() + std::max(nd, 0));
  rp.rows.strides.assign(ge.strides().begin(), ge.strides().begin() + std::max(nd, 0));
  if (!be(x).row_offset_table()) return rp;
  rp.rows.goff.resize(size_t(rows));
  std::vector<int64_t> idx(size_t(std::max(nd, 0)), 0);
  int64_t off = 0;
  for (int64_t r = 0; r < rows; ++r) {  // odometer over the leading axes
    rp.rows.goff[size_t(r)] = off;
    for (int d = nd - 1; d >= 0; --d) {
      off += ge.strides()[size_t(d)];
      if (++idx[size_t(d)] < x.shape()[size_t(d)]) break;
      off -= ge.strides()[size_t(d)] * x.shape()[size_t(d)];
      idx[size_t(d)] = 0;
    }
  }
  return rp;
}
}  // namespace

void set_fused_kernels(bool on) { g_fused.store(on); }
bool fused_kernels() { return g_fused.load(); }
void set_fused_kernel(FusedOp op, bool on) {
  const uint64_t bit = uint64_t(1) << unsigned(op);
  on ? g_fused_off.fetch_and(~bit) : g_fused_off.fetch_or(bit);
}
bool fused_enabled(FusedOp op, const Tensor& x) {
  return g_fused.load() && !((g_fused_off.load() >> unsigned(op)) & 1u) && is_float(x.dtype());
}

bool fused_available(FusedOp op, const Tensor& x) {
  return fused_enabled(op, x) && !g_kernels_hidden.load() && be(x).supports(op);
}

void set_fused_kernels_hidden(bool on) { g_kernels_hidden.store(on); }

void check_row_params(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& beta) {
  check_same(op, x, gamma);
  check_same(op, x, beta);
  PONDER_NEED(gamma.shape() == beta.shape(), std::string(op) + ": γ " + shape_str(gamma.shape()) + " and β " +
                                                 shape_str(beta.shape()) + " differ");
  PONDER_NEED(x.dim() >= 1 && gamma.dim() >= 1 && gamma.dim() <= x.dim() && gamma.shape().back() == x.shape().back() &&
                  shape_numel(broadcast_shapes(x.shape(), gamma.shape(), op)) == x.numel(),
              std::string(op) + ": γ " + shape_str(gamma.shape()) + " does not broadcast to " + shape_str(x.shape()) +
                  " along the leading axes");
}

Tensor layer_norm_rows(const Tensor& x, double eps) {
  Tensor c = rows_input(x, "layer_norm_rows"), out = empty_like(c);
  be(c).layer_norm_rows(out, c, eps);
  return out;
}

Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps) {
  Tensor c = rows_input(x, "layer_norm_backward"), vc = rows_like(v, c, "layer_norm_backward");
  Tensor out = empty_like(c);
  be(c).layer_norm_backward(out, c, vc, eps);
  return out;
}

std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps) {
  Tensor c = rows_input(x, "layer_norm_vjp"), vc = rows_like(v, c, "layer_norm_vjp"),
         gc = rows_like(dz, c, "layer_norm_vjp");
  Tensor dx = empty_like(c), dv = empty_like(c);
  be(c).layer_norm_vjp(dx, dv, c, vc, gc, eps);
  return {dx, dv};
}

Tensor rms_norm_rows(const Tensor& x, double eps) {
  Tensor c = rows_input(x, "rms_norm_rows"), out = empty_like(c);
  be(c).rms_norm_rows(out, c, eps);
  return out;
}

Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps) {
  Tensor c = rows_input(x, "rms_norm_backward"), gc = rows_like(g, c, "rms_norm_backward");
  Tensor out = empty_like(c);
  be(c).rms_norm_backward(out, c, gc, eps);
  return out;
}

Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  Tensor c = rows_input(x, "layer_norm_affine");
  RowParams rp = row_params(c, gamma, beta, "layer_norm_affine");
  Tensor out = empty_like(c);
  be(c).layer_norm_affine(out, c, rp.gamma, rp.beta, rp.rows, eps);
  return out;
}

std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps) {
  Tensor c = rows_input(x, "layer_norm_affine_backward"), gc = rows_like(g, c, "layer_norm_affine_backward");
  RowParams rp = row_params(c, gamma, gamma, "layer_norm_affine_backward");
  Tensor dx = empty_like(c), dg = empty_like(rp.gamma), db = empty_like(rp.gamma);
  be(c).layer_norm_affine_backward(dx, dg, db, c, rp.gamma, gc, rp.rows, eps);
  return {dx, dg, db};
}

Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps) {
  Tensor c = rows_input(x, "rms_norm_affine");
  RowParams rp = row_params(c, weight, weight, "rms_norm_affine");
  Tensor out = empty_like(c);
  be(c).rms_norm_affine(out, c, rp.gamma, rp.rows, eps);
  return out;
}

std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g, double eps) {
  Tensor c = rows_input(x, "rms_norm_affine_backward"), gc = rows_like(g, c, "rms_norm_affine_backward");
  RowParams rp = row_params(c, weight, weight, "rms_norm_affine_backward");
  Tensor dx = empty_like(c), dw = empty_like(rp.gamma);
  be(c).rms_norm_affine_backward(dx, dw, c, rp.gamma, gc, rp.rows, eps);
  return {dx, dw};
}

Tensor ln_l2_grad(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta, double eps) {
  Tensor c = rows_input(z, "ln_l2_grad"), tc = rows_like(t, c, "ln_l2_grad");
  RowParams rp = row_params(c, gamma, beta, "ln_l2_grad");
  Tensor out = empty_like(c);
  be(c).ln_l2_grad(out, c, tc, rp.gamma, rp.beta, rp.rows, eps);
  return out;
}

std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps) {
  Tensor c = rows_input(z, "ln_l2_grad_vjp"), tc = rows_like(t, c, "ln_l2_grad_vjp"),
         wc = rows_like(w, c, "ln_l2_grad_vjp");
  RowParams rp = row_params(c, gamma, beta, "ln_l2_grad_vjp");
  Tensor dz = empty_like(c), dt = empty_like(c), dg = empty_like(rp.gamma), db = empty_like(rp.gamma);
  be(c).ln_l2_grad_vjp(dz, dt, dg, db, c, tc, rp.gamma, rp.beta, wc, rp.rows, eps);
  return {dz, dt, dg, db};
}

void check_gate(const char* op, const Tensor& a, const Tensor& b) {
  check_same(op, a, b);
  PONDER_NEED(is_float(a.dtype()), std::string(op) + ": needs floating tensors");
  PONDER_NEED(a.shape() == b.shape(), std::string(op) + ": shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                                   " differ");
}

Tensor act_mul(GateAct act, const Tensor& a, const Tensor& b) {
  check_gate("act_mul", a, b);
  Tensor ac = contiguous(a), bc = contiguous(b), out = empty_like(ac);
  be(ac).act_mul(act, out, ac, bc);
  return out;
}

void check_rope(const Tensor& x, const Tensor& cs, const Tensor& sn) {
  check_same("rope", x, cs);
  check_same("rope", x, sn);
  PONDER_NEED(is_float(x.dtype()), "rope: needs floating tensors");
  const size_t n = x.dim();
  PONDER_NEED(n >= 2 && x.shape()[n - 1] % 2 == 0, "rope: x " + shape_str(x.shape()) +
                                                        " must be (…, N, f) with f even");
  const Shape want{x.shape()[n - 2], x.shape()[n - 1] / 2};
  PONDER_NEED(cs.shape() == want && sn.shape() == want, "rope: cos " + shape_str(cs.shape()) + " and sin " +
                                                            shape_str(sn.shape()) + " must be " + shape_str(want) +
                                                            " for x " + shape_str(x.shape()));
}

Tensor rope_rotate(const Tensor& x, const Tensor& cs, const Tensor& sn) {
  check_rope(x, cs, sn);
  Tensor xc = contiguous(x), out = empty_like(xc);
  be(xc).rope(out, xc, contiguous(cs), contiguous(sn));
  return out;
}

std::pair<Tensor, Tensor> act_mul_backward(GateAct act, const Tensor& a, const Tensor& b, const Tensor& g) {
  check_gate("act_mul_backward", a, b);
  check_gate("act_mul_backward", a, g);
  Tensor ac = contiguous(a), bc = contiguous(b), gc = contiguous(g);
  Tensor da = empty_like(ac), db = empty_like(ac);
  be(ac).act_mul_backward(act, da, db, ac, bc, gc);
  return {da, db};
}

double sum_squares(const Tensor& t) {
  PONDER_NEED(is_float(t.dtype()), "sum_squares: needs a floating tensor");
  return be(t).sum_squares(contiguous(t));
}

void check_adamw(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g) {
  for (const Tensor* t : {&m, &v, &g}) {
    check_same("adamw_step_", p, *t);
    PONDER_NEED(t->shape() == p.shape(), "adamw_step_: shapes " + shape_str(p.shape()) + " and " + shape_str(t->shape()) +
                                      " differ");
  }
  PONDER_NEED(is_float(p.dtype()), "adamw_step_: needs floating tensors");
}

void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  check_adamw(p, m, v, g);
  PONDER_NEED(p.is_contiguous() && m.is_contiguous() && v.is_contiguous(),
              "adamw_step_: the fused kernel updates contiguous p, m and v in place");
  be(p).adamw_step(p, m, v, contiguous(g), c);
  for (const Tensor* t : {&p, &m, &v}) t->bump_version();
}

void check_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo) {
  check_same("attention", q, k);
  check_same("attention", q, v);
  PONDER_NEED(is_float(q.dtype()), "attention: needs floating tensors");
  PONDER_NEED(q.dim() >= 2 && k.dim() == q.dim() && v.shape() == k.shape(),
              "attention: q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + " and v " + shape_str(v.shape()) +
                  " must be (…, n, f), (…, T, f), (…, T, f)");
  for (size_t d = 0; d + 2 < q.dim(); ++d)
    PONDER_NEED(q.shape()[d] == k.shape()[d], "attention: q " + shape_str(q.shape()) + " and k " + shape_str(k.shape()) +
                                                  " differ in their leading axes");
  PONDER_NEED(q.shape().back() == k.shape().back() && k.shape()[k.dim() - 2] >= 1,
              "attention: q " + shape_str(q.shape()) + " and k " + shape_str(k.shape()) + " need one width and a key");
  PONDER_NEED(geo.scale > 0 && std::isfinite(geo.scale) && geo.window >= 0,
              "attention: scale " + std::to_string(geo.scale) + " and window " + std::to_string(geo.window) +
                  " must be positive and non-negative");
  // Every query sees a key: the first query is at or after the first key, and a window never runs past the keys.
  const int64_t n = q.shape()[q.dim() - 2], T = k.shape()[k.dim() - 2];
  PONDER_NEED(geo.t0 >= geo.first && (geo.window == 0 || geo.t0 + n - geo.first <= T),
              "attention: queries at " + std::to_string(geo.t0) + "… and " + std::to_string(T) + " keys at " +
                  std::to_string(geo.first) + "… leave a query with no key to see (window " +
                  std::to_string(geo.window) + ")");
}

namespace {
// G of x (…, r, f): the number of (r, f) heads (0 when a head is empty).
int64_t head_count(const Tensor& x) {
  const int64_t rf = x.shape()[x.dim() - 2] * x.shape().back();
  return rf != 0 ? x.numel() / rf : 0;
}
// Gradients of a fused op whose backward has nothing to sum over (no heads, or no queries): every backend's kernel
// loops over none and leaves the buffers as empty_like handed them out, so they are zeroed here, once for all
// backends. The ones with elements are those of parameters shared by the heads (γ, β) or of keys no query saw.
template <size_t N>
void zero_all(const std::array<Tensor, N>& g) {
  for (const Tensor& t : g) fill_(t, 0.0);
}
// x (…, r, f) as a contiguous (G, r, f).
Tensor heads(const Tensor& x) {
  return reshape(contiguous(x), {head_count(x), x.shape()[x.dim() - 2], x.shape().back()});
}
}  // namespace

std::pair<Tensor, Tensor> attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo) {
  check_attention(q, k, v, geo);
  Tensor qg = heads(q), kg = heads(k), vg = heads(v);
  Tensor y = empty_like(qg), lse = Tensor::empty({qg.shape()[0], qg.shape()[1]}, q.dtype(), q.device());
  be(q).attention(y, lse, qg, kg, vg, geo);
  Shape ls(q.shape().begin(), q.shape().end() - 1);
  return {reshape(y, q.shape()), reshape(lse, ls)};
}

std::array<Tensor, 3> attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y,
                                         const Tensor& lse, const Tensor& dy, const AttnGeometry& geo) {
  check_attention(q, k, v, geo);
  PONDER_NEED(y.shape() == q.shape() && dy.shape() == q.shape(), "attention_backward: y " + shape_str(y.shape()) +
                                                                     " and dy " + shape_str(dy.shape()) + " must be shaped like q " + shape_str(q.shape()));
  Tensor qg = heads(q), kg = heads(k), vg = heads(v), yg = heads(y), dyg = heads(dy);
  Tensor lg = reshape(contiguous(lse), {qg.shape()[0], qg.shape()[1]});
  Tensor dq = empty_like(qg), dk = empty_like(kg), dv = empty_like(vg);
  if (head_count(q) == 0) zero_all(std::array<Tensor, 3>{dq, dk, dv});  // no queries: no key had a weight
  else be(q).attention_backward(dq, dk, dv, qg, kg, vg, yg, lg, dyg, geo);
  return {reshape(dq, q.shape()), reshape(dk, k.shape()), reshape(dv, v.shape())};
}

void check_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                const Tensor& eta) {
  for (const Tensor* t : {&W, &bias, &xk, &xv, &eta}) check_same("ttt_linear_dual", xq, *t);
  PONDER_NEED(is_float(xq.dtype()), "ttt_linear_dual: needs floating tensors");
  PONDER_NEED(xq.dim() >= 2 && xk.shape() == xq.shape() && xv.shape() == xq.shape(),
              "ttt_linear_dual: xq " + shape_str(xq.shape()) + ", xk " + shape_str(xk.shape()) + " and xv " +
                  shape_str(xv.shape()) + " must be one shape (…, b, f)");
  const size_t r = xq.dim() - 2;
  const int64_t b = xq.shape()[r], f = xq.shape()[r + 1];
  Shape lead(xq.shape().begin(), xq.shape().begin() + long(r));
  auto with = [&](int64_t m, int64_t n) {
    Shape s = lead;
    s.push_back(m);
    s.push_back(n);
    return s;
  };
  PONDER_NEED(b >= 1 && W.shape() == with(f, f) && bias.shape() == with(1, f) && eta.shape() == with(b, b),
              "ttt_linear_dual: for xq " + shape_str(xq.shape()) + ", W " + shape_str(W.shape()) + ", bias " +
                  shape_str(bias.shape()) + " and eta " + shape_str(eta.shape()) + " must be " +
                  shape_str(with(f, f)) + ", " + shape_str(with(1, f)) + " and " + shape_str(with(b, b)));
}

Tensor dual_head_view(const Tensor& x, bool rows_apart) {
  const size_t n = x.dim();
  PONDER_NEED(n >= 2, "dual_head_view: needs (…, r, c), got " + shape_str(x.shape()));
  const int64_t r = x.shape()[n - 2], c = x.shape()[n - 1];
  const Shape& st = x.strides();
  bool ok = (c == 1 || st[n - 1] == 1) && (r == 1 || rows_apart || st[n - 2] == c);
  std::vector<std::pair<int64_t, int64_t>> lead;  // (size, stride) of the leading axes, adjacent ones merged
  for (size_t i = 0; i + 2 < n && ok; ++i) {
    const int64_t sz = x.shape()[i];
    if (sz == 1) continue;
    if (!lead.empty() && lead.back().second == sz * st[i]) {
      lead.back() = {lead.back().first * sz, st[i]};
    } else {
      lead.push_back({sz, st[i]});
    }
  }
  ok = ok && lead.size() <= 2;
  if (!ok) return reshape(contiguous(x), {1, head_count(x), r, c});
  while (lead.size() < 2) lead.insert(lead.begin(), {1, 0});
  const int64_t rs = r == 1 ? c : st[n - 2];
  return make_view(x, {lead[0].first, lead[1].first, r, c}, {lead[0].second, lead[1].second, rs, 1}, x.offset());
}

DualOperands dual_operands(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                        const Tensor& eta, const Tensor& gamma, const Tensor& beta, double eps) {
  check_dual(W, bias, xq, xk, xv, eta);
  RowParams rp = row_params(xq, gamma, beta, "ttt_linear_dual");  // reads only xq's shape: no copy
  return {dual_head_view(W, false), dual_head_view(bias, false), dual_head_view(xq, true), dual_head_view(xk, true),
          dual_head_view(xv, true), dual_head_view(eta, false), rp.gamma, rp.beta, std::move(rp.rows), eps,
          Tensor()};  // saved: the caller attaches them
}

namespace {
// Shape s with its last two axes replaced by (m, n).
Shape with_rows(const Shape& s, int64_t m, int64_t n) {
  Shape o(s.begin(), s.end() - 2);
  o.push_back(m);
  o.push_back(n);
  return o;
}
void need_buffer(const char* op, const char* what, const Tensor& t, const Tensor& xq, const Shape& want) {
  check_same(op, xq, t);
  PONDER_NEED(t.shape() == want && t.is_contiguous(), std::string(op) + ": " + what + " " + shape_str(t.shape()) +
                                                          " must be a contiguous " + shape_str(want));
}
}  // namespace

void ttt_linear_dual_into(const Tensor& y, const Tensor& saved, const Tensor& W, const Tensor& bias, const Tensor& xq,
                          const Tensor& xk, const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                          const Tensor& beta, double eps) {
  DualOperands o = dual_operands(W, bias, xq, xk, xv, eta, gamma, beta, eps);
  const int64_t b = xq.shape()[xq.dim() - 2], f = xq.shape().back(), G = head_count(xq);
  need_buffer("ttt_linear_dual", "y", y, xq, with_rows(xq.shape(), b + f + 1, f));
  need_buffer("ttt_linear_dual", "saved", saved, xq, {G, kDualSaved(b, f)});
  o.saved = saved;
  be(xq).ttt_linear_dual(reshape(y, {G, b + f + 1, f}), o);
}

std::pair<Tensor, Tensor> ttt_linear_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk,
                                          const Tensor& xv, const Tensor& eta, const Tensor& gamma,
                                          const Tensor& beta, double eps) {
  const int64_t b = xq.dim() >= 2 ? xq.shape()[xq.dim() - 2] : 0, f = xq.dim() >= 2 ? xq.shape().back() : 0;
  check_dual(W, bias, xq, xk, xv, eta);
  Tensor y = Tensor::empty(with_rows(xq.shape(), b + f + 1, f), xq.dtype(), xq.device());
  Tensor saved = Tensor::empty({head_count(xq), kDualSaved(b, f)}, xq.dtype(), xq.device());
  ttt_linear_dual_into(y, saved, W, bias, xq, xk, xv, eta, gamma, beta, eps);
  return {y, saved};
}

void ttt_linear_dual_backward_into(const std::array<Tensor, 8>& g, const Tensor& W, const Tensor& bias,
                                   const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                   const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                   const std::array<Tensor, 3>& dy, double eps) {
  DualOperands o = dual_operands(W, bias, xq, xk, xv, eta, gamma, beta, eps);
  const int64_t b = xq.shape()[xq.dim() - 2], f = xq.shape().back(), G = head_count(xq);
  const int64_t rows[3] = {b, f, 1};
  const char* names[3] = {"dout", "dW'", "dbias'"};
  for (size_t i = 0; i < 3; ++i) {
    check_same("ttt_linear_dual_backward", xq, dy[i]);
    const Shape want = with_rows(xq.shape(), rows[i], f);
    PONDER_NEED(dy[i].shape() == want, std::string("ttt_linear_dual_backward: ") + names[i] + " " +
                                           shape_str(dy[i].shape()) + " must be " + shape_str(want));
  }
  if (saved.defined()) {
    need_buffer("ttt_linear_dual_backward", "the saved intermediates", saved, xq, {G, kDualSaved(b, f)});
    o.saved = saved;
  }
  const Tensor* ops[8] = {&W, &bias, &xq, &xk, &xv, &eta, &gamma, &beta};
  const Tensor* heads[8] = {&o.W, &o.bias, &o.xq, &o.xk, &o.xv, &o.eta, &o.gamma, &o.gamma};
  std::array<Tensor, 8> gh;
  for (size_t i = 0; i < 8; ++i) {
    need_buffer("ttt_linear_dual_backward", "gradient", g[i], xq, ops[i]->shape());
    gh[i] = reshape(g[i], heads[i]->shape());
  }
  if (G == 0) return zero_all(gh);
  be(xq).ttt_linear_dual_backward(gh, o, {dual_head_view(dy[0], true), dual_head_view(dy[1], false),
                                          dual_head_view(dy[2], false)});
}

std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                               const std::array<Tensor, 3>& dy, double eps) {
  check_dual(W, bias, xq, xk, xv, eta);
  const Tensor* ops[8] = {&W, &bias, &xq, &xk, &xv, &eta, &gamma, &beta};
  std::array<Tensor, 8> g;
  for (size_t i = 0; i < 8; ++i) g[i] = Tensor::empty(ops[i]->shape(), xq.dtype(), xq.device());
  ttt_linear_dual_backward_into(g, W, bias, xq, xk, xv, eta, gamma, beta, saved, dy, eps);
  return g;
}

std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& saved,
                                               const Tensor& dy, double eps) {
  PONDER_NEED(dy.dim() == xq.dim() && dy.dim() >= 2, "ttt_linear_dual_backward: dy " + shape_str(dy.shape()) +
                                                         " must be the packed (…, b + f + 1, f) of xq " +
                                                         shape_str(xq.shape()));
  const int r = int(xq.dim()) - 2;
  const int64_t b = xq.shape()[size_t(r)], f = xq.shape().back();
  Shape ys(xq.shape().begin(), xq.shape().end() - 2);
  ys.push_back(b + f + 1);
  ys.push_back(f);
  PONDER_NEED(dy.shape() == ys, "ttt_linear_dual_backward: dy " + shape_str(dy.shape()) + " must be " + shape_str(ys));
  return ttt_linear_dual_backward(W, bias, xq, xk, xv, eta, gamma, beta, saved,
                                  {slice(dy, r, 0, b), slice(dy, r, b, b + f), slice(dy, r, b + f, b + f + 1)}, eps);
}

void check_prefix(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w, const Tensor& gamma,
                  int steps) {
  for (const Tensor* x : {&t, &neg_m, &w}) check_same("ttt_prefix_steps", z0, *x);
  PONDER_NEED(is_float(z0.dtype()), "ttt_prefix_steps: needs floating tensors");
  PONDER_NEED(steps >= 1, "ttt_prefix_steps: steps must be >= 1, got " + std::to_string(steps));
  PONDER_NEED(z0.dim() >= 2 && t.shape() == z0.shape(), "ttt_prefix_steps: z0 " + shape_str(z0.shape()) + " and t " +
                                                            shape_str(t.shape()) + " must be one shape (…, b, f)");
  const size_t r = z0.dim() - 2;
  const int64_t b = z0.shape()[r];
  auto with = [&](int64_t m, int64_t n) {
    Shape s(z0.shape().begin(), z0.shape().begin() + long(r));
    s.push_back(m);
    s.push_back(n);
    return s;
  };
  PONDER_NEED(b >= 1 && neg_m.shape() == with(b, b) && w.shape() == with(kPrefixPairs(b), 1),
              "ttt_prefix_steps: for z0 " + shape_str(z0.shape()) + ", neg_m " + shape_str(neg_m.shape()) + " and w " +
                  shape_str(w.shape()) + " must be " + shape_str(with(b, b)) + " and " +
                  shape_str(with(kPrefixPairs(b), 1)));
  PONDER_NEED(gamma.dim() < 2 || gamma.shape()[gamma.dim() - 2] == 1,
              "ttt_prefix_steps: γ " + shape_str(gamma.shape()) + " must be one row per head (…, 1, f): the pairs "
              "of a unit share it");
}

namespace {
// Prefix mode's operands, contiguous, per head; γ and β as the row kernels take them over z0's rows.
PrefixOperands prefix_heads(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w,
                            const Tensor& gamma, const Tensor& beta, int steps, double eps) {
  check_prefix(z0, t, neg_m, w, gamma, steps);
  const int64_t G = head_count(z0), b = z0.shape()[z0.dim() - 2], f = z0.shape().back();
  RowParams rp = row_params(z0, gamma, beta, "ttt_prefix_steps");
  return {reshape(contiguous(z0), {G, b, f}), reshape(contiguous(t), {G, b, f}),
          reshape(contiguous(neg_m), {G, b, b}), reshape(contiguous(w), {G, kPrefixPairs(b)}), rp.gamma, rp.beta,
          std::move(rp.rows), steps, eps};
}
}  // namespace

std::pair<Tensor, Tensor> ttt_prefix_steps(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w,
                                           const Tensor& gamma, const Tensor& beta, int steps, double eps) {
  const PrefixOperands o = prefix_heads(z0, t, neg_m, w, gamma, beta, steps, eps);
  const int64_t G = o.z0.shape()[0], b = o.z0.shape()[1], f = o.z0.shape()[2];
  Tensor a = Tensor::empty({G, kPrefixPairs(b), f}, z0.dtype(), z0.device());
  Tensor saved = Tensor::empty({G, kPrefixSaved(b, f, steps)}, z0.dtype(), z0.device());
  be(z0).ttt_prefix_steps(a, saved, o);
  Shape s(z0.shape().begin(), z0.shape().end() - 2);
  s.push_back(kPrefixPairs(b));
  s.push_back(f);
  return {reshape(a, s), saved};
}

std::array<Tensor, 6> ttt_prefix_steps_backward(const Tensor& z0, const Tensor& t, const Tensor& neg_m,
                                                const Tensor& w, const Tensor& gamma, const Tensor& beta, int steps,
                                                double eps, const Tensor& saved, const Tensor& da) {
  const PrefixOperands o = prefix_heads(z0, t, neg_m, w, gamma, beta, steps, eps);
  const int64_t G = o.z0.shape()[0], b = o.z0.shape()[1], f = o.z0.shape()[2];
  check_same("ttt_prefix_steps_backward", z0, saved);
  check_same("ttt_prefix_steps_backward", z0, da);
  const Shape ss{G, kPrefixSaved(b, f, steps)};
  PONDER_NEED(saved.shape() == ss && saved.is_contiguous(), "ttt_prefix_steps_backward: the saved intermediates " +
                                                                shape_str(saved.shape()) + " must be a contiguous " +
                                                                shape_str(ss));
  PONDER_NEED(da.numel() == G * kPrefixPairs(b) * f && da.shape().back() == f,
              "ttt_prefix_steps_backward: da " + shape_str(da.shape()) + " must be (…, " +
                  std::to_string(kPrefixPairs(b)) + ", " + std::to_string(f) + ") of z0 " + shape_str(z0.shape()));
  std::array<Tensor, 6> g{empty_like(o.z0), empty_like(o.t),     empty_like(o.neg_m),
                          empty_like(o.w),  empty_like(o.gamma), empty_like(o.gamma)};
  if (G == 0) zero_all(g);
  else be(z0).ttt_prefix_steps_backward(g, o, saved, contiguous(da));
  const Tensor* shapes[6] = {&z0, &t, &neg_m, &w, &gamma, &beta};
  for (size_t i = 0; i < 6; ++i) g[i] = reshape(g[i], shapes[i]->shape());
  return g;
}

void check_mlp_dual(const std::array<Tensor, 10>& x) {
  const Tensor& xq = x[4];
  for (size_t i = 0; i < 8; ++i) check_same("ttt_mlp_dual", xq, x[i]);
  PONDER_NEED(is_float(xq.dtype()), "ttt_mlp_dual: needs floating tensors");
  PONDER_NEED(xq.dim() >= 2, "ttt_mlp_dual: xq " + shape_str(xq.shape()) + " must be (…, b, f)");
  const size_t r = xq.dim() - 2;
  const int64_t b = xq.shape()[r], f = xq.shape()[r + 1], h = x[0].dim() == xq.dim() ? x[0].shape().back() : 0;
  auto with = [&](int64_t m, int64_t n) {
    Shape s(xq.shape().begin(), xq.shape().begin() + long(r));
    s.push_back(m);
    s.push_back(n);
    return s;
  };
  const Shape want[8] = {with(f, h), with(1, h), with(h, f), with(1, f), with(b, f), with(b, f), with(b, f), with(b, b)};
  const char* names[8] = {"W1", "b1", "W2", "b2", "xq", "xk", "xv", "eta"};
  for (size_t i = 0; i < 8; ++i)
    PONDER_NEED(b >= 1 && h >= 1 && x[i].shape() == want[i], std::string("ttt_mlp_dual: for xq ") +
                                                                shape_str(xq.shape()) + ", " + names[i] + " " +
                                                                shape_str(x[i].shape()) + " must be " +
                                                                shape_str(want[i]));
  PONDER_NEED(x[8].dim() < 2 || x[8].shape()[x[8].dim() - 2] == 1,
              "ttt_mlp_dual: γ " + shape_str(x[8].shape()) + " must be one row per head (…, 1, f)");
}

MlpDualOperands mlp_operands(const std::array<Tensor, 10>& x, double eps) {
  check_mlp_dual(x);
  const Tensor& xq = x[4];
  const int64_t G = head_count(xq), b = xq.shape()[xq.dim() - 2], f = xq.shape().back(), h = x[0].shape().back();
  RowParams rp = row_params(xq, x[8], x[9], "ttt_mlp_dual");
  auto heads = [&](const Tensor& t, int64_t m, int64_t n) { return reshape(contiguous(t), {G, m, n}); };
  return {heads(x[0], f, h), heads(x[1], 1, h), heads(x[2], h, f), heads(x[3], 1, f), heads(x[4], b, f),
          heads(x[5], b, f), heads(x[6], b, f), heads(x[7], b, b), rp.gamma,           rp.beta,
          std::move(rp.rows), eps};
}

namespace {
// A caller's buffer for a kernel output shaped like `like` (a contiguous (G, m, c) operand): contiguous, of
// like's numel, on x's device and dtype; viewed as like's shape.
Tensor mlp_buffer(const char* op, const char* what, const Tensor& buf, const Tensor& x, const Tensor& like) {
  check_same(op, x, buf);
  PONDER_NEED(buf.is_contiguous() && buf.numel() == like.numel(), std::string(op) + ": " + what + " " +
                                                                      shape_str(buf.shape()) + " must be contiguous with " +
                                                                      std::to_string(like.numel()) + " elements");
  return reshape(buf, like.shape());
}
}  // namespace

void ttt_mlp_dual_into(const std::array<Tensor, 5>& y, const Tensor& saved, const std::array<Tensor, 10>& x,
                       double eps) {
  const MlpDualOperands o = mlp_operands(x, eps);
  const int64_t G = o.xq.shape()[0], b = o.xq.shape()[1], f = o.xq.shape()[2], h = o.W1.shape()[2];
  const Tensor* like[5] = {&o.xq, &o.W1, &o.b1, &o.W2, &o.b2};
  const char* names[5] = {"out", "W1'", "b1'", "W2'", "b2'"};
  std::array<Tensor, 5> yh;
  for (size_t i = 0; i < 5; ++i) yh[i] = mlp_buffer("ttt_mlp_dual", names[i], y[i], x[4], *like[i]);
  check_same("ttt_mlp_dual", x[4], saved);
  const Shape ss{G, kMlpDualSaved(b, f, h)};
  PONDER_NEED(saved.shape() == ss && saved.is_contiguous(), "ttt_mlp_dual: the saved intermediates " +
                                                                shape_str(saved.shape()) + " must be a contiguous " +
                                                                shape_str(ss));
  if (G > 0) be(x[4]).ttt_mlp_dual(yh, saved, o);
}

std::pair<std::array<Tensor, 5>, Tensor> ttt_mlp_dual(const std::array<Tensor, 10>& x, double eps) {
  check_mlp_dual(x);
  const Tensor& xq = x[4];
  const int64_t G = head_count(xq), b = xq.shape()[xq.dim() - 2], f = xq.shape().back(), h = x[0].shape().back();
  const size_t from[5] = {4, 0, 1, 2, 3};  // each output is shaped like this input
  std::array<Tensor, 5> y;
  for (size_t i = 0; i < 5; ++i) y[i] = Tensor::empty(x[from[i]].shape(), xq.dtype(), xq.device());
  Tensor saved = Tensor::empty({G, kMlpDualSaved(b, f, h)}, xq.dtype(), xq.device());
  ttt_mlp_dual_into(y, saved, x, eps);
  return {y, saved};
}

void ttt_mlp_dual_backward_into(const std::array<Tensor, 10>& g, const std::array<Tensor, 10>& x, double eps,
                                const Tensor& saved, const std::array<Tensor, 5>& dy) {
  const char* op = "ttt_mlp_dual_backward";
  const MlpDualOperands o = mlp_operands(x, eps);
  const int64_t G = o.xq.shape()[0], b = o.xq.shape()[1], f = o.xq.shape()[2], h = o.W1.shape()[2];
  if (saved.defined()) {  // else the kernel recomputes them
    check_same(op, x[4], saved);
    const Shape ss{G, kMlpDualSaved(b, f, h)};
    PONDER_NEED(saved.shape() == ss && saved.is_contiguous(), std::string(op) + ": the saved intermediates " +
                                                                  shape_str(saved.shape()) + " must be a contiguous " +
                                                                  shape_str(ss));
  }
  const Tensor* like[5] = {&o.xq, &o.W1, &o.b1, &o.W2, &o.b2};
  std::array<Tensor, 5> d;
  for (size_t i = 0; i < 5; ++i) {
    check_same(op, x[4], dy[i]);
    PONDER_NEED(dy[i].numel() == like[i]->numel(), std::string(op) + ": upstream gradient " + std::to_string(i) +
                                                       " " + shape_str(dy[i].shape()) + " must have " +
                                                       std::to_string(like[i]->numel()) + " elements");
    d[i] = reshape(contiguous(dy[i]), like[i]->shape());
  }
  const Tensor* gl[10] = {&o.W1, &o.b1, &o.W2, &o.b2, &o.xq, &o.xk, &o.xv, &o.eta, &o.gamma, &o.gamma};
  const char* names[10] = {"dW1", "db1", "dW2", "db2", "dxq", "dxk", "dxv", "deta", "dγ", "dβ"};
  std::array<Tensor, 10> gh;
  for (size_t i = 0; i < 10; ++i) gh[i] = mlp_buffer(op, names[i], g[i], x[4], *gl[i]);
  if (G == 0) zero_all(gh);
  else be(x[4]).ttt_mlp_dual_backward(gh, o, saved, d);
}

std::array<Tensor, 10> ttt_mlp_dual_backward(const std::array<Tensor, 10>& x, double eps, const Tensor& saved,
                                             const std::array<Tensor, 5>& dy) {
  check_mlp_dual(x);
  std::array<Tensor, 10> g;
  for (size_t i = 0; i < 10; ++i) g[i] = Tensor::empty(x[i].shape(), x[4].dtype(), x[4].device());
  ttt_mlp_dual_backward_into(g, x, eps, saved, dy);
  return g;
}

Tensor one_hot(const Tensor& idx, int64_t n, DType dtype) {
  Tensor i = int64_contiguous(idx, idx.device(), "one_hot");
  PONDER_NEED(n > 0, "one_hot: number of classes must be positive");
  Shape s = i.shape();
  s.push_back(n);
  Tensor out = Tensor::empty(s, dtype, i.device());
  be(i).one_hot(out, i);
  return out;
}

}  // namespace raw
}  // namespace ponder
