// The op table: every case forward vs naive float64 reference (f64 and f32), gradcheck and
// gradgradcheck in float64; and every primitive Op is exercised by at least one case.
#include <doctest/doctest.h>

#include <cmath>
#include <set>

#include "autograd/compose.h"
#include "autograd/engine.h"
#include "autograd/fused.h"
#include "autograd/op_table.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/profile.h"
#include "tensor/rng.h"
#include "op_table_checks.h"
#include "test_util.h"

using namespace ponder;

TEST_CASE("op table covers every primitive op") {
  std::set<Op> covered;
  for (const OpCase& c : op_table()) covered.insert(c.covers.begin(), c.covers.end());
  for (size_t i = 0; i < size_t(Op::Count); ++i) {
    Op op = Op(i);
    if (op == Op::Checkpoint) continue;  // a region, not a kernel: tested in test_nn.cpp
    CHECK_MESSAGE(covered.count(op), "no op-table case for ", op_name(op));
  }
}

TEST_CASE("op table: forward, gradcheck, gradgradcheck") {
  REQUIRE(!op_table().empty());  // every case runs in check_op_table's subcases
  test::check_op_table();
}

TEST_CASE("op table with the fused kernels hidden (as on a backend that lacks them): each fused op a node around its composition") {
  const test::HiddenFusedKernels hidden;
  // The path under test: the ops stay nodes (fused_enabled) while no kernel serves them (fused_available).
  const Tensor x = Tensor::zeros({2, 3});
  CHECK(raw::fused_enabled(FusedOp::LayerNormRows, x));
  CHECK(!raw::fused_available(FusedOp::LayerNormRows, x));
  test::check_op_table();
}

namespace {
// max |a − ref| and max |ref| (at least 1e-30) of two tensors of one shape: the kernel-against-composition error
// is err / scale.
struct Diff {
  double err = 0, scale = 1e-30;
};
Diff diff(const Tensor& a, const Tensor& ref) {
  REQUIRE(a.shape() == ref.shape());
  const auto p = a.to_vector(), q = ref.to_vector();
  Diff d;
  for (size_t k = 0; k < p.size(); ++k) {
    d.err = std::max(d.err, std::abs(p[k] - q[k]));
    d.scale = std::max(d.scale, std::abs(q[k]));
  }
  return d;
}

// Every fused op on the given operands, through the front ends that pick kernel or composition.
std::vector<Tensor> run_fused_ops(const Tensor& x, const Tensor& v, const Tensor& dz, const Tensor& a,
                                  const Tensor& gh, const Tensor& bh, const Tensor& gd, const Tensor& bd) {
  std::vector<Tensor> out{layer_norm_rows(x, 1e-5), layer_norm_backward(x, v, 1e-5),
                          layer_norm_vjp(x, v, dz, 1e-5).first, layer_norm_vjp(x, dz, v, 1e-5).second,
                          rms_norm_rows(x, 1e-6), rms_norm_backward(x, dz, 1e-6)};
  out.push_back(layer_norm_affine(x, gh, bh, 1e-5));
  out.push_back(layer_norm_affine(x, gd, bd, 1e-5));
  for (const Tensor& t : layer_norm_affine_backward(x, gh, v, 1e-5)) out.push_back(t);
  for (const Tensor& t : layer_norm_affine_backward(x, gd, v, 1e-5)) out.push_back(t);
  out.push_back(rms_norm_affine(x, gd, 1e-6));
  for (const Tensor& t : rms_norm_affine_backward(x, gh, v, 1e-6)) out.push_back(t);
  out.push_back(ln_l2_grad(x, dz, gh, bh, 1e-5));
  for (const Tensor& t : ln_l2_grad_vjp(x, dz, gh, bh, v, 1e-5)) out.push_back(t);
  for (const Tensor& t : ln_l2_grad_vjp(x, v, gd, bd, a, 1e-5)) out.push_back(t);
  out.push_back(silu_mul(a, x));  // a non-contiguous gate operand
  out.push_back(gelu_tanh_mul(a, x));
  for (GateAct act : {GateAct::Silu, GateAct::GeluTanh}) {
    auto [da, db] = act_mul_backward(act, a, x, v);
    out.push_back(da);
    out.push_back(db);
  }
  // RoPE on x's first 36 columns (5, 3, 36): rows of 3 positions, cos and sin (3, 18) from dz and a.
  out.push_back(rope_rotate(slice(x, 2, 0, 36), slice(dz, 1, 0, 18), slice(squeeze(slice(a, 0, 0, 1), 0), 1, 0, 18)));
  return out;
}
}  // namespace

TEST_CASE("fused kernels equal their compositions, in values and in FLOPs counted by the derived rules") {
  Generator g(31);
  NoGradGuard ng;
  for (DType dt : {DType::F64, DType::F32}) {
    const double tol = dt == DType::F64 ? 1e-12 : 2e-5;
    Tensor x = raw::transpose(g.normal({37, 3, 5}, 0.3, 1.2, dt), 0, 2);  // (5, 3, 37), non-contiguous rows
    Tensor v = g.normal({5, 3, 37}, 0, 1, dt), dz = g.normal({3, 37}, 0, 1, dt);  // dz broadcasts
    Tensor a = g.normal({5, 3, 37}, 0, 2, dt);
    // Per-head γ, β over (5, 3, 37) seen as (B, H, rows, D) = (5, 3, 1, 37), and a plain (D) pair.
    Tensor gh = g.normal({1, 3, 37}, 1, 0.2, dt), bh = g.normal({1, 3, 37}, 0, 0.2, dt);
    Tensor gd = g.normal({37}, 1, 0.2, dt), bd = g.normal({37}, 0, 0.2, dt);
    auto run = [&](bool fused) {
      raw::set_fused_kernels(fused);
      FlopScope scope;
      std::vector<Tensor> out = run_fused_ops(x, v, dz, a, gh, bh, gd, bd);
      raw::set_fused_kernels(true);
      return std::make_pair(out, scope.counts());
    };
    auto [fused, fc] = run(true);
    auto [plain, pc] = run(false);
    REQUIRE(fused.size() == plain.size());
    for (size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      const Diff d = diff(fused[i], plain[i]);
      CHECK(d.err / d.scale <= tol);
    }
    // The gated products' float32 kernels run the composition's vector maps (one exp shared by silu and its
    // derivative): the same bits. Their six outputs come just before RoPE's.
    if (dt == DType::F32)
      for (size_t i = fused.size() - 7; i + 1 < fused.size(); ++i) {
        CAPTURE(i);
        CHECK(fused[i].to_vector() == plain[i].to_vector());
      }
    // The fused side counted by rules derived on probes of other shapes; the plain side counted itself.
    CHECK(fc.category(FlopCat::Elementwise) == pc.category(FlopCat::Elementwise));
    CHECK(fc.category(FlopCat::Reduction) == pc.category(FlopCat::Reduction));
    CHECK(fc.category(FlopCat::Elementwise) > 0);
  }
}

