#include "ttt/ttt_layer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "autograd/checkpoint.h"
#include "autograd/engine.h"
#include "ttt/conv.h"
#include "ttt/rope.h"

namespace ponder::ttt {

namespace {
std::atomic<bool> g_scan_op{true};
}  // namespace
void set_scan_op(bool on) { g_scan_op = on; }
bool scan_op_enabled() { return g_scan_op; }
namespace {

// (B, N, d) → (B, H, N, f)
Tensor heads(const Tensor& x, int64_t H) {
  const Shape& s = x.shape();
  return permute(reshape(x, {s[0], s[1], H, s[2] / H}), {0, 2, 1, 3});
}

Tensor units(const Tensor& x, int64_t u0, int64_t u1, int64_t b) { return slice(x, 2, u0 * b, u1 * b); }

}  // namespace

TTTLayer::TTTLayer(const TTTConfig& cfg, int layer_index, Generator& gen, DType dt) : cfg_(cfg), layer_(layer_index) {
  const int64_t d = cfg.d, H = cfg.heads, f = cfg.head_dim(), h = cfg.hidden(), b = cfg.mini_batch, w = cfg.conv_width;
  if (d % H != 0 || f % 2 != 0)
    throw std::invalid_argument("TTT layer: width " + std::to_string(d) + " must split into " + std::to_string(H) +
                                " heads of even size");
  if (b < 1) throw std::invalid_argument("TTT layer: mini_batch must be positive, got " + std::to_string(b));
  const double sd = cfg.init_std;
  wq = trainable(gen.normal({d, d}, 0, sd, dt));
  if (!cfg.shared_qk) wk = trainable(gen.normal({d, d}, 0, sd, dt));
  wv = trainable(gen.normal({d, d}, 0, sd, dt));
  wo = trainable(gen.normal({d, d}, 0, sd, dt));
  if (cfg.gate) wg = trainable(gen.normal({d, d}, 0, sd, dt));
  if (cfg.shared_qk) {
    conv_q_w = trainable(gen.normal({d, w}, 0, sd, dt));
    conv_q_b = trainable(Tensor::zeros({d}, dt));
    conv_k_w = trainable(gen.normal({d, w}, 0, sd, dt));
    conv_k_b = trainable(Tensor::zeros({d}, dt));
  }
  lr_w = trainable(gen.normal({d, H}, 0, sd, dt));
  lr_b = trainable(Tensor::zeros({H}, dt));
  token_idx = trainable(Tensor::zeros({b}, dt));
  ln_gamma = trainable(Tensor::full({H, f}, 1.0, dt));
  ln_beta = trainable(Tensor::zeros({H, f}, dt));
  W1 = trainable(gen.normal({H, f, h}, 0, sd, dt));
  b1 = trainable(Tensor::zeros({H, 1, h}, dt));
  if (cfg.mlp) {
    W2 = trainable(gen.normal({H, h, f}, 0, sd, dt));
    b2 = trainable(Tensor::zeros({H, 1, f}, dt));
  }
  post_gamma = trainable(Tensor::full({d}, 1.0, dt));
  post_beta = trainable(Tensor::zeros({d}, dt));
}

std::vector<std::pair<const char*, Tensor*>> TTTLayer::fields() {
  return {{"wq", &wq}, {"wk", &wk}, {"wv", &wv}, {"wo", &wo}, {"wg", &wg}, {"conv_q_w", &conv_q_w},
          {"conv_q_b", &conv_q_b}, {"conv_k_w", &conv_k_w}, {"conv_k_b", &conv_k_b}, {"lr_w", &lr_w},
          {"lr_b", &lr_b}, {"token_idx", &token_idx}, {"ln_gamma", &ln_gamma}, {"ln_beta", &ln_beta}, {"W1", &W1},
          {"b1", &b1}, {"W2", &W2}, {"b2", &b2}, {"post_gamma", &post_gamma}, {"post_beta", &post_beta}};
}

std::vector<std::pair<std::string, Tensor*>> TTTLayer::named_refs() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (const auto& [name, t] : fields())
    if (t->defined()) out.push_back({name, t});
  return out;
}

std::vector<Tensor> TTTLayer::parameters() const {
  std::vector<Tensor> p;
  for (const auto& [name, t] : const_cast<TTTLayer*>(this)->named_refs()) p.push_back(*t);
  return p;
}

