// The fused ops' definitions (autograd/compose.h). Nested fused ops are called through their front ends
// (autograd/ops.h, autograd/fused.h), so a composition uses whichever of them has a kernel here; the statistics
// x̂, s and y, r are computed once per composition, as the kernels compute them, so a composition run entirely
// from primitives counts what its kernel does.
#include "autograd/compose.h"

#include <vector>

#include "autograd/fused.h"
#include "tensor/kernels.h"

namespace ponder::compose {
namespace {

// Mean over the last axis plus a shift, as one sum and one affine map (the shift is where eps goes).
Tensor row_mean(const Tensor& t, double shift = 0) {
  return affine(sum(t, {-1}, true), 1.0 / double(t.shape().back()), shift);
}
// t seen with x's shape (a view: what a kernel reads when t broadcasts).
Tensor like(const Tensor& t, const Tensor& x) { return t.shape() == x.shape() ? t : expand(t, x.shape()); }

struct Stats {
  Tensor xh, s;  // x̂ (shape of x) and its scale s (rows, 1); for RMS: y and r
};
Stats ln_stats(const Tensor& x, double eps) {
  Tensor xc = sub(x, row_mean(x));
  Tensor s = rsqrt(row_mean(mul(xc, xc), eps));
  return {mul(xc, s), s};
}
Stats rms_stats(const Tensor& x, double eps) {
  Tensor r = rsqrt(row_mean(mul(x, x), eps));
  return {mul(x, r), r};
}
// s·(v − m1 − x̂·m2)
Tensor ln_project(const Stats& st, const Tensor& v, const Tensor& m1, const Tensor& m2) {
  return mul(sub(sub(v, m1), mul(st.xh, m2)), st.s);
}
void check_rows(const char* op, const Tensor& x) {
  if (x.dim() < 1) throw std::invalid_argument(std::string(op) + ": input needs at least 1 axis, got a scalar");
}

}  // namespace

Tensor layer_norm_rows(const Tensor& x, double eps) {
  check_rows("layer_norm_rows", x);
  return ln_stats(x, eps).xh;
}

Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps) {
  check_rows("layer_norm_backward", x);
  const Tensor vx = like(v, x);
  const Stats st = ln_stats(x, eps);
  return ln_project(st, vx, row_mean(vx), row_mean(mul(vx, st.xh)));
}

// z = s·(v − m1 − x̂·m2) with m1 = mean v, m2 = mean(v⊙x̂) is linear in v with a self-adjoint map, so
// dv = layer_norm_backward(x, dz). Through x̂ (s held): dx̂ = −s·(m2·dz + mean(dz⊙x̂)·v); through s itself:
// ds = Σ dz⊙z / s and ∂s/∂x = −s²·x̂/D. Together dx = layer_norm_backward(x, dx̂) − s·mean(dz⊙z)·x̂.
std::pair<Tensor, Tensor> layer_norm_vjp(const Tensor& x, const Tensor& v, const Tensor& dz, double eps) {
  check_rows("layer_norm_vjp", x);
  const Tensor vx = like(v, x), gx = like(dz, x);
  const Stats st = ln_stats(x, eps);
  Tensor m2 = row_mean(mul(vx, st.xh));
  Tensor z = ln_project(st, vx, row_mean(vx), m2);
  Tensor b = row_mean(mul(gx, st.xh)), cz = row_mean(mul(gx, z));
  Tensor dv = ln_project(st, gx, row_mean(gx), b);
  Tensor dxh = mul(add(mul(gx, m2), mul(vx, b)), neg(st.s));
  Tensor proj = ln_project(st, dxh, row_mean(dxh), row_mean(mul(dxh, st.xh)));
  return {sub(proj, mul(st.xh, mul(st.s, cz))), dv};
}

Tensor rms_norm_rows(const Tensor& x, double eps) {
  check_rows("rms_norm_rows", x);
  return rms_stats(x, eps).xh;
}

Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps) {
  check_rows("rms_norm_backward", x);
  const Tensor gx = like(g, x);
  const Stats st = rms_stats(x, eps);
  return mul(sub(gx, mul(st.xh, row_mean(mul(gx, st.xh)))), st.s);
}

Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps) {
  raw::check_row_params("layer_norm_affine", x, gamma, beta);
  return add(mul(ponder::layer_norm_rows(x, eps), gamma), beta);
}