// A dual-form kernel's results against its composition's (every one non-trivial, dη's lower triangle included, and
// within tol), and their FLOPs at four phase marks and the backward: equal in every category, each phase doing work.
void same_results_and_phases(const std::vector<Tensor>& fo, const std::vector<Tensor>& po,
                             const std::vector<FlopCounts>& fp, const std::vector<FlopCounts>& pp, double tol) {
  REQUIRE(fo.size() == po.size());
  for (size_t i = 0; i < fo.size(); ++i) {
    CAPTURE(i);
    const Diff d = diff(fo[i], po[i]);
    CHECK(d.scale > 1e-3);
    CHECK(d.err / d.scale <= tol);
  }
  REQUIRE(fp.size() == 5);
  REQUIRE(pp.size() == 5);
  for (size_t p = 0; p < 5; ++p)
    for (size_t c = 0; c < size_t(FlopCat::Count); ++c) {
      CAPTURE(p);
      CAPTURE(c);
      CHECK(fp[p].category(FlopCat(c)) == pp[p].category(FlopCat(c)));
    }
  for (size_t p = 1; p < 4; ++p) CHECK(fp[p].total() > fp[p - 1].total());
}

TEST_CASE("the TTT dual-form kernel equals its composition, forward and backward, in values and FLOPs per phase") {
  Generator g(47);
  NoGradGuard ng;
  // A mini-batch of 16 tokens of width 12 (not a multiple of the 4-lane rows), then an odd one of 5 of 6.
  for (const Shape& xs : {Shape{2, 3, 16, 12}, Shape{1, 2, 5, 6}})
    for (DType dt : {DType::F64, DType::F32}) {
      CAPTURE(shape_str(xs));
      const double tol = dt == DType::F64 ? 1e-12 : 5e-5;
      const int64_t H = xs[1], b = xs[2], f = xs[3];
      Tensor W = g.normal({H, f, f}, 0, 0.3, dt), bias = g.normal({H, 1, f}, 0, 0.1, dt);
      Tensor xq = g.normal(xs, 0, 1, dt), xk = g.normal(xs, 0, 1, dt), xv = g.normal(xs, 0, 1, dt);
      Tensor eta = g.uniform({xs[0], H, b, b}, 0, 0.1, dt);
      Tensor gam = g.normal({1, H, 1, f}, 1, 0.1, dt), bet = g.normal({1, H, 1, f}, 0, 0.1, dt);
      Shape ws = xs;
      ws[2] = f;
      Tensor dout = g.normal(xs, 0, 1, dt), dW = g.normal(ws, 0, 1, dt);
      ws[2] = 1;
      Tensor dbias = g.normal(ws, 0, 1, dt);
      auto run = [&](bool fused) {
        raw::set_fused_kernels(fused);
        std::vector<FlopCounts> phase;
        FlopScope scope;
        auto y = ttt_linear_dual(W, bias, xq, xk, xv, eta, gam, bet, 1e-6, [&](int) { phase.push_back(scope.counts()); });
        Shape full = xs;
        full[2] = f;
        Shape fb = xs;
        fb[2] = 1;
        FlopScope back;
        // Upstream of the three results; the kernel recomputes the intermediates here (none saved), as the
        // composition does first. The kernel's rule counts what comes after (in a layer it reads them saved), so the
        // composition's count starts after its recomputation.
        FlopCounts recomputed;
        auto d = fused ? ttt_linear_dual_backward(expand(W, full), expand(bias, fb), xq, xk, xv, eta, gam, bet,
                                                  Tensor(), {dout, dW, dbias}, 1e-6)
                       : compose::ttt_linear_dual_backward(expand(W, full), expand(bias, fb), xq, xk, xv, eta, gam,
                                                           bet, dout, dW, dbias, 1e-6,
                                                           [&] { recomputed = back.counts(); });
        phase.push_back(back.counts() - recomputed);
        raw::set_fused_kernels(true);
        std::vector<Tensor> out(y.begin(), y.end());
        out.insert(out.end(), d.begin(), d.end());
        return std::make_pair(out, phase);
      };
      auto [fo, fp] = run(true);
      auto [po, pp] = run(false);
      REQUIRE(fo.size() == 11);
      same_results_and_phases(fo, po, fp, pp, tol);
      CHECK(fp[4].category(FlopCat::Matmul) > 0);
      // The backward kernel reading the forward kernel's saved intermediates gives what recomputing them gives.
      Shape full = xs;
      full[2] = f;
      Shape fb = xs;
      fb[2] = 1;
      const Tensor We = contiguous(expand(W, full)), be = contiguous(expand(bias, fb));
      const Tensor saved = raw::ttt_linear_dual(We, be, xq, xk, xv, eta, gam, bet, 1e-6).second;
      const Tensor dy = cat({dout, dW, dbias}, 2);
      const auto with = raw::ttt_linear_dual_backward(We, be, xq, xk, xv, eta, gam, bet, saved, dy, 1e-6);
      const auto without = raw::ttt_linear_dual_backward(We, be, xq, xk, xv, eta, gam, bet, Tensor(), dy, 1e-6);
      for (size_t i = 0; i < with.size(); ++i) CHECK(with[i].to_vector() == without[i].to_vector());
    }
}