std::vector<std::string> TTTLayer::parameter_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : const_cast<TTTLayer*>(this)->named_refs()) names.push_back(name);
  return names;
}

Tensor TTTLayer::unit_step(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                           const Tensor& gamma, const Tensor& beta, int steps, const TTTRun& run,
                           UnitCost& cost) const {
  const int64_t H = cfg_.heads, f = cfg_.head_dim(), b = xq.shape()[2];
  InnerNorm n4{reshape(gamma, {1, H, 1, f}), reshape(beta, {1, H, 1, f})};
  CostMeter meter(&cost);
  if (steps == 0) {  // SKIP: queries read the carried weights; nothing is learned
    Tensor out = inner_output(state, xq, n4);
    meter.charge(&UnitCost::output);
    return out;
  }
  const bool dual = run.path == InnerPath::Dual;
  if (run.mode == StepMode::Prefix && (steps > 1 || run.prefix_path_at_one)) {
    if (dual && !state.mlp()) {  // TTT-Linear in closed form needs no per-position weights (docs/ttt.md §3.3)
      InnerState next;
      Tensor out = prefix_dual(state, xq, xk, xv, eta, n4, steps, next, &meter);
      state = next;
      return out;
    }
    InnerNorm n5{reshape(gamma, {1, H, 1, 1, f}), reshape(beta, {1, H, 1, 1, f})};
    InnerState per = per_position(state, b);
    for (int s = 0; s < steps; ++s)
      per = dual ? prefix_step_closed(per, xk, xv, eta, n5, &meter) : prefix_step(per, xk, xv, eta, n5, &meter);
    Tensor out = prefix_output(per, xq, n5);
    meter.charge(&UnitCost::output);
    state = position(per, b - 1);
    return out;
  }
  InnerState next;
  Tensor out = dual ? dual_step(state, xq, xk, xv, eta, n4, next, &meter)
                    : dual_step_autograd(state, xq, xk, xv, eta, n4, next, &meter);
  // Further carry steps improve only the state handed to later units.
  const Tensor eta_last = eta_last_row(eta);  // (B, H, b, 1)
  for (int s = 1; s < steps; ++s)
    next = dual ? carry_step_closed(next, xk, xv, eta_last, n4, &meter)
                : carry_step_autograd(next, xk, xv, eta_last, n4, &meter);
  state = next;
  return out;
}

namespace {
// The schedule's step count for unit u (1 without a schedule).
int decide(const TTTRun& run, int layer, int64_t u, int64_t b) {
  const int steps = run.schedule ? run.schedule->steps({layer, u, u * b, b}) : 1;
  if (steps < 0) throw std::invalid_argument("step schedule gave " + std::to_string(steps) + " steps");
  return steps;
}
}  // namespace

Tensor TTTLayer::scan_plain(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                            const Tensor& gamma, const Tensor& beta, int64_t u0, std::vector<UnitCost>* costs) const {
  const int64_t H = cfg_.heads, f = cfg_.head_dim();
  std::vector<UnitCost> c;
  InnerState next;
  Tensor out = dual_scan(state, xq, xk, xv, eta, {reshape(gamma, {1, H, 1, f}), reshape(beta, {1, H, 1, f})}, next, c);
  state = next;
  for (size_t i = 0; i < c.size() && costs; ++i) {
    c[i].layer = layer_;
    c[i].unit = u0 + int64_t(i);
    c[i].steps = 1;
    costs->push_back(c[i]);
  }
  return out;
}

