#include "tensor/cuda/plan.h"

#include <algorithm>
#include <climits>

#include "tensor/cpu/loop.h"

namespace ponder::cuda {

Geometry<1> plan_map(const Tensor& out) { return collapse<1>(out.shape(), {out.strides()}); }

Geometry<2> plan_map(const Tensor& out, const Tensor& x) {
  return collapse<2>(out.shape(), {out.strides(), cpu::broadcast_strides(x, out.shape())});
}

Geometry<3> plan_map(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Shape& s = out.shape();
  return collapse<3>(s, {out.strides(), cpu::broadcast_strides(a, s), cpu::broadcast_strides(b, s)});
}

Geometry<4> plan_map(const Tensor& out, const Tensor& c, const Tensor& a, const Tensor& b) {
  const Shape& s = out.shape();
  return collapse<4>(s, {out.strides(), cpu::broadcast_strides(c, s), cpu::broadcast_strides(a, s),
                         cpu::broadcast_strides(b, s)});
}

ReducePlan plan_reduce(const Tensor& out, const Tensor& x) {
  // An axis is reduced where out has size 1 and x does not (the rule of tensor/cpu/reduce.cpp).
  Shape kept(x.dim(), 1), reduced(x.dim(), 1);
  for (size_t d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1) continue;
    (out.shape()[d] == 1 ? reduced : kept)[d] = x.shape()[d];
  }
  return {collapse<2>(kept, {x.strides(), out.strides()}), collapse<1>(reduced, {x.strides()})};
}

CumsumPlan plan_cumsum(const Tensor& out, const Tensor& x, int axis) {
  Shape lines = x.shape();
  lines[size_t(axis)] = 1;
  return {collapse<2>(lines, {x.strides(), out.strides()}), x.shape()[size_t(axis)], x.strides()[size_t(axis)],
          out.strides()[size_t(axis)]};
}

MatLayout mat_layout(const Tensor& t) {
  if (auto l = blas_layout(t)) return *l;
  throw std::logic_error("cuda::matmul: operand is not BLAS-compatible (caller must pass a contiguous copy)");
}

namespace {

// offset(bi) = Σ_d i_d·s[d] over the batch axes is `stride`·bi for every bi exactly when each axis of
// size > 1 has stride = `stride` × (number of batch entries inside it).
bool linear_batch(const Shape& batch, const Shape& s, int64_t& stride) {
  stride = 0;
  int64_t inner = 1;
  bool seen = false;
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (!seen) stride = s[d];
    else if (s[d] != stride * inner) return false;
    seen = true;
    inner *= batch[d];
  }
  return true;
}

void check_int(int64_t v, const char* what) {
  if (v > INT_MAX) throw std::invalid_argument(std::string("cuda::matmul: ") + what + " " + std::to_string(v) +
                                               " exceeds cuBLAS's 32-bit limit");
}

}  // namespace

GemmPlan plan_gemm(const Tensor& out, const Tensor& a, const Tensor& b) {
  const size_t d = out.dim();
  const Shape batch(out.shape().begin(), out.shape().end() - 2);
  const MatLayout la = mat_layout(a), lb = mat_layout(b);
  GemmPlan p;
  p.transa = lb.trans;
  p.transb = la.trans;
  p.m = out.shape()[d - 1];
  p.n = out.shape()[d - 2];
  p.k = a.shape()[d - 1];
  p.lda = lb.ld;
  p.ldb = la.ld;
  p.ldc = p.m;
  p.batch = shape_numel(batch);
  p.stride_c = p.m * p.n;
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.batch}) check_int(v, "dimension");
  // cuBLAS's A walks b's batch entries and its B walks a's.
  const Shape sa = cpu::broadcast_strides(b, out.shape()), sb = cpu::broadcast_strides(a, out.shape());
  p.uniform = linear_batch(batch, sa, p.stride_a) && linear_batch(batch, sb, p.stride_b);
  p.inner = p.batch;
  if (p.uniform) return p;
  // The first s0 whose trailing axes batch[s0…] both operands walk linearly (the empty tail always does).
  size_t s0 = 1;
  for (; s0 < batch.size(); ++s0) {
    const Shape tail(batch.begin() + long(s0), batch.end());
    const Shape ta(sa.begin() + long(s0), sa.begin() + long(batch.size())),
        tb(sb.begin() + long(s0), sb.begin() + long(batch.size()));
    if (linear_batch(tail, ta, p.stride_a) && linear_batch(tail, tb, p.stride_b)) break;
  }
  if (s0 == batch.size()) p.stride_a = p.stride_b = 0;
  p.inner = shape_numel(Shape(batch.begin() + long(s0), batch.end()));
  const int64_t calls = p.batch / p.inner;
  p.offset_a.resize(size_t(calls));
  p.offset_b.resize(size_t(calls));
  for (int64_t ci = 0; ci < calls; ++ci) {
    int64_t r = ci, oa = 0, ob = 0;
    for (size_t ax = s0; ax-- > 0;) {
      const int64_t i = r % batch[ax];
      r /= batch[ax];
      oa += i * sa[ax];
      ob += i * sb[ax];
    }
    p.offset_a[size_t(ci)] = oa;
    p.offset_b[size_t(ci)] = ob;
  }
  return p;
}

}  // namespace ponder::cuda