// Blocks of `numel` float32 elements filled with NaN and freed, so the CPU's allocation cache (keyed by size) hands
// them to the next tensors of that size: a kernel that leaves a buffer unwritten then shows NaN, not lucky zeros.
void poison_cache(int64_t numel) {
  std::vector<Tensor> held;
  for (int i = 0; i < 8; ++i) held.push_back(Tensor::full({numel}, std::nan(""), DType::F32));
}

TEST_CASE("fused backward kernels with nothing to sum over give zero gradients: an empty batch, no queries") {
  Generator g(71);
  const int64_t H = 3, b = 4, f = 8, P = b * (b + 1) / 2, T = 5;
  auto zeros = [](const Tensor& t) {
    for (double x : t.to_vector())
      if (x != 0) return false;
    return true;
  };
  const Tensor gam = g.normal({1, H, 1, f}, 1, 0.1), bet = g.normal({1, H, 1, f}, 0, 0.1);
  poison_cache(H * f);
  {  // TTT-Linear's dual form on a batch of 0 sequences: dγ, dβ (H·f each) sum over no heads
    const Tensor W = g.normal({0, H, f, f}, 0, 1), bias = g.normal({0, H, 1, f}, 0, 1), x = g.normal({0, H, b, f}, 0, 1);
    const Tensor eta = g.normal({0, H, b, b}, 0, 1), dy = g.normal({0, H, b + f + 1, f}, 0, 1);
    const auto d = raw::ttt_linear_dual_backward(W, bias, x, x, x, eta, gam, bet, Tensor(), dy, 1e-6);
    CHECK(zeros(d[6]));
    CHECK(zeros(d[7]));
  }
  poison_cache(H * f);
  {  // prefix mode's K steps
    const Tensor z = g.normal({0, H, b, f}, 0, 1), nm = g.normal({0, H, b, b}, 0, 1), w = g.normal({0, H, P, 1}, 0, 1);
    auto [a, saved] = raw::ttt_prefix_steps(z, z, nm, w, gam, bet, 2, 1e-6);
    const auto d = raw::ttt_prefix_steps_backward(z, z, nm, w, gam, bet, 2, 1e-6, saved, g.normal({0, H, P, f}, 0, 1));
    CHECK(zeros(d[4]));
    CHECK(zeros(d[5]));
  }
  poison_cache(H * T * f);
  {  // attention with no queries and T keys: no key had a weight
    const Tensor q = g.normal({1, H, 0, f}, 0, 1), k = g.normal({1, H, T, f}, 0, 1), v = g.normal({1, H, T, f}, 0, 1);
    const AttnGeometry geo{0.5, T, 0, 0};
    auto [y, lse] = raw::attention(q, k, v, geo);
    const auto d = raw::attention_backward(q, k, v, y, lse, y, geo);
    CHECK(zeros(d[1]));
    CHECK(zeros(d[2]));
  }
}

TEST_CASE("prefix mode's K-step kernel equals its composition, forward and backward, in values and FLOPs per phase") {
  Generator g(53);
  // 16 positions of width 12 (not a multiple of the row kernels' 8 lanes), then an odd unit of 5 of 6; K = 1, 2, 4.
  for (const Shape& zs : {Shape{2, 3, 16, 12}, Shape{1, 2, 5, 6}})
    for (int steps : {1, 2, 4})
      for (DType dt : {DType::F64, DType::F32}) {
        CAPTURE(shape_str(zs));
        CAPTURE(steps);
        const double tol = dt == DType::F64 ? 1e-12 : 2e-4;
        const int64_t B = zs[0], H = zs[1], b = zs[2], f = zs[3], P = b * (b + 1) / 2;
        std::vector<Tensor> x = {g.normal(zs, 0, 1, dt), g.normal(zs, 0, 1, dt),
                                 g.uniform({B, H, b, b}, -0.3, 0.05, dt), g.uniform({B, H, P, 1}, 0, 0.1, dt),
                                 g.normal({1, H, 1, f}, 1, 0.1, dt), g.normal({1, H, 1, f}, 0, 0.1, dt)};
        for (Tensor& t : x) set_requires_grad(t);
        const Tensor da = g.normal({B, H, P, f}, 0, 1, dt);
        auto run = [&](bool fused) {
          raw::set_fused_kernel(FusedOp::TttPrefixSteps, fused);
          std::vector<FlopCounts> phase;
          std::array<uint64_t, 3> by_phase{};  // forward FLOPs up to each mark, summed by the mark's phase
          FlopScope scope;
          const Tensor a = ttt_prefix_steps(x[0], x[1], x[2], x[3], x[4], x[5], steps, 1e-6, [&](int p) {
            const uint64_t before = phase.empty() ? 0 : phase.back().total();
            phase.push_back(scope.counts());
            by_phase[size_t(p)] += phase.back().total() - before;
          });
          FlopScope back;
          GradOptions go;
          go.allow_unused = true;  // K = 1 reads no −M
          std::vector<Tensor> out = grad({a}, x, {da}, go);
          phase.push_back(back.counts());
          raw::set_fused_kernel(FusedOp::TttPrefixSteps, true);
          out.insert(out.begin(), a);
          return std::make_tuple(out, phase, by_phase);
        };
        auto [fo, fp, fph] = run(true);
        auto [po, pp, pph] = run(false);
        CHECK(fph == pph);  // a unit's cost splits the same way (inner forward, inner gradients, updates)
        REQUIRE(fo.size() == 7);
        for (size_t i = 0; i < fo.size(); ++i) {
          CAPTURE(i);
          if (i == 3 && steps == 1) {  // −M unread: no gradient in the composition, zeros from the kernel
            CHECK(!po[i].defined());
            CHECK(diff(fo[i], zeros_like(fo[i])).err == 0);
            continue;
          }
          const Diff d = diff(fo[i], po[i]);
          CHECK(d.scale > 1e-3);  // every result is non-trivial
          CHECK(d.err / d.scale <= tol);
        }
        // The kernel's node marks each phase once, the composition once per step (the first has no inner forward):
        // the counts up to the last mark and the backward's agree in every category and phase.
        REQUIRE(fp.size() == 4);
        REQUIRE(pp.size() == size_t(3 * steps));
        for (size_t c = 0; c < size_t(FlopCat::Count); ++c) {
          CAPTURE(c);
          CHECK(fp[2].get(FlopCat(c), Phase::Forward) == pp[size_t(3 * steps - 2)].get(FlopCat(c), Phase::Forward));
          CHECK(fp[3].get(FlopCat(c), Phase::Backward) == pp.back().get(FlopCat(c), Phase::Backward));
        }
        CHECK(fp[3].total() > 0);
      }
}

