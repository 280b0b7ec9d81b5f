// The least-squares solver and gradient descent behind `ponder convergence`.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "experiments/study/convergence.h"

using namespace ponder::cli;

namespace {
LstsqProblem random_problem(int64_t rows, int64_t f, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.2, 1.0);
  LstsqProblem p{rows, f, std::vector<double>(size_t(rows * f)), std::vector<double>(size_t(rows * f)),
                 std::vector<double>(size_t(rows))};
  for (double& x : p.X) x = nd(gen);
  for (double& t : p.T) t = nd(gen);
  for (double& w : p.w) w = ud(gen);
  return p;
}
}  // namespace

TEST_CASE("solve_spd solves a well-conditioned system: normal-equation residual ~ 0") {
  const LstsqProblem p = random_problem(60, 6, 7);
  const NormalEquations e = normal_equations(p);
  bool ridged = true;
  const std::vector<double> th = solve_spd(e.A, e.n, e.C, e.m, &ridged);
  CHECK_FALSE(ridged);
  double worst = 0;
  for (int64_t i = 0; i < e.n; ++i)
    for (int64_t j = 0; j < e.m; ++j) {
      double s = -e.C[size_t(i * e.m + j)];
      for (int64_t k = 0; k < e.n; ++k) s += e.A[size_t(i * e.n + k)] * th[size_t(k * e.m + j)];
      worst = std::max(worst, std::abs(s));
    }
  CHECK(worst < 1e-10);
  // The optimum: any perturbation raises the loss.
  const double best = lstsq_loss(p, th);
  for (size_t i = 0; i < th.size(); i += 5) {
    std::vector<double> t2 = th;
    t2[i] += 1e-3;
    CHECK(lstsq_loss(p, t2) > best);
  }
}

TEST_CASE("lambda_max matches a diagonal matrix's largest entry") {
  CHECK(lambda_max({2, 0, 0, 0, 5, 0, 0, 0, 1}, 3) == doctest::Approx(5).epsilon(1e-9));
}

TEST_CASE("underdetermined systems take the ridge; gradient descent approaches the optimum") {
  const LstsqProblem few = random_problem(3, 5, 3);
  const NormalEquations e = normal_equations(few);
  bool ridged = false;
  solve_spd(e.A, e.n, e.C, e.m, &ridged);
  CHECK(ridged);

  const LstsqProblem p = random_problem(40, 4, 11);
  const Convergence c = gd_convergence(p, std::vector<double>(20, 0.0), {0, 1, 2, 4, 8, 1000}, 1000, 0.01);
  REQUIRE(c.gap.size() == 6);
  CHECK(c.gap[0] == doctest::Approx(1.0));
  for (size_t i = 1; i < c.gap.size(); ++i) CHECK(c.gap[i] <= c.gap[i - 1] + 1e-12);  // step 1/λ_max never overshoots
  CHECK(c.gap.back() < 1e-6);
  CHECK(c.first_below > 0);
}
