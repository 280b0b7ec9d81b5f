// The TTT layer: dual form vs the engine-driven iterative path, outer gradients through inner
// steps vs finite differences, causality, and inner-loop FLOPs vs docs/ttt.md §4.2.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "ttt/ttt_layer.h"

using namespace ponder;
using namespace ponder::ttt;

namespace {

TTTConfig tiny(bool mlp, int64_t b = 4, bool shared_qk = true) {
  TTTConfig c;
  c.d = 8;
  c.heads = 2;
  c.mini_batch = b;
  c.mlp = mlp;
  c.shared_qk = shared_qk;
  c.base_lr = mlp ? 0.1 : 1.0;
  c.init_std = 0.3;  // larger than 0.02 so inner steps move the outputs noticeably
  return c;
}

double max_diff(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

struct RunResult {
  Tensor out;
  InnerState state;
  std::vector<Tensor> grads;
};

RunResult run_layer(const TTTLayer& layer, const Tensor& u, const Tensor& r, TTTRun run) {
  RunResult res;
  run.final_state = &res.state;
  res.out = layer.forward(u, run);
  res.grads = grad({sum(mul(res.out, r))}, layer.parameters(), {}, GradOptions{true, false, true, nullptr});
  return res;
}

// How many parameters get a non-zero outer gradient: a comparison of gradients that are all zero proves nothing.
size_t nonzero_grads(const RunResult& r) {
  size_t n = 0;
  for (const Tensor& g : r.grads) {
    if (!g.defined()) continue;
    const std::vector<double> v = g.to_vector();
    n += std::any_of(v.begin(), v.end(), [](double x) { return x != 0; });
  }
  return n;
}

void check_same(const RunResult& a, const RunResult& b, double tol) {
  CHECK(max_diff(a.out, b.out) < tol);
  auto sa = a.state.tensors(), sb = b.state.tensors();
  for (size_t i = 0; i < sa.size(); ++i) CHECK(max_diff(sa[i], sb[i]) < tol);
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    INFO("parameter ", i);
    if (!a.grads[i].defined() || !b.grads[i].defined()) {
      CHECK(a.grads[i].defined() == b.grads[i].defined());
      continue;
    }
    CHECK(max_diff(a.grads[i], b.grads[i]) < tol);
  }
}

}  // namespace

TEST_CASE("dual form equals the iterative path with K = 1 (outputs, state, outer gradients)") {
  for (bool mlp : {false, true})
    for (StepMode mode : {StepMode::Carry, StepMode::Prefix}) {
      INFO("mlp ", mlp, " prefix ", mode == StepMode::Prefix);
      Generator gen(1);
      TTTLayer layer(tiny(mlp), 0, gen, DType::F64);
      Tensor u = gen.normal({2, 12, 8}, 0, 1, DType::F64), r = gen.normal({2, 12, 8}, 0, 1, DType::F64);
      TTTRun dual, iter;
      iter.path = InnerPath::Iterative;
      iter.mode = mode;
      iter.prefix_path_at_one = true;  // the per-position path itself, not the carry step it is charged as
      const RunResult a = run_layer(layer, u, r, dual), b = run_layer(layer, u, r, iter);
      check_same(a, b, 1e-11);
      CHECK(nonzero_grads(a) >= layer.parameters().size() - 1);  // every parameter but, at most, an unused one
    }
}

TEST_CASE("prefix mode with K = 1 is charged as the dual form, its cheapest path, and computes the same") {
  for (bool mlp : {false, true}) {
    INFO("mlp ", mlp);
    Generator gen(4);
    TTTLayer layer(tiny(mlp), 0, gen, DType::F64);
    Tensor u = gen.normal({2, 12, 8}, 0, 1, DType::F64);
    auto run = [&](StepMode mode, bool per_position) {
      std::vector<UnitCost> costs;
      TTTRun r;
      r.mode = mode;
      r.path = per_position ? InnerPath::Iterative : InnerPath::Dual;
      r.prefix_path_at_one = per_position;
      r.costs = &costs;
      NoGradGuard ng;
      Tensor y = layer.forward(u, r);
      uint64_t inner = 0;
      for (const UnitCost& c : costs) inner += c.inner_forward + c.inner_grad + c.update;
      return std::make_pair(y, inner);
    };
    const auto [carry, carry_cost] = run(StepMode::Carry, false);
    const auto [prefix, prefix_cost] = run(StepMode::Prefix, false);
    const auto [slow, slow_cost] = run(StepMode::Prefix, true);
    CHECK(max_diff(carry, prefix) == 0);
    CHECK(max_diff(prefix, slow) < 1e-11);
    CHECK(prefix_cost == carry_cost);
    CHECK(slow_cost > prefix_cost);  // what K = 1 in prefix mode was charged before
  }
}