TEST_CASE("TTT-MLP's dual-form kernel equals its composition, forward and backward, in values and FLOPs per phase") {
  Generator g(59);
  // b 16, f 12, h 48 (widths not multiples of 8 lanes; W broadcast over the batch, γ per head), then b 5, f 6, h 10
  for (const Shape& xs : {Shape{2, 3, 16, 12}, Shape{1, 2, 5, 6}})
    for (DType dt : {DType::F64, DType::F32}) {
      CAPTURE(shape_str(xs));
      const double tol = dt == DType::F64 ? 1e-12 : 3e-4;
      const int64_t B = xs[0], H = xs[1], b = xs[2], f = xs[3], h = b == 16 ? 48 : 10;
      std::vector<Tensor> x = {g.normal({H, f, h}, 0, 0.3, dt),      g.normal({H, 1, h}, 0, 0.1, dt),
                               g.normal({B, H, h, f}, 0, 0.3, dt),   g.normal({B, H, 1, f}, 0, 0.1, dt),
                               g.normal(xs, 0, 1, dt),               g.normal(xs, 0, 1, dt),
                               g.normal(xs, 0, 1, dt),               g.uniform({B, H, b, b}, 0, 0.1, dt),
                               g.normal({1, H, 1, f}, 1, 0.1, dt),   g.normal({1, H, 1, f}, 0, 0.1, dt)};
      for (Tensor& t : x) set_requires_grad(t);
      std::vector<Tensor> up = {g.normal(xs, 0, 1, dt), g.normal({B, H, f, h}, 0, 1, dt),
                                g.normal({B, H, 1, h}, 0, 1, dt), g.normal({B, H, h, f}, 0, 1, dt),
                                g.normal({B, H, 1, f}, 0, 1, dt)};
      auto run = [&](bool fused) {
        raw::set_fused_kernel(FusedOp::TttMlpDual, fused);
        std::vector<FlopCounts> phase;
        FlopScope scope;
        std::array<Tensor, 10> a;
        std::copy(x.begin(), x.end(), a.begin());
        const auto y = ttt_mlp_dual(a, 1e-6, [&](int) { phase.push_back(scope.counts()); });
        FlopScope back;
        std::vector<Tensor> out = grad(std::vector<Tensor>(y.begin(), y.end()), x, up);
        phase.push_back(back.counts());
        raw::set_fused_kernel(FusedOp::TttMlpDual, true);
        out.insert(out.begin(), y.begin(), y.end());
        return std::make_pair(out, phase);
      };
      auto [fo, fp] = run(true);
      auto [po, pp] = run(false);
      REQUIRE(fo.size() == 15);
      same_results_and_phases(fo, po, fp, pp, tol);
      // The backward kernel reading no saved intermediates (it recomputes them) gives the same values.
      std::array<Tensor, 10> c;
      for (size_t i = 0; i < 10; ++i) c[i] = i < 4 ? contiguous(expand(x[i], up[i == 0 ? 1 : i == 1 ? 2 : i == 2 ? 3 : 4].shape())) : x[i];
      const Tensor saved = raw::ttt_mlp_dual(c, 1e-6).second;
      const std::array<Tensor, 5> dy{up[0], up[1], up[2], up[3], up[4]};
      const auto with = raw::ttt_mlp_dual_backward(c, 1e-6, saved, dy);
      const auto without = raw::ttt_mlp_dual_backward(c, 1e-6, Tensor(), dy);
      for (size_t i = 0; i < with.size(); ++i) CHECK(with[i].to_vector() == without[i].to_vector());
    }
}

