// The RL math of rl/ against the reference values of docs/rl_stats.md §9.1–§9.6 (tolerance 1e-9 unless a case says
// otherwise), plus the edge cases its pitfalls (§10) name. The § numbers in test names and the P labels refer to
// docs/rl_stats.md.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "rl/gae.h"
#include "rl/halting.h"
#include "rl/pid.h"
#include "rl/ppo_math.h"
#include "rl/returns.h"
#include "test_util.h"

using namespace ponder::rl;
using Vec = std::vector<double>;
using ponder::test::check_close;

namespace {

Vec log_of(const Vec& x) {
  Vec out;
  for (double v : x) out.push_back(std::log(v));
  return out;
}

// Every error here is a std::invalid_argument: another type would mean a check went missing.
template <class F> std::string error_of(F&& f) { return ponder::test::error_of<std::invalid_argument>(f); }

// The λ sequence a PID controller produces for a sequence of average costs.
Vec run_pid(const PidConfig& config, const Vec& costs) {
  PidLagrangian pid(config);
  Vec out;
  for (double j : costs) out.push_back(pid.update(j));
  return out;
}

// rlpyt's code form configured as the paper's Algorithm 2 (docs/rl_stats.md §4): no EMAs, delay 1, λ_init 0.
PidConfig paper_form(double kp, double ki, double kd, double limit) {
  PidConfig c;
  c.kp = kp, c.ki = ki, c.kd = kd, c.cost_limit = limit;
  c.d_delay = 1, c.alpha_p = 0, c.alpha_d = 0, c.lambda_init = 0;
  return c;
}

}  // namespace

TEST_CASE("§9.1 discounted returns: terminal at the end and resets at episode ends") {
  CHECK(discounted_returns({5}, {.terminated = {true}}, 0.9) == Vec{5});  // one terminal step returns its reward
  check_close(discounted_returns({1, 0, 2, 3}, {.terminated = {false, false, false, true}}, 0.9),
              {4.807, 4.23, 4.7, 3});
  check_close(discounted_returns({1, 2, 3, 4}, {.terminated = {false, true, false, true}}, 0.5), {2, 2, 5, 4});
}

TEST_CASE("discounted returns bootstrap at truncations and after the last transition (P1)") {
  // A cut mid-document bootstraps from V(final obs) instead of resetting to 0: G_1 = 2 + 0.5·6.
  const Boundaries cut{.truncated = {false, true, false, false}, .final_values = {0, 6, 0, 0}, .bootstrap_value = 8};
  check_close(discounted_returns({1, 2, 3, 4}, cut, 0.5), {1 + 0.5 * 5, 5, 3 + 0.5 * 8, 8});
  // A terminal wins over a truncation flag on the same transition, and γ = 0 leaves the rewards.
  check_close(discounted_returns({1, 2}, {.terminated = {true, false}, .truncated = {true, false},
                                          .final_values = {9, 0}}, 0.9), {1, 2});
  check_close(discounted_returns({1, 2, 3}, {.bootstrap_value = 100}, 0.0), {1, 2, 3});
  CHECK(error_of([] { discounted_returns({1, 2}, {.truncated = {true, false}}, 0.9); }).find("final_values") !=
        std::string::npos);
  CHECK(error_of([] { discounted_returns({1, 2}, {.terminated = {true}}, 0.9); }).find("terminated") !=
        std::string::npos);
  CHECK(error_of([] { discounted_returns({1, NAN}, {}, 0.9); }).find("rewards[1]") != std::string::npos);
  CHECK(error_of([] { discounted_returns({1}, {}, 1.5); }).find("gamma") != std::string::npos);
}