TEST_CASE("closed-form and engine steps agree under a schedule with skips (outputs, state, outer gradients), in carry "
          "and prefix mode") {
  for (StepMode mode : {StepMode::Carry, StepMode::Prefix})
    for (bool mlp : {false, true}) {
      INFO("mlp ", mlp, " prefix ", mode == StepMode::Prefix);
      Generator gen(2);
      TTTLayer layer(tiny(mlp), 0, gen, DType::F64);
      Tensor u = gen.normal({2, 16, 8}, 0, 1, DType::F64), r = gen.normal({2, 16, 8}, 0, 1, DType::F64);
      FixedSchedule sched({2, 0, 3, 1});
      TTTRun closed, engine;
      closed.schedule = engine.schedule = &sched;
      closed.mode = engine.mode = mode;
      engine.path = InnerPath::Iterative;
      const RunResult a = run_layer(layer, u, r, closed), b = run_layer(layer, u, r, engine);
      check_same(a, b, 1e-11);
      CHECK(nonzero_grads(a) >= layer.parameters().size() - 1);
      // The extra steps are taken: in carry mode they change the state handed on (and so later outputs), in prefix
      // mode the unit's own outputs (the first unit's, K = 2); SKIP keeps the state.
      UniformSchedule one(1);
      TTTRun plain;
      plain.schedule = &one;
      plain.mode = mode;
      const int64_t upto = mode == StepMode::Prefix ? 4 : 16;
      CHECK(max_diff(raw::slice(run_layer(layer, u, r, plain).out, 1, 0, upto), raw::slice(a.out, 1, 0, upto)) > 1e-6);
    }
}

TEST_CASE("rematerialised groups give the same outputs and gradients") {
  Generator gen(3);
  TTTLayer layer(tiny(true), 0, gen, DType::F64);
  Tensor u = gen.normal({1, 16, 8}, 0, 1, DType::F64), r = gen.normal({1, 16, 8}, 0, 1, DType::F64);
  FixedSchedule sched({1, 2, 0, 1});
  for (InnerPath path : {InnerPath::Dual, InnerPath::Iterative}) {
    TTTRun a, b;
    a.schedule = b.schedule = &sched;
    a.path = b.path = path;
    b.remat_group = 2;
    const RunResult plain = run_layer(layer, u, r, a), remat = run_layer(layer, u, r, b);
    check_same(plain, remat, 1e-11);
    CHECK(nonzero_grads(remat) >= layer.parameters().size() - 1);  // the gradients compared are not all zero
  }
}

TEST_CASE("outer gradients through K = 1, 2, 3 inner steps match finite differences") {
  for (bool mlp : {false, true})
    for (StepMode mode : {StepMode::Carry, StepMode::Prefix})
      for (int K : {1, 2, 3}) {
        INFO("mlp ", mlp, " prefix ", mode == StepMode::Prefix, " K ", K);
        Generator gen(10 + K);
        const TTTLayer base(tiny(mlp, 4, K % 2 == 1), 0, gen, DType::F64);
        Tensor u = gen.normal({1, 8, 8}, 0, 1, DType::F64), r = gen.normal({1, 8, 8}, 0, 1, DType::F64);
        UniformSchedule sched(K);
        // Differentiate with respect to W0, b0, LN γ/β, the η parameters and the projections.
        std::vector<Tensor*> fields = {const_cast<Tensor*>(&base.W1), const_cast<Tensor*>(&base.b1),
                                       const_cast<Tensor*>(&base.ln_gamma), const_cast<Tensor*>(&base.ln_beta),
                                       const_cast<Tensor*>(&base.lr_w), const_cast<Tensor*>(&base.lr_b),
                                       const_cast<Tensor*>(&base.token_idx), const_cast<Tensor*>(&base.wq),
                                       const_cast<Tensor*>(&base.wv)};
        if (base.wk.defined()) fields.push_back(const_cast<Tensor*>(&base.wk));
        if (mlp) fields.push_back(const_cast<Tensor*>(&base.W2));
        std::vector<Tensor> inputs;
        for (Tensor* f : fields) inputs.push_back(*f);
        auto fn = [&](const std::vector<Tensor>& xs) {
          TTTLayer l = base;
          std::vector<Tensor*> lf = {&l.W1, &l.b1, &l.ln_gamma, &l.ln_beta, &l.lr_w, &l.lr_b, &l.token_idx, &l.wq,
                                     &l.wv};
          if (l.wk.defined()) lf.push_back(&l.wk);
          if (mlp) lf.push_back(&l.W2);
          for (size_t i = 0; i < lf.size(); ++i) *lf[i] = xs[i];
          TTTRun run;
          run.path = InnerPath::Iterative;
          run.mode = mode;
          run.prefix_path_at_one = true;
          run.schedule = &sched;
          return sum(mul(l.forward(u, run), r));
        };
        CheckResult res = gradcheck(fn, inputs, std::vector<bool>(inputs.size(), true));
        CHECK_MESSAGE(res.ok, res.message);
        CHECK(res.checked > 100);
      }
}