// The scan hands the kernel its operands where they lie: a mini-batch's slice of q and k, v's slice with its rows H·f
// apart, W broadcast over the batch, the previous unit's W' and bias' inside its packed output, η's slice; and the
// backward its upstream: dout a slice of the sequence's gradient with rows H·f apart, dW' and dbias' as the next
// unit's backward returned them. The CPU kernel reads those views (raw::dual_head_view) and must give the bits it
// gives on contiguous copies, copying nothing.
TEST_CASE("the CPU dual-form kernel reads head views in place: the bits of contiguous operands, no copies") {
  Generator g(61);
  NoGradGuard ng;
  for (DType dt : {DType::F64, DType::F32}) {
    const int64_t B = 2, H = 3, N = 12, b = 4, f = 5, u = 1;  // unit u of N / b
    const Tensor q = raw::slice(g.normal({B, H, N, f}, 0, 1, dt), 2, u * b, u * b + b);
    const Tensor k = raw::slice(g.normal({B, H, N, f}, 0, 1, dt), 2, u * b, u * b + b);
    const Tensor v = raw::slice(raw::permute(g.normal({B, N, H, f}, 0, 1, dt), {0, 2, 1, 3}), 2, u * b, u * b + b);
    const Tensor W = raw::expand(g.normal({1, H, f, f}, 0, 0.3, dt), {B, H, f, f});
    const Tensor packed = g.normal({B, H, b + f + 1, f}, 0, 0.1, dt);  // {out; W'; bias'} of a previous unit
    const Tensor bias = raw::slice(packed, 2, b + f, b + f + 1), W2 = raw::slice(packed, 2, b, b + f);
    const Tensor eta = raw::squeeze(raw::slice(g.uniform({B, H, N / b, b, b}, 0, 0.1, dt), 2, u, u + 1), 2);
    const Tensor gam = g.normal({1, H, 1, f}, 1, 0.1, dt), bet = g.normal({1, H, 1, f}, 0, 0.1, dt);
    for (const Tensor* t : {&q, &k, &v, &W, &bias, &W2, &eta}) REQUIRE(!t->is_contiguous());
    const Tensor dout = raw::slice(raw::permute(g.normal({B, N, H, f}, 0, 1, dt), {0, 2, 1, 3}), 2, u * b, u * b + b);
    const Tensor dW2 = g.normal({B, H, f, f}, 0, 1, dt);
    const Tensor db2 = raw::slice(g.normal({B, H, 2, f}, 0, 1, dt), 2, 1, 2);
    const Tensor dy = raw::cat({dout, dW2, db2}, 2);  // packed, for the copies' run
    auto run = [&](const Tensor& w, const Tensor& c, bool copies) {
      auto in = [&](const Tensor& t) { return copies ? raw::contiguous(t) : t; };
      const Tensor wq = in(w), cq = in(c), qq = in(q), kq = in(k), vq = in(v), eq = in(eta);
      prof::set_enabled(true);
      const auto l0 = prof::label_snapshot();
      auto [y, saved] = raw::ttt_linear_dual(wq, cq, qq, kq, vq, eq, gam, bet, 1e-6);
      auto d = copies ? raw::ttt_linear_dual_backward(wq, cq, qq, kq, vq, eq, gam, bet, saved, dy, 1e-6)
                      : raw::ttt_linear_dual_backward(wq, cq, qq, kq, vq, eq, gam, bet, saved, {dout, dW2, db2}, 1e-6);
      int64_t copied = 0;
      for (const prof::LabelTotal& l : prof::label_diff(prof::label_snapshot(), l0))
        if (l.label == "copy") copied += l.calls;
      prof::set_enabled(false);
      std::vector<std::vector<double>> out{y.to_vector()};
      for (const Tensor& t : d) out.push_back(t.to_vector());
      return std::make_pair(out, copied);
    };
    for (const Tensor* w : {&W, &W2}) {
      CAPTURE(dtype_name(dt));
      auto [viewed, copied] = run(*w, bias, false);
      auto [packed_in, unused] = run(*w, bias, true);
      CHECK(copied == 0);
      REQUIRE(viewed.size() == packed_in.size());
      for (size_t i = 0; i < viewed.size(); ++i) {
        CAPTURE(i);
        CHECK(viewed[i] == packed_in[i]);
      }
    }
  }
}

namespace {
// One run of a scan: the outputs, the inputs' gradients (backward of Σ⟨y_i, up_i⟩), the marks (u, p) in order with
// the FLOPs counted at each, the forward's and the whole run's FLOPs, the copy launches and the calls of `kernels`.
struct ScanRun {
  std::vector<Tensor> res;
  std::vector<std::pair<int64_t, int>> marks;
  std::vector<uint64_t> at;
  uint64_t fwd = 0, total = 0;
  int64_t copies = 0, kernels = 0;
};
using ScanMark = std::function<void(int64_t, int)>;
ScanRun record_scan(bool fused, std::vector<Tensor>& x, const std::vector<Tensor>& up, std::set<std::string> kernels,
                    const std::function<std::vector<Tensor>(const ScanMark&)>& scan) {
  raw::set_fused_kernels(fused);
  for (Tensor& t : x) zero_grad(t);
  ScanRun r;
  FlopScope scope;
  prof::set_enabled(true);
  const auto l0 = prof::label_snapshot();
  const std::vector<Tensor> y = scan([&](int64_t u, int p) {
    r.marks.push_back({u, p});
    r.at.push_back(scope.counts().total());
  });
  r.fwd = scope.counts().total();
  Tensor loss = sum(mul(y[0], up[0]));
  for (size_t i = 1; i < y.size(); ++i) loss = add(loss, sum(mul(y[i], up[i])));
  backward(loss);
  for (const prof::LabelTotal& l : prof::label_diff(prof::label_snapshot(), l0)) {
    if (l.label == "copy" || l.label == "cat") r.copies += l.calls;
    if (kernels.count(l.label)) r.kernels += l.calls;
  }
  prof::set_enabled(false);
  raw::set_fused_kernels(true);
  r.res = y;
  for (const Tensor& t : x) r.res.push_back(grad_of(t));
  r.total = scope.counts().total();
  return r;
}

// The scan node (s), the same scan op with the kernels off (c: the composition) and the scan op by op (u): the
// node gives the op-by-op scan's bits (the same kernels on the same operands in the same order, dγ and dβ added in
// the same order), the composition's values within tol, everyone's marks and FLOPs at them, fewer copies.
void check_scan_runs(const ScanRun& s, const ScanRun& c, const ScanRun& u, int64_t n, double tol) {
  REQUIRE(s.res.size() == u.res.size());
  for (size_t i = 0; i < s.res.size(); ++i) {
    CAPTURE(i);
    CHECK(s.res[i].to_vector() == u.res[i].to_vector());
    for (const ScanRun* other : {&c, &u}) {
      const Diff d = diff(s.res[i], other->res[i]);
      CHECK(d.scale > 1e-3);
      CHECK(d.err / d.scale <= tol);
    }
  }
  CHECK(s.marks.size() == size_t(5 * n));  // (u, −1), then phases 0 … 3, per unit in order
  CHECK(s.marks == c.marks);
  CHECK(s.marks == u.marks);
  CHECK(s.at == c.at);
  CHECK(s.at == u.at);
  CHECK(s.fwd == c.fwd);
  CHECK(s.total == u.total);
  MESSAGE("copy launches, forward and backward of ", n, " mini-batches: scan op ", s.copies, ", op by op ", u.copies);
  CHECK(s.copies < u.copies);
}
}  // namespace

