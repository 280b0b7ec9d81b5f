#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tensor/rng.h"

namespace ponder {
namespace {

// Fresh leaves (copies) so every evaluation starts from an empty graph.
std::vector<Tensor> fresh(const std::vector<Tensor>& inputs, const std::vector<bool>& diff) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor t = raw::clone(inputs[i]);
    if (diff[i]) set_requires_grad(t);
    xs.push_back(t);
  }
  return xs;
}

void check_inputs(const std::vector<Tensor>& inputs, const std::vector<bool>& diff) {
  if (diff.size() != inputs.size()) throw std::invalid_argument("gradcheck: one differentiable flag per input needed");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (diff[i] && inputs[i].dtype() != DType::F64)
      throw std::invalid_argument("gradcheck: input " + std::to_string(i) + " must be float64, got " +
                                  dtype_name(inputs[i].dtype()));
}

std::vector<double> eval(const TensorFn& f, const std::vector<Tensor>& xs) {
  NoGradGuard ng;
  return f(xs).to_vector();
}

}  // namespace

CheckResult gradcheck(const TensorFn& f, const std::vector<Tensor>& inputs, const std::vector<bool>& diff,
                      const CheckOptions& opt) {
  check_inputs(inputs, diff);
  std::vector<Tensor> xs = fresh(inputs, diff);
  Tensor y = f(xs);
  const int64_t n_out = y.numel();
  std::vector<Tensor> wrt;
  std::vector<size_t> wrt_idx;
  for (size_t i = 0; i < xs.size(); ++i)
    if (diff[i]) { wrt.push_back(xs[i]); wrt_idx.push_back(i); }

  // Analytical Jacobian rows: J[i][out][in].
  std::vector<std::vector<std::vector<double>>> ja(wrt.size(), std::vector<std::vector<double>>(size_t(n_out)));
  bool connected = requires_grad(y);
  for (int64_t o = 0; o < n_out; ++o) {
    if (!connected) break;
    std::vector<double> onehot(size_t(n_out), 0.0);
    onehot[size_t(o)] = 1.0;
    GradOptions go;
    go.retain_graph = true;
    go.allow_unused = true;
    auto g = grad({y}, wrt, {raw::to_device(Tensor::from_vector(onehot, y.shape(), y.dtype()), y.device())}, go);
    for (size_t i = 0; i < wrt.size(); ++i)
      ja[i][size_t(o)] = g[i].defined() ? g[i].to_vector() : std::vector<double>(size_t(wrt[i].numel()), 0.0);
  }

  CheckResult res;
  for (size_t i = 0; i < wrt.size(); ++i) {
    const int64_t n_in = wrt[i].numel();
    for (int64_t e = 0; e < n_in; ++e) {
      std::vector<Tensor> plus = fresh(inputs, std::vector<bool>(inputs.size(), false)), minus = plus;
      std::vector<double> base = inputs[wrt_idx[i]].to_vector();
      Shape s = inputs[wrt_idx[i]].shape();
      Device dev = inputs[wrt_idx[i]].device();  // perturbed copies live where the input does
      base[size_t(e)] += opt.eps;
      plus[wrt_idx[i]] = raw::to_device(Tensor::from_vector(base, s, DType::F64), dev);
      base[size_t(e)] -= 2 * opt.eps;
      minus[wrt_idx[i]] = raw::to_device(Tensor::from_vector(base, s, DType::F64), dev);
      std::vector<double> yp = eval(f, plus), ym = eval(f, minus);
      for (int64_t o = 0; o < n_out; ++o) {
        double num = (yp[size_t(o)] - ym[size_t(o)]) / (2 * opt.eps);
        double ana = connected ? ja[i][size_t(o)][size_t(e)] : 0.0;
        double err = std::abs(num - ana);
        res.max_abs_err = std::max(res.max_abs_err, err);
        res.checked++;
        if (!(err <= opt.atol + opt.rtol * std::abs(num)) && res.ok) {
          res.ok = false;
          std::ostringstream os;
          os << "input " << wrt_idx[i] << " element " << e << ", output " << o << ": analytical " << ana
             << " vs numerical " << num;
          res.message = os.str();
        }
      }
    }
  }
  return res;
}