TEST_CASE("§9.1 REINFORCE: batch-mean baseline, std conventions, normalisation, losses and logit gradient") {
  const Vec g = {4.807, 4.23, 4.7, 3};
  check_close(batch_mean_advantages(g), {0.62275, 0.04575, 0.51575, -1.18425});
  const Vec centred = batch_mean_advantages(g);
  CHECK(std::abs(centred[0] + centred[1] + centred[2] + centred[3]) < 1e-12);  // a mean baseline centres the batch
  // The reference normalised vector (docs/rl_stats.md §9.1) is computed without eps; pytorch/examples' float32 eps
  // moves it by ~1.4e-7 relative.
  const Vec normalized = {0.7518202855, 0.05523208039, 0.6226436166, -1.429695982};
  check_close(standardize(g, 1, 0.0), normalized, 1e-9);
  check_close(standardize(g), normalized, 1e-6);
  // std unbiased 0.8283229543, biased 0.717348721: the two ddof conventions differ by sqrt(4/3).
  check_close(standardize(g, 0, 0.0)[3], -1.18425 / 0.717348721, 1e-9);
  check_close(standardize(g, 1, 0.0)[3], -1.18425 / 0.8283229543, 1e-9);

  const Vec v = {4, 4, 5, 3};
  const Vec a = {g[0] - v[0], g[1] - v[1], g[2] - v[2], g[3] - v[3]};
  check_close(a, {0.807, 0.23, -0.3, 0});
  check_close(policy_gradient_loss(log_of({0.5, 0.25, 0.8, 0.1}), a), 0.2028186031);
  check_close(value_loss(v, g), 0.099268625);
  check_close(policy_gradient_logit_grad({0, 0}, 0, 2), {-1, 1});
}

TEST_CASE("standardize: batch size 1 is returned unchanged, constant batches give zeros (P2)") {
  check_close(standardize({3.5}), {3.5});
  check_close(normalize_advantages({-2.0}), {-2.0});
  check_close(standardize({2, 2, 2}), {0, 0, 0});
  check_close(standardize({2, 2, 2}, 1, 0.0), {0, 0, 0});
  CHECK(error_of([] { standardize({}); }).find("empty") != std::string::npos);
  CHECK(error_of([] { standardize({1, 2}, 2); }).find("ddof") != std::string::npos);
}

TEST_CASE("leave-one-out and EMA baselines") {
  // Two groups of K = 3: b_i = mean of the other two in its group.
  check_close(leave_one_out_advantages({1, 2, 6, 0, 0, 3}, 3), {1 - 4, 2 - 3.5, 6 - 1.5, 0 - 1.5, 0 - 1.5, 3 - 0});
  CHECK(error_of([] { leave_one_out_advantages({1, 2, 3}, 2); }).find("groups of 2") != std::string::npos);
  CHECK(error_of([] { leave_one_out_advantages({1, 2}, 1); }).find("group_size") != std::string::npos);

  EmaBaseline ema(0.9);
  CHECK_FALSE(ema.initialised());
  check_close(ema.advantages({1, 3}), {-1, 1});  // first batch: b starts at its mean, 2
  check_close(ema.value(), 2.0);
  check_close(ema.advantages({10, 12}), {8, 10});  // uses b before this batch ...
  check_close(ema.value(), 0.9 * 2 + 0.1 * 11);   // ... then moves towards its mean
  CHECK_THROWS_AS(EmaBaseline(1.0), std::invalid_argument);
}