// The scan op against the same scan op by op (ttt_linear_dual per mini-batch, split inputs, concatenated outputs):
// with the kernels off both run the composition; with them on, one node against n nodes and their pieces.
// The second shape has so many heads that the CPU scan kernel's backward sums dγ, dβ in blocks of units (8 MB of
// per-head parts at a time: 4 of the 5 units, then 1).
TEST_CASE("the TTT-Linear scan op equals its composition: values, gradients, FLOPs per unit and phase, fewer copies") {
  Generator g(67);
  struct Sz {
    int64_t B, H, n, b, f;
  };
  for (const Sz& z : {Sz{2, 3, 3, 4, 5}, Sz{4, 64, 5, 2, 8}}) {
    for (DType dt : {DType::F64, DType::F32}) {
      CAPTURE(dtype_name(dt));
      CAPTURE(z.H);
      const int64_t B = z.B, H = z.H, n = z.n, b = z.b, f = z.f, N = n * b;
      std::vector<Tensor> x{g.normal({H, f, f}, 0, 0.3, dt),       g.normal({H, 1, f}, 0, 0.1, dt),
                            g.normal({B, H, N, f}, 0, 1, dt),      g.normal({B, H, N, f}, 0, 1, dt),
                            raw::permute(g.normal({B, N, H, f}, 0, 1, dt), {0, 2, 1, 3}),
                            g.uniform({B, H, n, b, b}, 0, 0.1, dt), g.normal({1, H, 1, f}, 1, 0.1, dt),
                            g.normal({1, H, 1, f}, 0, 0.1, dt)};
      for (Tensor& t : x) set_requires_grad(t);
      const std::vector<Tensor> up{g.normal({B, H, N, f}, 0, 1, dt), g.normal({B, H, f, f}, 0, 1, dt),
                                   g.normal({B, H, 1, f}, 0, 1, dt)};
      const auto ours = [&](const ScanMark& mark) {
        const auto y = ttt_linear_scan(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], 1e-6, mark);
        return std::vector<Tensor>(y.begin(), y.end());
      };
      // The same mini-batches through ttt_linear_dual one by one (the layer's loop).
      const auto loop = [&](const ScanMark& mark) {
        std::vector<Tensor> outs;
        Tensor W = expand(x[0], {B, H, f, f}), c = expand(x[1], {B, H, 1, f});
        const std::vector<int64_t> sz(size_t(n), b);
        const auto qs = split(x[2], sz, 2), ks = split(x[3], sz, 2), vs = split(x[4], sz, 2),
                   es = split(x[5], std::vector<int64_t>(size_t(n), 1), 2);
        for (int64_t u = 0; u < n; ++u) {
          mark(u, -1);
          const size_t i = size_t(u);
          auto o = ttt_linear_dual(W, c, qs[i], ks[i], vs[i], squeeze(es[i], 2), x[6], x[7], 1e-6,
                                   [&](int p) { mark(u, p); });
          outs.push_back(o[0]);
          W = o[1];
          c = o[2];
        }
        return std::vector<Tensor>{cat(outs, 2), W, c};
      };
      const std::set<std::string> kernels{"ttt_linear_scan", "ttt_linear_scan_backward"};
      const ScanRun s = record_scan(true, x, up, kernels, ours), c = record_scan(false, x, up, kernels, ours),
                    u = record_scan(true, x, up, kernels, loop);
      CHECK(s.kernels == (backend(Device::CPU).dual_scan() ? 2 : 0));  // one call each way
      check_scan_runs(s, c, u, n, dt == DType::F64 ? 1e-12 : 5e-5);
      // The node's backward counts the dual kernel's VJP (compose::ttt_linear_dual_backward after its recomputation),
      // the composition the engine's VJPs of the forward's ops: other op sequences, close in count (4 % here).
      CHECK(double(s.total) < 1.08 * double(c.total));
    }
  }
}

