// Same seed ⇒ bitwise-identical parameters after 20 AdamW steps, for 1 and for 2 threads (each
// thread count compared with itself; sizes are large enough that kernels actually go parallel), and kernels
// whose results must not depend on the thread count.
#include <doctest/doctest.h>

#include "autograd/engine.h"
#include "autograd/nn.h"
#include "autograd/optim.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/kernels.h"

using namespace ponder;

namespace {
std::vector<std::vector<double>> train_20_steps(uint64_t seed) {
  Generator gen(seed);
  Linear l1(64, 512, true, gen), l2(512, 16, true, gen);
  std::vector<Tensor> params = l1.parameters();
  for (const Tensor& p : l2.parameters()) params.push_back(p);
  AdamW opt(params, 1e-2, 0.9, 0.95, 1e-8, 0.1);
  for (int step = 0; step < 20; ++step) {
    Tensor x = gen.normal({128, 64}, 0, 1);
    Tensor y = Tensor::from_ints(gen.categorical(Tensor::full({128, 16}, 1.0)).to_ints(), {128});
    Tensor loss = cross_entropy(l2.forward(gelu_tanh(l1.forward(x))), y);
    opt.zero_grad();
    backward(loss);
    clip_grad_norm(params, 1.0);
    opt.step();
  }
  std::vector<std::vector<double>> out;
  for (const Tensor& p : params) out.push_back(p.to_vector());
  return out;
}
}  // namespace

TEST_CASE("same seed gives bitwise-identical parameters after 20 AdamW steps") {
  for (int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    INFO("threads: ", threads);
    auto a = train_20_steps(17);
    auto b = train_20_steps(17);
    CHECK(a == b);
    CHECK(train_20_steps(18) != a);  // a different seed gives different parameters
  }
}

TEST_CASE("the attention kernel gives the same bits on 1 and 2 threads, forward and backward") {
  Generator gen(23);
  Tensor q = gen.normal({2, 4, 130, 16}, 0, 1), k = gen.normal({2, 4, 130, 16}, 0, 1);
  Tensor v = gen.normal({2, 4, 130, 16}, 0, 1), dy = gen.normal({2, 4, 130, 16}, 0, 1);
  const AttnGeometry geo{0.25, 0, 0, 48};
  std::vector<std::vector<double>> out[2];
  for (int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    auto [y, lse] = raw::attention(q, k, v, geo);
    auto [dq, dk, dv] = raw::attention_backward(q, k, v, y, lse, dy, geo);
    for (const Tensor& t : {y, lse, dq, dk, dv}) out[threads - 1].push_back(t.to_vector());
  }
  CHECK(out[0] == out[1]);
}

TEST_CASE("TTT-MLP's dual-form kernel gives the same bits on 1 and 2 threads, forward and backward") {
  Generator gen(31);
  // 3 × 3 heads, an odd count, so the two threads' shares differ; dγ and dβ sum over every head.
  const int64_t B = 3, H = 3, b = 16, f = 24, h = 96;
  const std::array<Tensor, 10> x{gen.normal({B, H, f, h}, 0, 0.2), gen.normal({B, H, 1, h}, 0, 0.1),
                                 gen.normal({B, H, h, f}, 0, 0.2), gen.normal({B, H, 1, f}, 0, 0.1),
                                 gen.normal({B, H, b, f}, 0, 1),   gen.normal({B, H, b, f}, 0, 1),
                                 gen.normal({B, H, b, f}, 0, 1),   gen.uniform({B, H, b, b}, 0, 0.1),
                                 gen.normal({1, H, 1, f}, 1, 0.1), gen.normal({1, H, 1, f}, 0, 0.1)};
  const std::array<Tensor, 5> dy{gen.normal({B, H, b, f}, 0, 1), gen.normal({B, H, f, h}, 0, 1),
                                 gen.normal({B, H, 1, h}, 0, 1), gen.normal({B, H, h, f}, 0, 1),
                                 gen.normal({B, H, 1, f}, 0, 1)};
  std::vector<std::vector<double>> out[2];
  for (int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    auto [y, saved] = raw::ttt_mlp_dual(x, 1e-6);
    for (const Tensor& t : y) out[threads - 1].push_back(t.to_vector());
    for (const Tensor& g : raw::ttt_mlp_dual_backward(x, 1e-6, saved, dy)) out[threads - 1].push_back(g.to_vector());
  }
  CHECK(out[0] == out[1]);
}

TEST_CASE("prefix mode's K-step kernel gives the same bits on 1 and 2 threads, forward and backward") {
  Generator gen(29);
  // 3 × 3 heads, an odd count, so the two threads' shares differ; dγ and dβ sum over every head.
  const int64_t B = 3, H = 3, b = 16, f = 24, P = b * (b + 1) / 2;
  Tensor z0 = gen.normal({B, H, b, f}, 0, 1), t = gen.normal({B, H, b, f}, 0, 1);
  Tensor neg_m = gen.uniform({B, H, b, b}, -0.3, 0.05), w = gen.uniform({B, H, P, 1}, 0, 0.1);
  Tensor gam = gen.normal({1, H, 1, f}, 1, 0.1), bet = gen.normal({1, H, 1, f}, 0, 0.1);
  Tensor da = gen.normal({B, H, P, f}, 0, 1);
  std::vector<std::vector<double>> out[2];
  for (int threads : {1, 2}) {
    cpu::set_num_threads(threads);
    auto [a, saved] = raw::ttt_prefix_steps(z0, t, neg_m, w, gam, bet, 3, 1e-6);
    out[threads - 1].push_back(a.to_vector());
    for (const Tensor& g : raw::ttt_prefix_steps_backward(z0, t, neg_m, w, gam, bet, 3, 1e-6, saved, da))
      out[threads - 1].push_back(g.to_vector());
  }
  CHECK(out[0] == out[1]);
}