std::array<Tensor, 3> layer_norm_affine_backward(const Tensor& x, const Tensor& gamma, const Tensor& g, double eps) {
  raw::check_row_params("layer_norm_affine_backward", x, gamma, gamma);
  const Tensor gx = like(g, x);
  return {ponder::layer_norm_backward(x, mul(gx, gamma), eps),
          sum_to(mul(gx, ponder::layer_norm_rows(x, eps)), gamma.shape()), sum_to(gx, gamma.shape())};
}

Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps) {
  raw::check_row_params("rms_norm_affine", x, weight, weight);
  return mul(ponder::rms_norm_rows(x, eps), weight);
}

std::array<Tensor, 2> rms_norm_affine_backward(const Tensor& x, const Tensor& weight, const Tensor& g, double eps) {
  raw::check_row_params("rms_norm_affine_backward", x, weight, weight);
  const Tensor gx = like(g, x);
  return {ponder::rms_norm_backward(x, mul(gx, weight), eps),
          sum_to(mul(gx, ponder::rms_norm_rows(x, eps)), weight.shape())};
}

Tensor ln_l2_grad(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta, double eps) {
  raw::check_row_params("ln_l2_grad", z, gamma, beta);
  Tensor y = add(mul(ponder::layer_norm_rows(z, eps), gamma), beta);
  return ponder::layer_norm_backward(z, mul(sub(y, like(t, z)), gamma), eps);
}

// gy = r⊙γ with r = γ⊙x̂ + β − t, and out = layer_norm_backward(z, gy). Through gy: dgy (and part of dz) from
// layer_norm_vjp; then x̂ gets dgy⊙γ², γ gets dgy⊙(r + γ⊙x̂), β gets dgy⊙γ and t gets −dgy⊙γ.
std::array<Tensor, 4> ln_l2_grad_vjp(const Tensor& z, const Tensor& t, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& w, double eps) {
  raw::check_row_params("ln_l2_grad_vjp", z, gamma, beta);
  Tensor xh = ponder::layer_norm_rows(z, eps);
  Tensor r = sub(add(mul(xh, gamma), beta), like(t, z));
  auto [dz_a, dgy] = ponder::layer_norm_vjp(z, mul(r, gamma), like(w, z), eps);
  Tensor dgyg = mul(dgy, gamma);
  Tensor dz = add(dz_a, ponder::layer_norm_backward(z, mul(dgyg, gamma), eps));
  Tensor dt = neg(dgyg);
  Tensor db = sum_to(dgyg, beta.shape());
  Tensor dg = sum_to(mul(dgy, add(r, mul(gamma, xh))), gamma.shape());
  return {dz, dt, dg, db};
}

namespace {
Tensor act(GateAct a, const Tensor& x) { return a == GateAct::Silu ? silu(x) : gelu_tanh(x); }
Tensor act_grad(GateAct a, const Tensor& x) { return a == GateAct::Silu ? silu_grad(x) : gelu_tanh_grad(x); }
}  // namespace

Tensor act_mul(GateAct a, const Tensor& x, const Tensor& b) { return mul(act(a, x), b); }  // b may broadcast

Tensor rope_rotate(const Tensor& x, const Tensor& cs, const Tensor& sn) {
  raw::check_rope(x, cs, sn);
  const int64_t f = x.shape().back();
  Tensor a = slice(x, -1, 0, f, 2), b = slice(x, -1, 1, f, 2);  // (…, N, f/2)
  Tensor even = sub(mul(a, cs), mul(b, sn));
  Tensor odd = add(mul(a, sn), mul(b, cs));
  return reshape(stack({even, odd}, int(x.dim())), x.shape());
}

std::pair<Tensor, Tensor> act_mul_backward(GateAct a, const Tensor& x, const Tensor& b, const Tensor& g) {
  raw::check_gate("act_mul_backward", x, b);
  raw::check_gate("act_mul_backward", x, g);
  return {mul(mul(g, b), act_grad(a, x)), mul(g, act(a, x))};
}

Tensor sum_squares_scalar(const Tensor& t) {
  NoGradGuard ng;
  Tensor d = to_dtype(t, DType::F64);
  return sum(mul(d, d));
}

double sum_squares(const Tensor& t) { return sum_squares_scalar(t).item(); }