TEST_CASE("§9.2 GAE in every boundary case") {
  const Vec r = {1, 0, 2, 1}, v = {0.5, 1.0, 1.5, 0.5};
  // γ = λ = 0: each advantage is the one-step TD error r − V, whatever follows.
  const GaeResult td = gae(r, v, {.bootstrap_value = 2.0}, 0.0, 0.0);
  for (size_t t = 0; t < r.size(); ++t) CHECK(td.advantages[t] == doctest::Approx(r[t] - v[t]));
  SUBCASE("no boundaries, bootstrapped after the rollout") {
    const GaeResult out = gae(r, v, {.bootstrap_value = 2.0}, 0.99, 0.95);
    check_close(out.advantages, {4.889397109, 3.61445732, 3.32744, 2.48});
    check_close(out.returns, {5.389397109, 4.61445732, 4.82744, 2.98});
    CHECK(out.advantages[3] == doctest::Approx(r[3] + 0.99 * 2.0 - v[3]));  // last step: one TD error onto the bootstrap
  }
  SUBCASE("terminal after t=1 (a document end)") {
    const GaeResult out = gae(r, v, {.terminated = {false, true, false, false}, .bootstrap_value = 2.0}, 0.99, 0.95);
    check_close(out.advantages, {0.5495, -1, 3.32744, 2.48});
    check_close(out.returns, {1.0495, 0, 4.82744, 2.98});
    CHECK(out.returns[1] == doctest::Approx(r[1]));  // nothing after a terminal step: its return is its reward
  }
  SUBCASE("truncated after t=1 bootstraps V(final obs) = 3 and cuts the recursion (P1)") {
    const Boundaries cut{.truncated = {false, true, false, false}, .final_values = {0, 3.0, 0, 0},
                         .bootstrap_value = 2.0};
    check_close(gae(r, v, cut, 0.99, 0.95).advantages, {3.342785, 1.97, 3.32744, 2.48});
    CHECK(gae(r, v, cut, 0.99, 0.95).advantages[1] == doctest::Approx(r[1] + 0.99 * 3.0 - v[1]));  // V(final obs)
  }
  SUBCASE("λ = 1 is Monte-Carlo, λ = 0 is one-step TD") {
    check_close(gae(r, v, {.bootstrap_value = 2.0}, 0.99, 1.0).advantages, {5.35169102, 3.900698, 3.4502, 2.48});
    check_close(gae(r, v, {.bootstrap_value = 2.0}, 0.99, 0.0).advantages, {1.49, 0.485, 0.995, 2.48});
    CHECK(gae(r, v, {.bootstrap_value = 2.0}, 0.99, 0.0).advantages[0] == doctest::Approx(r[0] + 0.99 * v[1] - v[0]));
    // λ = 1: A_t = G_t - V(s_t) with G bootstrapped the same way.
    const Vec g = discounted_returns(r, {.bootstrap_value = 2.0}, 0.99);
    check_close(gae(r, v, {.bootstrap_value = 2.0}, 0.99, 1.0).returns, g);
  }
  SUBCASE("a truncation on the last transition reads final_values, not bootstrap_value") {
    const Boundaries last{.truncated = {false, false, false, true}, .final_values = {0, 0, 0, 2.0},
                          .bootstrap_value = -50};
    check_close(gae(r, v, last, 0.99, 0.95).advantages, {4.889397109, 3.61445732, 3.32744, 2.48});
    CHECK(gae(r, v, last, 0.99, 0.95).advantages[3] == doctest::Approx(r[3] + 0.99 * 2.0 - v[3]));  // not -50
  }
  CHECK(error_of([&] { gae(r, {1, 2}, {}, 0.99, 0.95); }).find("values") != std::string::npos);
  CHECK(error_of([&] { gae(r, v, {}, 0.99, -0.1); }).find("lambda") != std::string::npos);
}

TEST_CASE("§9.3 PPO clipped surrogate, KL estimators, clip fraction and gradients") {
  // At ratio 1 nothing is clipped and the loss is −mean(Â).
  CHECK(clipped_surrogate({0, 0}, {1, 3}, 0.2).loss == doctest::Approx(-2.0));
  CHECK(clip_fraction({0, 0}, 0.2) == 0.0);
  SUBCASE("r = [1.5, 0.5, 0.5, 1.5], Â = [1, 1, -1, -1]") {
    const Vec lr = log_of({1.5, 0.5, 0.5, 1.5}), adv = {1, 1, -1, -1};
    const ClippedSurrogate s = clipped_surrogate(lr, adv, 0.2);
    check_close(s.loss, 0.15);  // -mean([1.2, 0.5, -0.8, -1.5])
    check_close(clip_fraction(lr, 0.2), 1.0);
    check_close(approx_kl(lr), 0.1438410362);
    check_close(old_approx_kl(lr), 0.1438410362);  // equal here because mean(r - 1) = 0
    // The clipped branch is active for samples 1 and 3 (zero gradient), not for 2 and 4.
    CHECK(s.grad_logratio[0] == 0.0);
    CHECK(s.grad_logratio[2] == 0.0);
    check_close(s.grad_logratio[1], -1 * 0.5 / 4);
    check_close(s.grad_logratio[3], 1 * 1.5 / 4);
  }
  SUBCASE("logratio = [0.1, -0.2, 0.3, -0.05], Â = [1, -1, 2, 0.5]") {
    const Vec lr = {0.1, -0.2, 0.3, -0.05}, adv = {1, -1, 2, 0.5};
    const ClippedSurrogate s = clipped_surrogate(lr, adv, 0.2);
    check_close(approx_kl(lr), 0.01874747581);
    check_close(old_approx_kl(lr), -0.0375);
    check_close(s.loss, -0.7905137193);
    check_close(clip_fraction(lr, 0.2), 0.25);
    check_close(s.grad_logratio, {-0.2762927295, 0.2046826883, 0, -0.1189036781});
    // The analytic gradient agrees with central differences of the loss.
    for (size_t i = 0; i < lr.size(); ++i) {
      Vec up = lr, down = lr;
      up[i] += 1e-6, down[i] -= 1e-6;
      const double fd = (clipped_surrogate(up, adv, 0.2).loss - clipped_surrogate(down, adv, 0.2).loss) / 2e-6;
      check_close(s.grad_logratio[i], fd, 1e-8);
    }
  }
  CHECK(error_of([] { clipped_surrogate({0.1}, {1, 2}, 0.2); }).find("advantages") != std::string::npos);
  CHECK(error_of([] { approx_kl({}); }).find("empty") != std::string::npos);
}

