// `ponder demo`: the stack end to end in seconds. A 2-layer MLP (Linear → relu → Linear) learns to tell
// apart three interleaved spirals with AdamW, printing the exact FLOPs of each training step.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <vector>

#include "autograd/engine.h"
#include "autograd/nn.h"
#include "autograd/optim.h"
#include "experiments/cli/commands.h"

namespace ponder::cli {
namespace cmd_demo {
namespace {

constexpr int kClasses = 3;

struct DemoArgs {
  int steps = 300;
  int hidden = 64;
  int points = 200;  // per class, for each of the training and test sets
  int log_every = 50;
  uint64_t seed = 0;
  double lr = 1e-2;
};

struct Dataset {
  Tensor x;  // (N, 2) f32
  Tensor y;  // (N) i64
};

// Class c is the arm at angle 2πc/3 that winds outwards; the noise makes neighbouring arms overlap a little
// so the accuracy has something to show.
Dataset spirals(int64_t per_class, Generator& gen) {
  const int64_t n = kClasses * per_class;
  const std::vector<double> r = gen.uniform({n}, 0.05, 1.0, DType::F64).to_vector();
  const std::vector<double> noise = gen.normal({n, 2}, 0.0, 0.04, DType::F64).to_vector();
  std::vector<double> xs(static_cast<size_t>(2 * n));
  std::vector<int64_t> ys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i / per_class;
    const double theta = 2 * std::numbers::pi * double(c) / kClasses + 4.0 * r[size_t(i)];
    xs[size_t(2 * i)] = r[size_t(i)] * std::cos(theta) + noise[size_t(2 * i)];
    xs[size_t(2 * i + 1)] = r[size_t(i)] * std::sin(theta) + noise[size_t(2 * i + 1)];
    ys[size_t(i)] = c;
  }
  return {Tensor::from_vector(xs, {n, 2}), Tensor::from_ints(ys, {n})};
}

struct Mlp {
  Linear l1, l2;
  Tensor forward(const Tensor& x) const { return l2.forward(relu(l1.forward(x))); }
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> p = l1.parameters();
    for (const Tensor& t : l2.parameters()) p.push_back(t);
    return p;
  }
};

double accuracy(const Tensor& logits, const Tensor& y) {
  const std::vector<double> l = logits.to_vector();
  const std::vector<int64_t> t = y.to_ints();
  int64_t right = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    size_t best = 0;
    for (size_t c = 1; c < size_t(kClasses); ++c)
      if (l[i * kClasses + c] > l[i * kClasses + best]) best = c;
    right += int64_t(best) == t[i];
  }
  return double(right) / double(t.size());
}

void run_demo(const DemoArgs& o) {
  Generator gen(o.seed);
  const Dataset train = spirals(o.points, gen), test = spirals(o.points, gen);
  Mlp mlp{Linear(2, o.hidden, true, gen), Linear(o.hidden, kClasses, true, gen)};
  AdamW opt(mlp.parameters(), o.lr);
  std::printf("demo: MLP 2 -> %d -> %d (relu) on %d-class spirals, %d train / %d test points, AdamW lr %g, seed %llu\n",
              o.hidden, kClasses, kClasses, o.points * kClasses, o.points * kClasses, o.lr,
              (unsigned long long)o.seed);
  const auto t0 = std::chrono::steady_clock::now();
  FlopCounts total;
  double loss_value = 0;
  for (int step = 1; step <= o.steps; ++step) {
    opt.zero_grad();
    FlopScope grad_scope;
    const Tensor logits = mlp.forward(train.x);
    const Tensor loss = cross_entropy(logits, train.y);
    backward(loss);
    const FlopCounts grad_flops = grad_scope.counts();
    loss_value = loss.item();
    if (!std::isfinite(loss_value)) {
      char msg[160];
      std::snprintf(msg, sizeof msg, "demo: loss is %g at step %d; try a smaller --lr than %g", loss_value, step, o.lr);
      throw std::runtime_error(msg);
    }
    FlopScope opt_scope;
    opt.step();
    const FlopCounts opt_flops = opt_scope.counts();
    total += grad_flops;
    total += opt_flops;
    if (step % o.log_every == 0 || step == 1 || step == o.steps)
      std::printf("step %4d  loss %.4f  train acc %.3f  FLOPs/step: fwd %llu  bwd %llu  optim %llu\n", step,
                  loss_value, accuracy(logits, train.y), (unsigned long long)grad_flops.phase(Phase::Forward),
                  (unsigned long long)grad_flops.phase(Phase::Backward), (unsigned long long)opt_flops.total());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  NoGradGuard no_grad;
  const double train_acc = accuracy(mlp.forward(train.x), train.y);
  const double test_acc = accuracy(mlp.forward(test.x), test.y);
  std::printf("final: loss %.4f  train acc %.3f  test acc %.3f  (%d steps, %.2f s, %llu FLOPs in all)\n", loss_value,
              train_acc, test_acc, o.steps, secs, (unsigned long long)total.total());
}

}  // namespace
}  // namespace cmd_demo

void register_demo(CLI::App& app) {
  using namespace cmd_demo;
  auto opts = std::make_shared<DemoArgs>();
  CLI::App* sub = app.add_subcommand("demo", "Train a small MLP on synthetic spirals (a few seconds)");
  sub->add_option("--steps", opts->steps, "Training steps (full batch)")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--hidden", opts->hidden, "Hidden units")->check(kPositive)->capture_default_str();
  sub->add_option("--points", opts->points, "Points per class in each of the train and test sets")
      ->check(kPositive)
      ->capture_default_str();
  sub->add_option("--lr", opts->lr, "AdamW learning rate")->check(kPositive)->capture_default_str();
  sub->add_option("--seed", opts->seed, "Seed for data and initialisation")->capture_default_str();
  sub->add_option("--log-every", opts->log_every, "Print a progress line every N steps")
      ->check(kPositive)
      ->capture_default_str();
  sub->callback([opts] { run_demo(*opts); });
}

PONDER_COMMAND(demo, register_demo);

}  // namespace ponder::cli