// TTT-MLP's scan node runs the one-unit kernels unit by unit; it copies xq, xk, xv, η and dout units-first once each,
// where the op-by-op scan copied each unit's operands on their own.
TEST_CASE("the TTT-MLP scan op equals its composition: values, gradients, FLOPs per unit and phase, fewer copies") {
  Generator g(71);
  for (DType dt : {DType::F64, DType::F32}) {
    CAPTURE(dtype_name(dt));
    const int64_t B = 2, H = 3, n = 3, b = 4, f = 5, h = 7, N = n * b;
    std::vector<Tensor> x{g.normal({H, f, h}, 0, 0.3, dt),        g.normal({H, 1, h}, 0, 0.1, dt),
                          g.normal({H, h, f}, 0, 0.3, dt),        g.normal({H, 1, f}, 0, 0.1, dt),
                          g.normal({B, H, N, f}, 0, 1, dt),       g.normal({B, H, N, f}, 0, 1, dt),
                          raw::permute(g.normal({B, N, H, f}, 0, 1, dt), {0, 2, 1, 3}),
                          g.uniform({B, H, n, b, b}, 0, 0.1, dt), g.normal({1, H, 1, f}, 1, 0.1, dt),
                          g.normal({1, H, 1, f}, 0, 0.1, dt)};
    for (Tensor& t : x) set_requires_grad(t);
    const Shape ws[5] = {{B, H, N, f}, {B, H, f, h}, {B, H, 1, h}, {B, H, h, f}, {B, H, 1, f}};
    std::vector<Tensor> up;
    for (const Shape& s : ws) up.push_back(g.normal(s, 0, 1, dt));
    const auto ours = [&](const ScanMark& mark) {
      const auto y = ttt_mlp_scan({x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9]}, 1e-6, mark);
      return std::vector<Tensor>(y.begin(), y.end());
    };
    const auto loop = [&](const ScanMark& mark) {
      std::vector<Tensor> outs;
      std::array<Tensor, 4> w;
      for (size_t i = 0; i < 4; ++i) w[i] = expand(x[i], ws[i + 1]);
      const std::vector<int64_t> sz(size_t(n), b);
      const auto qs = split(x[4], sz, 2), ks = split(x[5], sz, 2), vs = split(x[6], sz, 2),
                 es = split(x[7], std::vector<int64_t>(size_t(n), 1), 2);
      for (int64_t u = 0; u < n; ++u) {
        mark(u, -1);
        const size_t i = size_t(u);
        auto o = ttt_mlp_dual({w[0], w[1], w[2], w[3], qs[i], ks[i], vs[i], squeeze(es[i], 2), x[8], x[9]}, 1e-6,
                              [&](int p) { mark(u, p); });
        outs.push_back(o[0]);
        w = {o[1], o[2], o[3], o[4]};
      }
      return std::vector<Tensor>{cat(outs, 2), w[0], w[1], w[2], w[3]};
    };
    const std::set<std::string> kernels{"ttt_mlp_dual", "ttt_mlp_dual_backward"};
    const ScanRun s = record_scan(true, x, up, kernels, ours), c = record_scan(false, x, up, kernels, ours),
                  u = record_scan(true, x, up, kernels, loop);
    CHECK(s.kernels == 2 * n);  // the one-unit kernels, unit by unit
    CHECK(c.kernels == 0);
    check_scan_runs(s, c, u, n, dt == DType::F64 ? 1e-12 : 5e-5);
  }
}

// Bad shapes reach the user as one message naming the op and the operand, before any kernel runs.
TEST_CASE("the TTT-MLP scan names a bad operand or buffer") {
  Generator g(73);
  const int64_t B = 1, H = 2, n = 2, b = 3, f = 4, h = 5, N = n * b;
  const std::array<Tensor, 10> x{g.normal({B, H, f, h}, 0, 0.3), g.normal({B, H, 1, h}, 0, 0.1),
                                 g.normal({B, H, h, f}, 0, 0.3), g.normal({B, H, 1, f}, 0, 0.1),
                                 g.normal({B, H, N, f}, 0, 1),   g.normal({B, H, N, f}, 0, 1),
                                 g.normal({B, H, N, f}, 0, 1),   g.uniform({B, H, n, b, b}, 0, 0.1),
                                 g.normal({1, H, 1, f}, 1, 0.1), g.normal({1, H, 1, f}, 0, 0.1)};
  std::array<Tensor, 10> bad = x;
  bad[7] = g.uniform({B, H, n + 1, b, b}, 0, 0.1);  // η for more rows than xq has
  CHECK_THROWS_WITH_AS(ttt_mlp_scan(bad, 1e-6), doctest::Contains("ttt_mlp_scan: eta"), std::invalid_argument);
  const Shape ys[5] = {{n, B, H, b, f}, {n, B, H, f, h}, {n, B, H, 1, h}, {n, B, H, h, f}, {n, B, H, 1, f}};
  std::array<Tensor, 5> Y;
  for (size_t i = 0; i < 5; ++i) Y[i] = Tensor::empty(ys[i]);
  const Tensor S = Tensor::empty({n, B * H, kMlpDualSaved(b, f, h)});
  std::array<Tensor, 5> wrong = Y;
  wrong[3] = Tensor::empty({n, B, H, f, h});  // W2's buffer shaped like W1's
  CHECK_THROWS_WITH_AS(raw::ttt_mlp_scan_into(wrong, S, x, 1e-6), doctest::Contains("ttt_mlp_scan: W2"),
                       std::invalid_argument);
  raw::ttt_mlp_scan_into(Y, S, x, 1e-6);
  std::array<Tensor, 10> gr;
  for (size_t i = 0; i < 10; ++i)
    gr[i] = Tensor::empty(i >= 4 && i < 7 ? Shape{n, B, H, b, f} : i == 7 ? Shape{n, B, H, b, b} : x[i].shape());
  const std::array<Tensor, 5> dy{g.normal({B, H, N, f}, 0, 1), g.normal({B, H, f, h}, 0, 1), g.normal({B, H, 1, h}, 0, 1),
                                 g.normal({B, H, f, h}, 0, 1), g.normal({B, H, 1, f}, 0, 1)};  // dW2_n misshaped
  CHECK_THROWS_WITH_AS(raw::ttt_mlp_scan_backward_into(gr, x, Y, S, dy, 1e-6),
                       doctest::Contains("the last unit's upstream 3"), std::invalid_argument);
}