TEST_CASE("causality: later tokens never change earlier outputs") {
  for (int64_t b : {1, 16, 64})
    for (StepMode mode : {StepMode::Carry, StepMode::Prefix})
      for (bool mlp : {false, true})
        for (InnerPath path : {InnerPath::Iterative, InnerPath::Dual}) {
          INFO("b ", b, " prefix ", mode == StepMode::Prefix, " mlp ", mlp, " closed ", path == InnerPath::Dual);
          Generator gen(uint64_t(b) + 7);
          TTTLayer layer(tiny(mlp, b), 0, gen, DType::F64);
          const int64_t N = b == 1 ? 12 : 2 * b;
          Tensor u = gen.normal({1, N, 8}, 0, 1, DType::F64);
          std::vector<int> ks;
          for (int64_t i = 0; i < N / b; ++i) ks.push_back(int(gen.uniform01() * 4));  // zeros included
          FixedSchedule sched(ks);
          TTTRun run;
          run.path = path;
          run.mode = mode;
          run.prefix_path_at_one = true;
          run.schedule = &sched;
          NoGradGuard ng;
          Tensor y0 = layer.forward(u, run);
          const int64_t t = N / 2 + (b > 2 ? b / 3 : 0) - 1;  // a position inside a unit
          auto v = u.to_vector();
          for (int64_t i = (t + 1) * 8; i < N * 8; ++i) v[size_t(i)] += 1.0;
          Tensor y1 = layer.forward(Tensor::from_vector(v, u.shape(), DType::F64), run);
          CHECK(max_diff(raw::slice(y0, 1, 0, t + 1), raw::slice(y1, 1, 0, t + 1)) < 1e-12);
          CHECK(max_diff(raw::slice(y0, 1, t + 1, N), raw::slice(y1, 1, t + 1, N)) > 1e-6);  // later ones do change
        }
}

TEST_CASE("inner-loop FLOPs equal docs/ttt.md §4.2: 6bf² + 6b²f (linear), 56bf² + 30b²f (MLP) per head per unit") {
  const uint64_t B = 2, H = 2, b = 16, f = 32;
  for (bool mlp : {false, true}) {
    Generator gen(5);
    const int64_t h = mlp ? 4 * int64_t(f) : int64_t(f);
    InnerState s{gen.normal({2, 2, int64_t(f), h}, 0, 0.1), gen.normal({2, 2, 1, h}, 0, 0.1), {}, {}};
    if (mlp) {
      s.W2 = gen.normal({2, 2, h, int64_t(f)}, 0, 0.1);
      s.b2 = gen.normal({2, 2, 1, int64_t(f)}, 0, 0.1);
    }
    Tensor xq = gen.normal({2, 2, 16, 32}, 0, 1), xk = gen.normal({2, 2, 16, 32}, 0, 1);
    Tensor xv = gen.normal({2, 2, 16, 32}, 0, 1), eta = gen.uniform({2, 2, 16, 16}, 0, 0.1);
    InnerNorm n{Tensor::full({1, 2, 1, 32}, 1.0), Tensor::zeros({1, 2, 1, 32}), 1e-6};
    InnerState next;
    UnitCost cost;
    CostMeter meter(&cost);
    FlopScope scope;
    dual_step(s, xq, xk, xv, eta, n, next, &meter);
    const uint64_t want = mlp ? 56 * b * f * f + 30 * b * b * f : 6 * b * f * f + 6 * b * b * f;
    CHECK(scope.counts().category(FlopCat::Matmul) == B * H * want);
    CHECK(cost.total() == scope.counts().total());  // the phases partition the unit's work
    CHECK(cost.inner_forward > 0);
    CHECK(cost.inner_grad > 0);
    CHECK(cost.update > 0);
    CHECK(cost.output > 0);
  }
}