TEST_CASE("§9.3 value clipping, advantage normalisation conventions, entropy, explained variance") {
  check_close(clip_value(1.5, 1.0, 0.2), 1.2);
  check_close(clipped_value_loss({1.5}, {1.0}, {2.0}, 0.2), 0.32);
  check_close(value_loss({1.5}, {2.0}), 0.125);
  check_close(normalize_advantages({1, 2, 3, 4}), {-1.161894995, -0.3872983316, 0.3872983316, 1.161894995});
  check_close(standardize({1, 2, 3, 4}, 0, 1e-8), {-1.341640774, -0.4472135915, 0.4472135915, 1.341640774});
  check_close(categorical_entropy({0.5, 0.5}), 0.6931471806);
  check_close(categorical_entropy({0.7, 0.2, 0.1}), 0.8018185525);
  check_close(categorical_entropy({1.0, 0.0}), 0.0);
  check_close(explained_variance({1, 2, 3}, {1, 2, 3}), 1.0);
  check_close(explained_variance({0, 0, 0}, {1, 2, 3}), 0.0);
  CHECK(std::isnan(explained_variance({1, 2}, {3, 3})));
  CHECK(error_of([] { categorical_entropy({0.5, 0.6}); }).find("sum") != std::string::npos);
}

TEST_CASE("§9.4 PID-Lagrangian: paper/code equivalence, pure I, OmniSafe defaults, naive SGD") {
  const Vec costs = {30, 30, 20, 20, 25, 40};
  for (double l : run_pid(paper_form(0.1, 0.01, 0.01, 25), costs)) CHECK(l >= 0.0);  // λ is projected onto [0, ∞)
  const Vec paper = {0.85, 0.6, 0, 0, 0.05, 1.8};
  check_close(run_pid(paper_form(0.1, 0.01, 0.01, 25), costs), paper);
  check_close(run_pid(paper_form(0, 0.01, 0, 25), costs), {0.05, 0.1, 0.05, 0, 0, 0.15});

  PidConfig omnisafe;
  omnisafe.kp = 0.1, omnisafe.ki = 0.01, omnisafe.kd = 0.01, omnisafe.lambda_init = 0.001;
  check_close(run_pid(omnisafe, costs), {0.091, 0.179, 0.1101, 0.042145, 0.05258775, 0.2950083625});

  Vec naive;
  double lambda = 0.001;
  for (double j : costs) naive.push_back(lambda = projected_sgd_lagrange_step(lambda, j, 25, 0.035));
  check_close(naive, {0.176, 0.351, 0.176, 0.001, 0.001, 0.526});
}