void adamw_step_(const Tensor& p, const Tensor& m, const Tensor& v, const Tensor& g, const AdamWCoeffs& c) {
  NoGradGuard ng;
  raw::check_adamw(p, m, v, g);
  raw::copy_(m, add(affine(m, c.beta1, 0), affine(g, 1 - c.beta1, 0)));
  raw::copy_(v, add(affine(v, c.beta2, 0), affine(mul(g, g), 1 - c.beta2, 0)));
  Tensor denom = affine(sqrt(affine(v, 1 / c.bc2, 0)), 1, c.eps);
  Tensor update = div(affine(m, c.lr / c.bc1, 0), denom);
  raw::copy_(p, sub(affine(p, 1 - c.lr * c.weight_decay, 0), update));
}

namespace {
// 1 where query i may not see key j, (n, T) in q's dtype on q's device; built on the host (0 FLOPs: a table).
Tensor hidden_keys(const Tensor& q, int64_t T, const AttnGeometry& g) {
  const int64_t n = q.shape()[q.dim() - 2];
  std::vector<double> m(size_t(n * T), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < T; ++j) {
      const int64_t lag = g.t0 + i - (g.first + j);
      m[size_t(i * T + j)] = lag < 0 || (g.window && lag >= g.window) ? 1.0 : 0.0;
    }
  return raw::to_device(Tensor::from_vector(m, {n, T}, q.dtype()), q.device());
}
Tensor attention_probs(const Tensor& q, const Tensor& k, const AttnGeometry& g) {
  raw::check_attention(q, k, k, g);
  Tensor scores = affine(matmul(q, transpose(k, -1, -2)), g.scale, 0);  // (…, n, T)
  return softmax(masked_fill(scores, hidden_keys(q, k.shape()[k.dim() - 2], g), -1e9), -1);
}
}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo) {
  raw::check_attention(q, k, v, geo);
  return matmul(attention_probs(q, k, geo), v);
}

std::array<Tensor, 3> attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dy,
                                         const AttnGeometry& geo) {
  raw::check_attention(q, k, v, geo);
  Tensor p = attention_probs(q, k, geo);
  Tensor dp = matmul(dy, transpose(v, -1, -2));
  Tensor ds = affine(mul(p, sub(dp, sum(mul(dp, p), {-1}, true))), geo.scale, 0);
  return {matmul(ds, k), matmul(transpose(ds, -1, -2), q), matmul(transpose(p, -1, -2), dy)};
}

// ---- TTT-Linear's dual form

namespace {
struct DualParts {  // what the forward and its VJP share, computed once
  Tensor t, z, g, e, s, a, zb;
};
DualParts dual_parts(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                     const Tensor& eta, const Tensor& gamma, const Tensor& beta, double eps,
                     const std::function<void(int)>& mark) {
  raw::check_dual(W, bias, xq, xk, xv, eta);
  DualParts p;
  p.t = sub(xv, xk);
  p.z = add(matmul(xk, W), bias);
  if (mark) mark(0);
  p.g = ponder::ln_l2_grad(p.z, p.t, gamma, beta, eps);
  if (mark) mark(1);
  p.e = tril(eta);
  p.s = matmul(xq, transpose(xk, -1, -2));
  p.a = mul(p.e, p.s);
  p.zb = add(sub(matmul(xq, W), matmul(p.a, p.g)), sub(bias, matmul(p.e, p.g)));
  return p;
}
// ηl as a column (…, b, 1): the weights of the carried update.
Tensor eta_last(const Tensor& eta) {
  const int r = int(eta.dim()) - 2;
  const int64_t b = eta.shape()[size_t(r)];
  return transpose(slice(eta, r, b - 1, b), -1, -2);
}
}  // namespace

std::array<Tensor, 3> ttt_linear_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk,
                                      const Tensor& xv, const Tensor& eta, const Tensor& gamma, const Tensor& beta,
                                      double eps, const std::function<void(int)>& mark) {
  const DualParts p = dual_parts(W, bias, xq, xk, xv, eta, gamma, beta, eps, mark);
  Tensor out = add(xq, ponder::layer_norm_affine(p.zb, gamma, beta, eps));
  if (mark) mark(2);
  const Tensor el = eta_last(eta);
  Tensor W2 = sub(W, matmul(transpose(mul(el, xk), -1, -2), p.g));
  Tensor b2 = sub(bias, sum(mul(el, p.g), {-2}, true));
  if (mark) mark(3);
  return {out, W2, b2};
}