CheckResult gradgradcheck(const TensorFn& f, const std::vector<Tensor>& inputs, const std::vector<bool>& diff,
                          const CheckOptions& opt) {
  check_inputs(inputs, diff);
  Tensor y0;
  {
    NoGradGuard ng;
    y0 = f(inputs);
  }
  Generator gen(opt.seed);
  Tensor v = raw::to_device(gen.normal(y0.shape(), 0, 1, DType::F64), y0.device());
  // G(x…, v) = flattened first-order gradients of <f(x), v>, recorded for differentiation.
  TensorFn G = [&](const std::vector<Tensor>& xv) {
    std::vector<Tensor> xs(xv.begin(), xv.end() - 1);
    std::vector<Tensor> wrt;
    for (size_t i = 0; i < xs.size(); ++i)
      if (diff[i]) {
        if (!requires_grad(xs[i])) {  // evaluations without grad: make the input a leaf here
          xs[i] = detach(xs[i]);
          set_requires_grad(xs[i]);
        }
        wrt.push_back(xs[i]);
      }
    SetGradGuard on(true);
    Tensor y = f(xs);
    std::vector<Tensor> parts;
    if (!requires_grad(y)) {
      for (const Tensor& w : wrt) parts.push_back(reshape(mul(w, scalar_like(w, 0)), {-1}));
      return cat(parts, 0);
    }
    GradOptions go;
    go.create_graph = true;
    go.allow_unused = true;
    auto g = grad({y}, wrt, {xv.back()}, go);
    for (size_t i = 0; i < g.size(); ++i)
      parts.push_back(reshape(g[i].defined() ? g[i] : mul(wrt[i], scalar_like(wrt[i], 0)), {-1}));
    return cat(parts, 0);
  };
  std::vector<Tensor> xv = inputs;
  xv.push_back(v);
  std::vector<bool> dv = diff;
  dv.push_back(true);
  return gradcheck(G, xv, dv, opt);
}

namespace {

// A random direction over the differentiable inputs, of unit norm overall (zeros for the other inputs).
std::vector<Tensor> random_direction(const std::vector<Tensor>& inputs, const std::vector<bool>& diff, Generator& gen) {
  std::vector<Tensor> v(inputs.size());
  double sq = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!diff[i]) continue;
    v[i] = gen.normal(inputs[i].shape(), 0, 1, DType::F64);
    for (double x : v[i].to_vector()) sq += x * x;
  }
  const double scale = sq > 0 ? 1.0 / std::sqrt(sq) : 0.0;
  for (Tensor& t : v)
    if (t.defined()) t = raw::unary(UnaryOp::Affine, t, scale, 0.0);
  return v;
}

// x + c·v for the differentiable inputs, as fresh leaves.
std::vector<Tensor> shifted(const std::vector<Tensor>& x, const std::vector<bool>& diff, const std::vector<Tensor>& v,
                            double c) {
  std::vector<Tensor> out;
  for (size_t i = 0; i < x.size(); ++i) {
    Tensor t = diff[i] ? raw::binary(BinaryOp::Add, x[i], raw::unary(UnaryOp::Affine, v[i], c, 0.0)) : raw::clone(x[i]);
    if (diff[i]) set_requires_grad(t);
    out.push_back(t);
  }
  return out;
}

double dot(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined() || !b[i].defined()) continue;
    const std::vector<double> x = a[i].to_vector(), y = b[i].to_vector();
    for (size_t j = 0; j < x.size(); ++j) s += x[j] * y[j];
  }
  return s;
}