TEST_CASE("§9.4 PID-Lagrangian: first-update D-kick, anti-windup, step response") {
  // Under budget from the start, a pure-I controller never leaves 0.
  CHECK(run_pid(paper_form(0, 0.01, 0, 25), {20, 20, 20}) == Vec{0, 0, 0});
  // Step 0 of the paper controller: Δ = 5, ∂ = (30 - 0)+ = 30, I = 5 → λ = 0.5 + 0.05 + 0.3 (P6).
  PidLagrangian pid(paper_form(0.1, 0.01, 0.01, 25));
  check_close(pid.update(30), 0.5 + 0.05 + 0.3);
  // The projected integral cannot bank the under-budget steps, so λ responds to the first violation at once
  // (without the projection it would have wound down to -15 and stayed at 0).
  check_close(run_pid(paper_form(0, 0.01, 0, 25), {20, 20, 20, 30, 30}), {0, 0, 0, 0.05, 0.1});
  Vec step_costs(5, 40.0);
  step_costs.insert(step_costs.end(), 5, 10.0);
  check_close(run_pid(paper_form(1, 0.1, 0, 25), step_costs), {16.5, 18, 19.5, 21, 22.5, 0, 0, 0, 0, 0});
}

TEST_CASE("PID-Lagrangian: Diff and None norms bound λ, bad inputs are rejected") {
  PidConfig diff = paper_form(1, 0.1, 0, 25);
  diff.norm = PenaltyNorm::Diff;
  for (double l : run_pid(diff, {40, 40, 40})) CHECK(l == 1.0);
  PidConfig capped = paper_form(1, 0.1, 0, 25);
  capped.norm = PenaltyNorm::None, capped.penalty_max = 3;
  CHECK(run_pid(capped, {40, 40}) == Vec{3, 3});
  PidLagrangian pid;
  CHECK(error_of([&] { pid.update(NAN); }).find("cost") != std::string::npos);
  PidConfig bad;
  bad.d_delay = 0;
  CHECK(error_of([&] { PidLagrangian{bad}; }).find("d_delay") != std::string::npos);
}

TEST_CASE("§9.4 λ mixing of reward and cost objectives") {
  check_close(combine_advantages({1}, {2}, 0.5), {0});
  check_close(combine_advantages({1, 3}, {0, 1}, 1.0), {0.5, 1});
  check_close(combine_losses(1, 2, 0.5, PenaltyNorm::Sum), (1 + 0.5 * 2) / 1.5);
  check_close(combine_losses(1, 2, 0.25, PenaltyNorm::Diff), 0.75 * 1 + 0.25 * 2);
  check_close(combine_losses(1, 2, 4, PenaltyNorm::None), 9);
  CHECK(error_of([] { combine_advantages({1}, {2}, -1); }).find("lambda") != std::string::npos);
}

TEST_CASE("§9.5 PonderNet halting distribution, losses, prior and KL in both directions") {
  const Vec p = pondernet_halting_distribution({0.2, 0.5, 0.7});  // the last λ is forced to 1
  check_close(p, {0.2, 0.4, 0.4});
  check_close(p[0] + p[1] + p[2], 1.0);
  check_close(reconstruction_loss(p, {2, 1, 0.5}), 1.0);
  check_close(expected_steps(p), 2.2);

  const Vec prior = truncated_geometric_prior(0.5, 3, false), prior_n = truncated_geometric_prior(0.5, 3, true);
  check_close(prior, {0.5, 0.25, 0.125});
  check_close(prior_n, {4.0 / 7, 2.0 / 7, 1.0 / 7});
  // kl_divergence(p, prior) is the paper's KL(p‖p_G); the reverse is what torch's KLDivLoss(p.log(), p_G) computes.
  check_close(kl_divergence(p, prior), 0.4700036292);
  check_close(kl_divergence(p, prior_n), 0.3364722366);
  check_close(kl_divergence(prior, p), 0.1952506074);
  check_close(kl_divergence(prior_n, p), 0.3566749439);

  CHECK(sample_halting_step({0.2, 0.5, 1.0}, {0.3, 0.4}) == 2);
  CHECK(sample_halting_step({0.2, 0.5, 0.3}, {0.9, 0.9}) == 3);  // forced halt at N
  CHECK(prior_max_steps(0.2, 0.05) == 14);
  CHECK(prior_max_steps(0.5, 0.05) == 5);
  CHECK(prior_max_steps(0.1, 0.05) == 29);
}