// Backwards through zb = xq·W + bias − (A + E)·G, A = E⊙S, S = xq·xkᵀ: dM = −dzb·Gᵀ reaches A and E, so
// dS = dM⊙E and dE = dM⊙(S + 1). Through W' = W − Pᵀ·G, P = ηl⊙xk, and bias' = bias − ηlᵀ·G: dP = −G·dW'ᵀ,
// dG −= P·dW' + ηl·dbias', dηl = Σ_c (xk⊙dP − G⊙dbias'). Then G's VJP (ln_l2_grad_vjp) gives dZ and the
// target's gradient, and Z = xk·W + bias the rest.
std::array<Tensor, 8> ttt_linear_dual_backward(const Tensor& W, const Tensor& bias, const Tensor& xq,
                                               const Tensor& xk, const Tensor& xv, const Tensor& eta,
                                               const Tensor& gamma, const Tensor& beta, const Tensor& dout,
                                               const Tensor& dW, const Tensor& dbias, double eps,
                                               const std::function<void()>& recomputed) {
  const DualParts p = dual_parts(W, bias, xq, xk, xv, eta, gamma, beta, eps, {});
  if (recomputed) recomputed();
  // γ and β seen row by row: their two gradients are added per row and summed once, so the count depends on the
  // rows only (not on how many distinct γ there are).
  const Tensor gr = like(gamma, xq), br = like(beta, xq);
  auto [dzb, dgam, dbet] = ponder::layer_norm_affine_backward(p.zb, gr, dout, eps);
  const Tensor Wt = transpose(W, -1, -2);
  Tensor dm = neg(matmul(dzb, transpose(p.g, -1, -2)));
  Tensor ds = mul(dm, p.e);
  Tensor de = tril(mul(dm, affine(p.s, 1, 1)));
  Tensor dxq = add(add(dout, matmul(dzb, Wt)), matmul(ds, xk));
  Tensor dxk = matmul(transpose(ds, -1, -2), xq);
  Tensor dw = add(matmul(transpose(xq, -1, -2), dzb), dW);
  Tensor db = add(sum(dzb, {-2}, true), dbias);
  const Tensor el = eta_last(eta);
  Tensor dp = neg(matmul(p.g, transpose(dW, -1, -2)));
  Tensor dg = neg(add(add(matmul(transpose(add(p.a, p.e), -1, -2), dzb), matmul(mul(el, xk), dW)), mul(el, dbias)));
  dxk = add(dxk, mul(el, dp));
  Tensor del = sub(sum(mul(xk, dp), {-1}, true), sum(mul(p.g, dbias), {-1}, true));  // (…, b, 1)
  auto [dz, dt, dgam2, dbet2] = ponder::ln_l2_grad_vjp(p.z, p.t, gr, br, dg, eps);
  dxk = add(sub(dxk, dt), matmul(dz, Wt));
  dw = add(dw, matmul(transpose(xk, -1, -2), dz));
  db = add(db, sum(dz, {-2}, true));
  const int r = int(eta.dim()) - 2;
  Tensor deta = add(de, pad_slice(transpose(del, -1, -2), eta.shape(), r, eta.shape()[size_t(r)] - 1));
  return {dw, db, dxq, dxk, dt, deta, sum_to(add(dgam, dgam2), gamma.shape()), sum_to(add(dbet, dbet2), beta.shape())};
}

namespace {
// W' = W − (ηl⊙x)ᵀ·g and bias' = bias − Σ_j ηl_j·g_j: the state a dual form carries to the next mini-batch.
std::pair<Tensor, Tensor> carried(const Tensor& W, const Tensor& bias, const Tensor& el, const Tensor& x,
                                  const Tensor& g) {
  return {sub(W, matmul(transpose(mul(el, x), -1, -2), g)), sub(bias, sum(mul(el, g), {-2}, true))};
}
// Zb = x·W + bias − (E⊙(x·yᵀ))·G − E·G: a layer's outputs for the queries x after the mini-batch's steps, y the
// keys' inputs to that layer and G its inner gradients.
Tensor combined(const Tensor& x, const Tensor& y, const Tensor& W, const Tensor& bias, const Tensor& G,
                const Tensor& e) {
  const Tensor a = mul(e, matmul(x, transpose(y, -1, -2)));
  return add(sub(matmul(x, W), matmul(a, G)), sub(bias, matmul(e, G)));
}
}  // namespace

