#include "experiments/study/convergence.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ponder::cli {

NormalEquations normal_equations(const LstsqProblem& p) {
  const int64_t n = p.f + 1, m = p.f;
  NormalEquations e{n, m, std::vector<double>(size_t(n * n)), std::vector<double>(size_t(n * m))};
  std::vector<double> z(static_cast<size_t>(n));
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t i = 0; i < p.f; ++i) z[size_t(i)] = p.X[size_t(r * p.f + i)];
    z[size_t(p.f)] = 1;
    const double w = p.w[size_t(r)];
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < n; ++k) e.A[size_t(i * n + k)] += w * z[size_t(i)] * z[size_t(k)];
      for (int64_t k = 0; k < m; ++k) e.C[size_t(i * m + k)] += w * z[size_t(i)] * p.T[size_t(r * m + k)];
    }
  }
  return e;
}

namespace {

// In-place Cholesky A = LLᵀ (lower triangle); false when a pivot is not clearly positive.
bool cholesky(std::vector<double>& A, int64_t n) {
  double max_diag = 0;
  for (int64_t i = 0; i < n; ++i) max_diag = std::max(max_diag, A[size_t(i * n + i)]);
  for (int64_t j = 0; j < n; ++j) {
    double d = A[size_t(j * n + j)];
    for (int64_t k = 0; k < j; ++k) d -= A[size_t(j * n + k)] * A[size_t(j * n + k)];
    if (!(d > 1e-12 * max_diag)) return false;
    const double l = std::sqrt(d);
    A[size_t(j * n + j)] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = A[size_t(i * n + j)];
      for (int64_t k = 0; k < j; ++k) s -= A[size_t(i * n + k)] * A[size_t(j * n + k)];
      A[size_t(i * n + j)] = s / l;
    }
  }
  return true;
}

}  // namespace

std::vector<double> solve_spd(const std::vector<double>& A, int64_t n, const std::vector<double>& B, int64_t m,
                              bool* ridged) {
  std::vector<double> L = A;
  bool ridge = !cholesky(L, n);
  if (ridge) {
    double trace = 0;
    for (int64_t i = 0; i < n; ++i) trace += A[size_t(i * n + i)];
    L = A;
    for (int64_t i = 0; i < n; ++i) L[size_t(i * n + i)] += 1e-8 * trace;
    if (!cholesky(L, n)) throw std::runtime_error("convergence: normal equations singular even with a 1e-8 ridge");
  }
  if (ridged) *ridged = ridge;
  std::vector<double> X = B;
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t i = 0; i < n; ++i) {  // L y = b
      double s = X[size_t(i * m + c)];
      for (int64_t k = 0; k < i; ++k) s -= L[size_t(i * n + k)] * X[size_t(k * m + c)];
      X[size_t(i * m + c)] = s / L[size_t(i * n + i)];
    }
    for (int64_t i = n - 1; i >= 0; --i) {  // Lᵀ x = y
      double s = X[size_t(i * m + c)];
      for (int64_t k = i + 1; k < n; ++k) s -= L[size_t(k * n + i)] * X[size_t(k * m + c)];
      X[size_t(i * m + c)] = s / L[size_t(i * n + i)];
    }
  }
  return X;
}

double lstsq_loss(const LstsqProblem& p, const std::vector<double>& theta) {
  double loss = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    double row = 0;
    for (int64_t c = 0; c < p.f; ++c) {
      double y = theta[size_t(p.f * p.f + c)] - p.T[size_t(r * p.f + c)];
      for (int64_t i = 0; i < p.f; ++i) y += p.X[size_t(r * p.f + i)] * theta[size_t(i * p.f + c)];
      row += y * y;
    }
    loss += 0.5 * p.w[size_t(r)] * row;
  }
  return loss;
}

double lambda_max(const std::vector<double>& A, int64_t n, int iters) {
  std::vector<double> v(size_t(n), 1.0 / std::sqrt(double(n))), u(static_cast<size_t>(n));
  double lambda = 0;
  for (int it = 0; it < iters; ++it) {
    double norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += A[size_t(i * n + k)] * v[size_t(k)];
      u[size_t(i)] = s;
      norm += s * s;
    }
    norm = std::sqrt(norm);
    if (norm == 0) return 0;
    lambda = norm;  // ‖Av‖ with ‖v‖ = 1 converges to λ_max for a PSD matrix
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = u[size_t(i)] / norm;
  }
  return lambda;
}

Convergence gd_convergence(const LstsqProblem& p, const std::vector<double>& theta0, const std::vector<int>& at,
                           int max_k, double tol) {
  const NormalEquations e = normal_equations(p);
  const int64_t n = e.n, m = e.m;
  Convergence c;
  const std::vector<double> star = solve_spd(e.A, n, e.C, m, &c.ridged);
  c.loss_star = lstsq_loss(p, star);
  c.loss0 = lstsq_loss(p, theta0);
  const double lmax = lambda_max(e.A, n);
  c.step = lmax > 0 ? 1.0 / lmax : 0;
  const double denom = c.loss0 - c.loss_star;
  std::vector<double> th = theta0, g(size_t(n * m));
  auto gap = [&] { return (lstsq_loss(p, th) - c.loss_star) / denom; };
  size_t next = 0;
  for (int k = 0;; ++k) {
    const double gk = gap();
    if (c.first_below < 0 && gk < tol) c.first_below = k;
    while (next < at.size() && at[next] == k) {
      c.gap.push_back(gk);
      ++next;
    }
    if (k == max_k) break;
    for (int64_t i = 0; i < n; ++i)  // ∇ = Aθ − C
      for (int64_t j = 0; j < m; ++j) {
        double s = -e.C[size_t(i * m + j)];
        for (int64_t q = 0; q < n; ++q) s += e.A[size_t(i * n + q)] * th[size_t(q * m + j)];
        g[size_t(i * m + j)] = s;
      }
    for (size_t i = 0; i < th.size(); ++i) th[i] -= c.step * g[i];
  }
  return c;
}

}  // namespace ponder::cli