TEST_CASE("PonderNet edge cases: long horizons do not underflow to NaN, bad inputs are rejected (P14)") {
  const Vec p = pondernet_halting_distribution(Vec(2000, 0.5));
  double total = 0;
  size_t non_finite = 0;
  for (double v : p) non_finite += !std::isfinite(v), total += v;
  CHECK(non_finite == 0);
  check_close(total, 1.0);
  CHECK(std::isinf(kl_divergence({0.5, 0.5}, {1.0, 0.0})));
  check_close(kl_divergence({1.0, 0.0}, {0.5, 0.5}), std::log(2.0));
  CHECK(error_of([] { pondernet_halting_distribution({0.2, 1.5}); }).find("lambdas[1]") != std::string::npos);
  CHECK(error_of([] { sample_halting_step({0.2, 0.5, 1.0}, {0.3}); }).find("uniforms") != std::string::npos);
  CHECK(error_of([] { truncated_geometric_prior(0.0, 3, true); }).find("lambda_p") != std::string::npos);
}

TEST_CASE("§9.6 ACT: the sact unit tests and the extra case") {
  const Vec y = {0, 1, 2, 3, 4};
  double total = 0;  // the halting distribution sums to 1
  for (double p : act_halting({0.01, 0.5, 0.6, 0.7}, 5).p) total += p;
  CHECK(total == doctest::Approx(1.0));
  SUBCASE("early halt at n = 1 costs ρ = 2 (P15)") {
    const ActHalting a = act_halting(Vec(4, 0.999), 5);
    CHECK(a.steps == 1);
    check_close(a.ponder_cost, 2.0);
    check_close(a.p, {1, 0, 0, 0, 0});
    check_close(act_output(a.p, y), 0.0);
    check_close(a.grad_halting, {0, 0, 0, 0});
  }
  SUBCASE("halt at n = 3 with remainder 0.49") {
    const ActHalting a = act_halting({0.01, 0.5, 0.6, 0.7}, 5);
    CHECK(a.steps == 3);
    check_close(a.remainder, 0.49);
    check_close(a.ponder_cost, 3.49);
    check_close(a.p, {0.01, 0.5, 0.49, 0, 0});
    check_close(act_output(a.p, y), 1.48);
    check_close(a.grad_halting, {-1, -1, 0, 0});
  }
  SUBCASE("never reaches 1-ε: capped at M = 5, the last unit unread") {
    const ActHalting a = act_halting(Vec(5, 0.01), 5);
    CHECK(a.steps == 5);
    check_close(a.ponder_cost, 5.96);
    check_close(a.p, {0.01, 0.01, 0.01, 0.01, 0.96});
    check_close(act_output(a.p, y), 3.9);
    check_close(a.grad_halting, {-1, -1, -1, -1, 0});
    CHECK(act_halting({0.01, 0.01, 0.01, 0.01, 0.99}, 5).p == a.p);
  }
  SUBCASE("h = [0.3, 0.5, 0.4]") {
    const ActHalting a = act_halting({0.3, 0.5, 0.4}, 3);
    CHECK(a.steps == 3);
    check_close(a.remainder, 0.2);
    check_close(a.p, {0.3, 0.5, 0.2});
    check_close(a.ponder_cost, 3.2);
    check_close(act_output(a.p, {1, 2, 4}), 2.1);
  }
  CHECK(error_of([] { act_halting({0.1, 0.2}, 5); }).find("max_steps") != std::string::npos);
}

TEST_CASE("standardize reports what it divided by") {
  double d = 0;
  const std::vector<double> z = ponder::rl::standardize({1, 2, 3}, 1, 1e-8, &d);
  CHECK(d == doctest::Approx(1.0 + 1e-8).epsilon(1e-15));
  CHECK(z[2] == doctest::Approx(1.0 / (1.0 + 1e-8)).epsilon(1e-15));
  ponder::rl::standardize({5}, 1, 1e-8, &d);
  CHECK(d == 1.0);  // a single value is returned as is
  ponder::rl::standardize({2, 2, 2}, 1, 0.0, &d);
  CHECK(d == 1.0);  // no spread and no eps: zeros, nothing divided
}