Tensor TTTLayer::scan(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv, const Tensor& eta,
                      const Tensor& gamma, const Tensor& beta, int64_t u0, int64_t u1, const TTTRun& run,
                      std::vector<int>& decided, bool replay) const {
  const int64_t b = cfg_.mini_batch;
  std::vector<UnitCost>* costs = replay ? nullptr : run.costs;
  // A schedule that decides from the unit alone is asked for the whole chunk first (the same calls in the same
  // order). When every unit then gets one dual step and nothing is watched, the chunk is one op.
  if ((!run.schedule || run.schedule->decides_ahead()) && !replay) {
    for (int64_t u = u0; u < u1; ++u) decided.push_back(decide(run, layer_, u, b));
    replay = true;
  }
  const bool plain = replay && run.path == InnerPath::Dual && !run.watch && g_scan_op &&
                     !(run.mode == StepMode::Prefix && run.prefix_path_at_one) &&
                     std::all_of(decided.begin(), decided.end(), [](int k) { return k == 1; });
  if (plain) return scan_plain(state, xq, xk, xv, eta, gamma, beta, u0, costs);
  // The units' inputs as pieces of one split each: their gradients come back as one concatenation.
  const std::vector<int64_t> sizes(size_t(u1 - u0), b);
  const std::vector<Tensor> qs = split(xq, sizes, 2), ks = split(xk, sizes, 2), vs = split(xv, sizes, 2),
                            es = split(eta, std::vector<int64_t>(size_t(u1 - u0), 1), 2);
  std::vector<Tensor> outs;
  for (int64_t u = u0; u < u1; ++u) {
    const size_t i = size_t(u - u0);
    if (!replay) decided.push_back(decide(run, layer_, u, b));
    const int steps = decided[i];
    UnitCost cost{layer_, u, steps, 0, 0, 0, 0};
    outs.push_back(unit_step(state, qs[i], ks[i], vs[i], squeeze(es[i], 2), gamma, beta, steps, run, cost));
    if (costs) costs->push_back(cost);
    if (run.watch) run.watch("unit" + std::to_string(u) + ".out", outs.back());
  }
  return outs.size() == 1 ? outs[0] : cat(outs, 2);
}

namespace {
// ℓ rows of keys xk (B, H, r, f) against targets xv − xk under `w`, and the norm of their gradient when asked.
Probe probe_rows(const InnerState& w0, const Tensor& xk, const Tensor& xv, const InnerNorm& n4, bool mlp,
                 bool with_grad) {
  Tensor target = sub(xv, xk);
  Probe p;
  if (!with_grad) {
    NoGradGuard ng;
    p.loss = mean(inner_loss_rows(w0, xk, target, n4)).item();
    return p;
  }
  SetGradGuard on(true);
  std::vector<Tensor> w = w0.tensors();
  for (Tensor& t : w) t = tracked(detach(t));
  Tensor rows = inner_loss_rows(InnerState::from(w, mlp), detach(xk), detach(target), n4);
  p.loss = mean(rows).item();
  std::vector<Tensor> g = grad({sum(rows)}, w);
  NoGradGuard ng;
  Tensor sq;
  for (const Tensor& t : g) {  // per (batch, head) squared norm
    Tensor s = sum(mul(t, t), {-2, -1});
    sq = sq.defined() ? add(sq, s) : s;
  }
  p.grad_norm = mean(sqrt(sq)).item();
  return p;
}
}  // namespace

InnerNorm TTTLayer::inner_norm() const {
  const int64_t H = cfg_.heads, f = cfg_.head_dim();
  return {reshape(ln_gamma, {1, H, 1, f}), reshape(ln_beta, {1, H, 1, f})};
}

Probe TTTLayer::probe(const TTTLayerState& st, bool with_grad) const {
  if (!st.last_xk.defined()) return {};
  return probe_rows(st.inner, st.last_xk, st.last_xv, inner_norm(), cfg_.mlp, with_grad);
}

Probe TTTLayer::probe_chunk(const InnerState& w, const TTTLayerState& st, bool with_grad) const {
  if (!st.chunk_xk.defined()) throw std::logic_error("TTT layer: probe_chunk needs the chunk kept (TTTRun::keep_chunk)");
  return probe_rows(w, st.chunk_xk, st.chunk_xv, inner_norm(), cfg_.mlp, with_grad);
}