TEST_CASE("prefix mode's dual form spends 6bf² + 2b²f, and 2b²f + (K − 1)·2b³f more for K > 1, in matmuls") {
  const uint64_t B = 2, H = 2, b = 16, f = 32;
  Generator gen(9);
  InnerState s{gen.normal({2, 2, 32, 32}, 0, 0.1), gen.normal({2, 2, 1, 32}, 0, 0.1), {}, {}};
  Tensor xq = gen.normal({2, 2, 16, 32}, 0, 1), xk = gen.normal({2, 2, 16, 32}, 0, 1);
  Tensor xv = gen.normal({2, 2, 16, 32}, 0, 1), eta = gen.uniform({2, 2, 16, 16}, 0, 0.1);
  InnerNorm n{Tensor::full({1, 2, 1, 32}, 1.0), Tensor::zeros({1, 2, 1, 32}), 1e-6};
  for (uint64_t K : {1, 2, 4}) {
    INFO("K ", K);
    InnerState next;
    UnitCost cost;
    CostMeter meter(&cost);
    FlopScope scope;
    prefix_dual(s, xq, xk, xv, eta, n, int(K), next, &meter);
    const uint64_t want = 6 * b * f * f + 2 * b * b * f + (K > 1 ? 2 * b * b * f + (K - 1) * 2 * b * b * b * f : 0);
    CHECK(scope.counts().category(FlopCat::Matmul) == B * H * want);
    CHECK(cost.total() == scope.counts().total());
    CHECK(cost.inner_grad > 0);
    CHECK(cost.update > 0);
    CHECK(cost.output > 0);
  }
}

TEST_CASE("per-unit costs add up and SKIP units spend only the query path") {
  Generator gen(6);
  TTTLayer layer(tiny(false), 3, gen, DType::F64);
  Tensor u = gen.normal({1, 16, 8}, 0, 1, DType::F64);
  FixedSchedule sched({0, 1, 2, 4});
  std::vector<UnitCost> costs;
  TTTRun run;
  run.schedule = &sched;
  run.costs = &costs;
  NoGradGuard ng;
  layer.forward(u, run);
  REQUIRE(costs.size() == 4);
  CHECK(costs[0].layer == 3);
  CHECK(costs[0].steps == 0);
  CHECK(costs[0].inner_grad == 0);
  CHECK(costs[0].update == 0);
  CHECK(costs[0].output > 0);
  CHECK(costs[2].inner_grad == 2 * costs[1].inner_grad);  // every carry step costs the same
  CHECK(costs[3].inner_grad == 4 * costs[1].inner_grad);
}

TEST_CASE("token factor: softplus equals the official factor at initialisation, stays positive where relu dies, and "
          "its outer gradients match finite differences") {
  Generator gen(21);
  TTTConfig off = tiny(false), soft = tiny(false);
  soft.softplus_token_factor = true;
  Generator g1(5), g2(5);
  TTTLayer a(off, 0, g1, DType::F64), b(soft, 0, g2, DType::F64);
  const std::vector<double> ta = a.token_factor(DType::F64, Device::CPU).to_vector(),
                            tb = b.token_factor(DType::F64, Device::CPU).to_vector();
  for (size_t i = 0; i < ta.size(); ++i) {
    CHECK(ta[i] == doctest::Approx(1.0 / double(i + 1)).epsilon(1e-14));
    CHECK(tb[i] == doctest::Approx(1.0 / double(i + 1)).epsilon(1e-12));
  }
  Tensor u = gen.normal({1, 8, 8}, 0, 1, DType::F64);
  {
    NoGradGuard ng;
    CHECK(max_diff(a.forward(u, {}), b.forward(u, {})) < 1e-12);  // the same layer at initialisation
  }
  // An offset of −0.5 on the last position kills the official carry, not the softplus one.
  std::vector<double> dead(4, 0.0);
  dead[3] = -0.5;
  a.token_idx = Tensor::from_vector(dead, {4}, DType::F64);
  b.token_idx = Tensor::from_vector(dead, {4}, DType::F64);
  CHECK(a.carry_factor() == 0.0);
  CHECK(b.carry_factor() > 0.0);
  CHECK(b.carry_factor() == doctest::Approx(std::log1p(std::exp(std::log(std::expm1(0.25)) - 0.5))).epsilon(1e-12));
  // Gradients through the softplus factor, into token_idx and W1, over two units with K = 2.
  UniformSchedule sched(2);
  Tensor r = gen.normal({1, 8, 8}, 0, 1, DType::F64);
  auto fn = [&](const std::vector<Tensor>& xs) {
    TTTLayer l = b;
    l.token_idx = xs[0];
    l.W1 = xs[1];
    TTTRun run;
    run.schedule = &sched;
    return sum(mul(l.forward(u, run), r));
  };
  Tensor offsets = raw::clone(b.token_idx);
  set_requires_grad(offsets);
  CheckResult res = gradcheck(fn, {offsets, b.W1}, {true, true});
  CHECK_MESSAGE(res.ok, res.message);
  CHECK(res.checked > 20);
}
