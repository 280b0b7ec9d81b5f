#include "stats/special.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ponder::stats {
namespace {

// The continued fraction of I_x(a, b) (Numerical Recipes 6.4, betacf) by the modified Lentz method: each convergent
// is updated through the ratios C = A_m/A_{m-1} and D = B_{m-1}/B_m, with tiny values replaced by kTiny so no
// division by zero occurs.
double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIterations = 10000;
  constexpr double kEps = 1e-16, kTiny = 1e-300;
  auto guard = [](double v) { return std::abs(v) < kTiny ? kTiny : v; };
  const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
  double c = 1.0, d = 1.0 / guard(1.0 - qab * x / qap), h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));  // even step
    d = 1.0 / guard(1.0 + aa * d);
    c = guard(1.0 + aa / c);
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));  // odd step
    d = 1.0 / guard(1.0 + aa * d);
    c = guard(1.0 + aa / c);
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < kEps) return h;
  }
  throw std::runtime_error("regularized_incomplete_beta: continued fraction did not converge for a = " +
                           std::to_string(a) + ", b = " + std::to_string(b) + ", x = " + std::to_string(x));
}

}  // namespace

double regularized_incomplete_beta(double a, double b, double x) {
  if (!(a > 0.0) || !(b > 0.0) || !std::isfinite(a) || !std::isfinite(b))
    throw std::invalid_argument("regularized_incomplete_beta: a and b must be finite and > 0, got a = " +
                                std::to_string(a) + ", b = " + std::to_string(b));
  if (!(x >= 0.0 && x <= 1.0))
    throw std::invalid_argument("regularized_incomplete_beta: x must be in [0, 1], got " + std::to_string(x));
  if (x == 0.0 || x == 1.0) return x;
  // x^a (1-x)^b / (a B(a, b)) is the prefactor of both continued-fraction forms; lgamma keeps it finite.
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  const double front = std::exp(log_front);
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_continued_fraction(a, b, x) / a;
  return 1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b;
}

double student_t_two_sided_p(double t, double df) {
  if (!(df > 0.0) || !std::isfinite(df))
    throw std::invalid_argument("student_t_two_sided_p: df must be finite and > 0, got " + std::to_string(df));
  if (std::isnan(t)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(t)) return 0.0;
  return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
}

double normal_two_sided_p(double z) {
  if (std::isnan(z)) return std::numeric_limits<double>::quiet_NaN();
  return std::erfc(std::abs(z) / std::sqrt(2.0));
}

}  // namespace ponder::stats