TEST_CASE("the attention kernel equals its composition across query blocks, with a cache and a window") {
  Generator g(43);
  NoGradGuard ng;
  struct Geo {
    Shape q, kv;
    AttnGeometry geo;
  };
  // Causal over 150 queries (three blocks of the kernel's 64); then 70 queries after 130 cached keys, window 100.
  for (const Geo& c : {Geo{{2, 2, 150, 8}, {2, 2, 150, 8}, {0.35, 0, 0, 0}},
                       Geo{{1, 3, 70, 16}, {1, 3, 200, 16}, {0.25, 500, 370, 100}}})
    for (DType dt : {DType::F64, DType::F32}) {
      CAPTURE(shape_str(c.kv));
      const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
      Tensor q = g.normal(c.q, 0, 1, dt), k = g.normal(c.kv, 0, 1, dt), v = g.normal(c.kv, 0, 1, dt);
      Tensor dy = g.normal(c.q, 0, 1, dt);
      auto run = [&](bool fused) {
        raw::set_fused_kernels(fused);
        FlopScope scope;
        Tensor y = attention(q, k, v, c.geo);
        Tensor lse = fused ? raw::attention(q, k, v, c.geo).second : Tensor();
        const FlopCounts fwd = scope.counts();
        auto grads = attention_backward(q, k, v, y, lse, dy, c.geo);
        raw::set_fused_kernels(true);
        return std::make_tuple(std::vector<Tensor>{y, grads[0], grads[1], grads[2]}, fwd, scope.counts());
      };
      auto [fo, ff, ft] = run(true);
      auto [po, pf, pt] = run(false);
      for (size_t i = 0; i < fo.size(); ++i) {
        CAPTURE(i);
        const Diff d = diff(fo[i], po[i]);
        CHECK(d.err / d.scale <= tol);
      }
      // raw::attention (for lse) counts nothing: FLOPs belong to the op, counted once by the front end.
      CHECK(ff.total() == pf.total());
      CHECK((ft - ff).total() == (pt - pf).total());
      CHECK(pf.category(FlopCat::Matmul) == uint64_t(4 * shape_numel(c.q) / c.q.back() * c.kv[2] * c.q.back()));
    }
}

TEST_CASE("each backend says which fused kernels it has; the derived FLOP rules are the kernels' known counts") {
  for (size_t i = 0; i < size_t(FusedOp::Count); ++i) {
    CAPTURE(fused_op_name(FusedOp(i)));
    CHECK(backend(Device::CPU).supports(FusedOp(i)));
  }
  // Counted by hand from the compositions (elements, rows per category) and stated in docs/engine.md.
  auto el = [](FusedOp op, int64_t n, int64_t r) {
    const fused::Rule rule = fused::rule(op);
    return rule.term(FlopCat::Elementwise, {0, 1}) == n && rule.term(FlopCat::Elementwise, {0}) == r &&
           rule.term(FlopCat::Elementwise, {1}) == 0 && rule.term(FlopCat::Elementwise, {}) == 0;
  };
  CHECK(el(FusedOp::LayerNormRows, 3, 3));
  CHECK(el(FusedOp::LayerNormBackward, 8, 5));
  CHECK(el(FusedOp::LayerNormVjp, 25, 12));
  CHECK(el(FusedOp::LnL2GradVjp, 47, 20));
  CHECK(el(FusedOp::AdamwStep, 14, 0));
  CHECK(fused::rule(FusedOp::LnL2GradVjp).term(FlopCat::Reduction, {0, 1}) == 15);
  CHECK(fused::rule(FusedOp::LnL2GradVjp, true).term(FlopCat::Reduction, {0, 1}) == 17);  // dγ, dβ summed over rows
  CHECK(fused::rule(FusedOp::LnL2GradVjp).term(FlopCat::Matmul, {0, 1}) == 0);
  // Attention over sizes {G, n, T, f}: two products of 2·n·T·f each per head, and its backward four.
  CHECK(fused::rule(FusedOp::Attention).term(FlopCat::Matmul, {0, 1, 2, 3}) == 4);
  CHECK(fused::rule(FusedOp::AttentionBackward).term(FlopCat::Matmul, {0, 1, 2, 3}) >= 8);
  // A derivation counts nothing itself.
  FlopScope scope;
  (void)fused::rule(FusedOp::ActMulBackward, false, int(GateAct::GeluTanh));
  CHECK(scope.counts().total() == 0);
}

TEST_CASE("sum_squares gives the composition's bits") {
  Generator g(41);
  for (DType dt : {DType::F32, DType::F64})
    for (const Shape& s : std::vector<Shape>{{7, 300}, {5}, {3, 1, 40}, {1, 1}}) {
      Tensor t = g.normal(s, 0, 1, dt);
      const double fused = sum_squares(t);
      raw::set_fused_kernels(false);
      const double plain = sum_squares(t);
      raw::set_fused_kernels(true);
      CHECK(fused == plain);
    }
}

TEST_CASE("the fused AdamW step gives the composition's bits") {
  Generator g(37);
  for (DType dt : {DType::F32, DType::F64}) {
    Tensor p0 = g.normal({7, 300}, 0, 1, dt), grad = g.normal({7, 300}, 0, 0.1, dt);
    Tensor m0 = g.normal({7, 300}, 0, 0.01, dt), v0 = g.uniform({7, 300}, 0, 1e-3, dt);
    const AdamWCoeffs c{3e-3, 0.9, 0.95, 1e-8, 0.1, 1 - std::pow(0.9, 3.0), 1 - std::pow(0.95, 3.0)};
    std::vector<std::vector<double>> out[2];
    for (bool fused : {true, false}) {
      Tensor p = raw::clone(p0), m = raw::clone(m0), v = raw::clone(v0);
      raw::set_fused_kernels(fused);
      FlopScope scope;
      adamw_step_(p, m, v, grad, c);
      raw::set_fused_kernels(true);
      CHECK(scope.counts().category(FlopCat::Elementwise) == 14 * 7 * 300);
      CHECK(p.version() == 1);
      out[fused] = {p.to_vector(), m.to_vector(), v.to_vector()};
    }
    CHECK(out[0] == out[1]);
  }
}