// ∇f at xs over the differentiable inputs (undefined elsewhere and where unused), with the graph kept when `create`.
std::vector<Tensor> gradient(const TensorFn& f, const std::vector<Tensor>& xs, const std::vector<bool>& diff,
                             bool create) {
  const Tensor y = f(xs);
  if (y.numel() != 1) throw std::invalid_argument("directional gradcheck: f must return one number");
  std::vector<Tensor> wrt;
  for (size_t i = 0; i < xs.size(); ++i)
    if (diff[i]) wrt.push_back(xs[i]);
  std::vector<Tensor> out(xs.size());
  if (!requires_grad(y)) return out;
  GradOptions go;
  go.allow_unused = true;
  go.create_graph = create;
  const std::vector<Tensor> g = grad({y}, wrt, {}, go);
  for (size_t i = 0, k = 0; i < xs.size(); ++i)
    if (diff[i]) out[i] = g[k++];
  return out;
}

void record(CheckResult& r, double analytic, double numeric, const CheckOptions& opt, const std::string& what) {
  const double err = std::abs(analytic - numeric);
  r.max_abs_err = std::max(r.max_abs_err, err);
  ++r.checked;
  if (r.ok && err > opt.atol + opt.rtol * std::abs(numeric)) {
    std::ostringstream m;
    m << what << ": analytic " << analytic << ", finite differences " << numeric;
    r.ok = false;
    r.message = m.str();
  }
}

}  // namespace

CheckResult directional_gradcheck(const TensorFn& f, const std::vector<Tensor>& inputs, const std::vector<bool>& diff,
                                  int directions, const CheckOptions& opt) {
  check_inputs(inputs, diff);
  Generator gen(opt.seed);
  CheckResult r;
  const std::vector<Tensor> g = gradient(f, fresh(inputs, diff), diff, false);
  for (int d = 0; d < directions; ++d) {
    const std::vector<Tensor> v = random_direction(inputs, diff, gen);
    const double plus = eval(f, shifted(inputs, diff, v, opt.eps))[0];
    const double minus = eval(f, shifted(inputs, diff, v, -opt.eps))[0];
    record(r, dot(g, v), (plus - minus) / (2 * opt.eps), opt, "direction " + std::to_string(d) + " <grad, v>");
  }
  return r;
}

CheckResult directional_gradgradcheck(const TensorFn& f, const std::vector<Tensor>& inputs,
                                      const std::vector<bool>& diff, int directions, const CheckOptions& opt) {
  check_inputs(inputs, diff);
  Generator gen(opt.seed + 1);
  CheckResult r;
  for (int d = 0; d < directions; ++d) {
    const std::vector<Tensor> v = random_direction(inputs, diff, gen), w = random_direction(inputs, diff, gen);
    // <∇f(x), v> as a differentiable function of x; its gradient along w is <H·v, w>.
    std::vector<Tensor> xs = fresh(inputs, diff);
    const std::vector<Tensor> g = gradient(f, xs, diff, true);
    std::vector<Tensor> gv_terms;
    for (size_t i = 0; i < xs.size(); ++i)
      if (g[i].defined() && requires_grad(g[i])) gv_terms.push_back(sum(mul(g[i], v[i])));
    double hvw = 0;
    if (!gv_terms.empty()) {
      Tensor gv = gv_terms[0];
      for (size_t i = 1; i < gv_terms.size(); ++i) gv = add(gv, gv_terms[i]);
      std::vector<Tensor> wrt;
      for (size_t i = 0; i < xs.size(); ++i)
        if (diff[i]) wrt.push_back(xs[i]);
      GradOptions go;
      go.allow_unused = true;
      const std::vector<Tensor> h = grad({gv}, wrt, {}, go);
      std::vector<Tensor> hv(xs.size());
      for (size_t i = 0, k = 0; i < xs.size(); ++i)
        if (diff[i]) hv[i] = h[k++];
      hvw = dot(hv, w);
    }
    const double plus = dot(gradient(f, shifted(inputs, diff, w, opt.eps), diff, false), v);
    const double minus = dot(gradient(f, shifted(inputs, diff, w, -opt.eps), diff, false), v);
    record(r, hvw, (plus - minus) / (2 * opt.eps), opt, "direction " + std::to_string(d) + " <H v, w>");
  }
  return r;
}

}  // namespace ponder