void TTTLayer::extra_steps(TTTLayerState& st, int steps, const TTTRun& run, UnitCost& cost) const {
  if (steps < 0) throw std::invalid_argument("TTT layer: extra steps must be >= 0, got " + std::to_string(steps));
  if (steps == 0) return;
  if (!st.chunk_xk.defined()) throw std::logic_error("TTT layer: extra_steps needs the chunk kept (TTTRun::keep_chunk)");
  const int64_t b = cfg_.mini_batch, n = st.chunk_xk.shape()[2] / b;
  const InnerNorm n4 = inner_norm();
  CostMeter meter(&cost);
  const bool dual = run.path == InnerPath::Dual;
  for (int s = 0; s < steps; ++s)
    for (int64_t m = 0; m < n; ++m) {
      const Tensor xk = units(st.chunk_xk, m, m + 1, b), xv = units(st.chunk_xv, m, m + 1, b);
      const Tensor eta = squeeze(slice(st.chunk_eta, 2, m, m + 1), 2);  // (B, H, b, b)
      const Tensor eta_last = eta_last_row(eta);  // (B, H, b, 1)
      st.inner = dual ? carry_step_closed(st.inner, xk, xv, eta_last, n4, &meter)
                      : carry_step_autograd(st.inner, xk, xv, eta_last, n4, &meter);
    }
  cost.steps += steps;
}

Tensor TTTLayer::token_factor(DType dtype, Device device) const {
  const int64_t b = cfg_.mini_batch;
  std::vector<double> base(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    const double inv = 1.0 / double(i + 1);
    base[size_t(i)] = cfg_.softplus_token_factor ? std::log(std::expm1(inv)) : inv;  // softplus⁻¹(1/(i+1))
  }
  Tensor x = add(raw::to_device(Tensor::from_vector(base, {b}, dtype), device), token_idx);
  // log(1 + eˣ) composed from existing ops: the offsets stay far below where eˣ would overflow.
  return cfg_.softplus_token_factor ? log(affine(exp(x), 1.0, 1.0)) : relu(x);
}

double TTTLayer::carry_factor() const {
  NoGradGuard ng;
  return token_factor(token_idx.dtype(), token_idx.device()).to_vector().back();
}

Tensor TTTLayer::forward(const Tensor& u, const TTTRun& run) const {
  TTTLayerState st;
  return forward_chunk(u, st, run);
}

TTTLayer::Projected TTTLayer::project(const Tensor& u, TTTLayerState& st, const TTTRun& run) const {
  const int64_t B = u.shape()[0], N = u.shape()[1], H = cfg_.heads, f = cfg_.head_dim();
  const int64_t b = cfg_.mini_batch, n = N / b;
  // Projections (docs/ttt.md §1.2) and RoPE with in-mini-batch positions (docs/ttt.md §1.3).
  Tensor xq, xk;
  if (cfg_.shared_qk) {
    Tensor xqk = matmul(u, wq);
    Tensor hist = st.conv_hist;  // both convs read the same history of xqk
    xq = causal_conv_chunk(xqk, hist, conv_q_w, conv_q_b);
    xk = causal_conv_chunk(xqk, st.conv_hist, conv_k_w, conv_k_b);
  } else {
    xq = matmul(u, wq);
    xk = matmul(u, wk);
  }
  xq = rope(heads(xq, H), b, cfg_.rope_theta);  // (B, H, N, f)
  xk = rope(heads(xk, H), b, cfg_.rope_theta);
  Tensor xv = heads(matmul(u, wv), H);
  // η[b,h,m,i,j] = base_lr · lr_mult · tok[i] · σ(u_j·θ_lr + bias) / f   (docs/ttt.md §1.5)
  Tensor lr = sigmoid(add(matmul(u, lr_w), lr_b));                     // (B, N, H)
  lr = reshape(permute(lr, {0, 2, 1}), {B, H, n, 1, b});               // per source token j
  Tensor tok = token_factor(u.dtype(), u.device());
  Tensor eta = mul(mul(lr, reshape(tok, {b, 1})), scalar_like(u, cfg_.base_lr * run.lr_mult / double(f)));
  if (run.watch) {
    run.watch("xq", xq);
    run.watch("xk", xk);
    run.watch("xv", xv);
    run.watch("eta", eta);
  }
  return {std::move(xq), std::move(xk), std::move(xv), std::move(eta)};
}