std::array<Tensor, 5> ttt_mlp_dual(const std::array<Tensor, 10>& x, double eps, const std::function<void(int)>& mark) {
  const Tensor &W1 = x[0], &b1 = x[1], &W2 = x[2], &b2 = x[3], &xq = x[4], &xk = x[5], &xv = x[6], &eta = x[7];
  const Tensor &gamma = x[8], &beta = x[9];
  const Tensor t = sub(xv, xk);
  const Tensor z1 = add(matmul(xk, W1), b1), x2 = gelu_tanh(z1), z2 = add(matmul(x2, W2), b2);
  if (mark) mark(0);
  const Tensor g2 = ponder::ln_l2_grad(z2, t, gamma, beta, eps);
  const Tensor g1 = mul(matmul(g2, transpose(W2, -1, -2)), gelu_tanh_grad(z1));
  if (mark) mark(1);
  const Tensor e = tril(eta);
  const Tensor xb2 = gelu_tanh(combined(xq, xk, W1, b1, g1, e));
  Tensor out = add(xq, ponder::layer_norm_affine(combined(xb2, x2, W2, b2, g2, e), gamma, beta, eps));
  if (mark) mark(2);
  const Tensor el = eta_last(eta);
  auto [W1n, b1n] = carried(W1, b1, el, xk, g1);
  auto [W2n, b2n] = carried(W2, b2, el, x2, g2);
  if (mark) mark(3);
  return {out, W1n, b1n, W2n, b2n};
}

PrefixPairs prefix_pairs(int64_t b, Device device) {
  std::vector<double> flat, j, i, last;
  for (int64_t jj = 0; jj < b; ++jj)
    for (int64_t ii = jj; ii < b; ++ii) {
      if (ii == b - 1) last.push_back(double(flat.size()));
      flat.push_back(double(jj * b + ii));
      j.push_back(double(jj));
      i.push_back(double(ii));
    }
  auto index = [&](const std::vector<double>& v) {  // on the data's device: index ops take indices from there
    return raw::to_device(Tensor::from_vector(v, {int64_t(v.size())}, DType::I64), device);
  };
  return {index(flat), index(j), index(i), index(last)};
}

Tensor at_pairs(const Tensor& x, const PrefixPairs& pp) {
  const int r = int(x.dim()) - 2;
  Shape s(x.shape().begin(), x.shape().begin() + r);
  s.push_back(x.shape()[size_t(r)] * x.shape()[size_t(r) + 1]);
  return unsqueeze(index_select(reshape(transpose(x, -1, -2), s), r, pp.flat), -1);
}

Tensor ttt_prefix_steps(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w, const Tensor& gamma,
                        const Tensor& beta, int steps, double eps, const std::function<void(int)>& mark) {
  raw::check_prefix(z0, t, neg_m, w, gamma, steps);
  const int r = int(z0.dim()) - 2;
  const int64_t b = z0.shape()[size_t(r)], f = z0.shape().back();
  auto lead = [&](int64_t m, int64_t n) {
    Shape s(z0.shape().begin(), z0.shape().begin() + r);
    s.push_back(m);
    s.push_back(n);
    return s;
  };
  const PrefixPairs pp = prefix_pairs(b, z0.device());
  Tensor z0p, tp;  // what steps after the first read: Z0 and the targets at the pairs' rows j
  if (steps > 1) {
    z0p = index_select(z0, r, pp.j);
    tp = index_select(t, r, pp.j);
  }
  Tensor a;
  for (int k = 0; k < steps; ++k) {
    Tensor g;
    if (!a.defined()) {  // every position starts from W: the b rows' gradients, read at the pairs
      g = index_select(ponder::ln_l2_grad(z0, t, gamma, beta, eps), r, pp.j);
    } else {
      const Tensor grid = reshape(index_add(lead(b * b, f), r, pp.flat, a), lead(b, b * f));
      const Tensor z = add(z0p, index_select(reshape(matmul(neg_m, grid), lead(b * b, f)), r, pp.flat));
      if (mark) mark(0);
      g = ponder::ln_l2_grad(z, tp, gamma, beta, eps);
    }
    g = mul(w, g);
    if (mark) mark(1);
    a = a.defined() ? add(a, g) : g;
    if (mark) mark(2);
  }
  return a;
}

}  // namespace ponder::compose