Tensor TTTLayer::scan_rematerialised(InnerState& state, const Tensor& xq, const Tensor& xk, const Tensor& xv,
                                     const Tensor& eta, int64_t u_base, int64_t n, const TTTRun& run) const {
  const int64_t b = cfg_.mini_batch, group = run.remat_group;
  // Rematerialisation (docs/ttt.md §1.9): keep only the state at group boundaries; the group's scan is
  // re-run in backward, replaying the step counts decided the first time.
  std::vector<Tensor> outs;
  const bool mlp = cfg_.mlp;
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    const int64_t g1 = std::min(n, g0 + group);
    auto decided = std::make_shared<std::vector<int>>();
    auto first = std::make_shared<bool>(true);
    TTTRun r = run;
    RegionFn fn = [this, r, g0, g1, u_base, mlp, decided, first](const std::vector<Tensor>& in) {
      InnerState s = InnerState::from({in.begin(), in.begin() + (mlp ? 4 : 2)}, mlp);
      const size_t k = mlp ? 4 : 2;
      bool replay = !*first;
      *first = false;
      Tensor o = scan(s, in[k], in[k + 1], in[k + 2], in[k + 3], in[k + 4], in[k + 5], u_base + g0, u_base + g1,
                      r, *decided, replay);
      std::vector<Tensor> res{o};
      for (const Tensor& t : s.tensors()) res.push_back(t);
      return res;
    };
    std::vector<Tensor> inputs = state.tensors();
    for (const Tensor& t : {units(xq, g0, g1, b), units(xk, g0, g1, b), units(xv, g0, g1, b),
                            slice(eta, 2, g0, g1)})
      inputs.push_back(t);
    // The region reads the inner LayerNorm through its inputs, so its parameters get gradients.
    inputs.push_back(ln_gamma);
    inputs.push_back(ln_beta);
    std::vector<Tensor> res = checkpoint(fn, inputs);
    outs.push_back(res[0]);
    state = InnerState::from({res.begin() + 1, res.end()}, mlp);
  }
  return outs.size() == 1 ? outs[0] : cat(outs, 2);
}

InnerState TTTLayer::initial_state(int64_t B) const {
  auto batch = [&](const Tensor& p) {
    Shape s = p.shape();
    s.insert(s.begin(), B);
    return expand(unsqueeze(p, 0), s);
  };
  return {batch(W1), batch(b1), W2.defined() ? batch(W2) : Tensor(), b2.defined() ? batch(b2) : Tensor()};
}

Tensor TTTLayer::forward_chunk(const Tensor& u, TTTLayerState& st, const TTTRun& run) const {
  if (u.dim() != 3 || u.shape()[2] != cfg_.d)
    throw std::invalid_argument("TTT layer: input must be (B, N, " + std::to_string(cfg_.d) + "), got " +
                                shape_str(u.shape()));
  const int64_t B = u.shape()[0], N = u.shape()[1], d = cfg_.d;
  const int64_t b = cfg_.mini_batch, n = N / b;
  if (N % b != 0)
    throw std::invalid_argument("TTT layer: sequence length " + std::to_string(N) + " is not a multiple of the " +
                                "mini-batch size " + std::to_string(b));
  const auto [xq, xk, xv, eta] = project(u, st, run);

  if (!st.inner.W1.defined()) st.inner = initial_state(B);  // every sequence starts from the learned W0
  InnerState& state = st.inner;
  const int64_t u_base = st.units;
  st.units += n;

  Tensor out;
  if (run.remat_group <= 0 || !GradMode::enabled()) {
    std::vector<int> decided;
    out = scan(state, xq, xk, xv, eta, ln_gamma, ln_beta, u_base, u_base + n, run, decided, false);
  } else {
    out = scan_rematerialised(state, xq, xk, xv, eta, u_base, n, run);
  }
  st.last_xk = units(xk, n - 1, n, b);
  st.last_xv = units(xv, n - 1, n, b);
  st.chunk_xk = run.keep_chunk ? xk : Tensor();
  st.chunk_xv = run.keep_chunk ? xv : Tensor();
  st.chunk_eta = run.keep_chunk ? eta : Tensor();
  if (run.final_state) *run.final_state = state;
  // Heads back together, post-norm, gate, output projection (docs/ttt.md §1.10).
  Tensor z = reshape(permute(out, {0, 2, 1, 3}), {B, N, d});
  z = layer_norm(z, post_gamma, post_beta, 1e-6);
  if (run.watch) run.watch("post_norm", z);
  if (cfg_.gate) z = gelu_tanh_mul(matmul(u, wg), z);
  return matmul(z, wo);
}

}  // namespace ponder::ttt
