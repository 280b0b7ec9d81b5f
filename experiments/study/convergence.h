// The math of `ponder convergence` (docs/method.md §5.1), on the host in double: a unit's inner problem for
// TTT-Linear without LayerNorm is weighted least squares,
//   ℓ(W, b) = ½ Σ_j w_j ‖X_j W + b − T_j‖²,  X = XK (rows × f), T = XV − XK,
// so its optimum solves the normal equations [X 1]ᵀD[X 1]·[W; b] = [X 1]ᵀD·T, and gradient descent
// from the carried weights shows how many steps reach it.
#pragma once
#include <cstdint>
#include <vector>

namespace ponder::cli {

struct LstsqProblem {
  int64_t rows = 0, f = 0;
  std::vector<double> X, T;  // rows × f, row-major
  std::vector<double> w;     // rows: per-row weights
};

// θ = [W; b] as (f + 1) × f, row-major: W's f rows, then b.
// A = ZᵀDZ ((f+1) × (f+1)) and C = ZᵀDT ((f+1) × f) with Z = [X 1], D = diag(w).
struct NormalEquations {
  int64_t n = 0, m = 0;
  std::vector<double> A, C;
};
NormalEquations normal_equations(const LstsqProblem& p);

// Solves A·Θ = B (A n × n symmetric, B n × m, both row-major) by Cholesky. When A is not numerically
// positive definite (a pivot below 1e-12 × its largest diagonal, e.g. fewer rows than f + 1), it
// adds the ridge 1e-8 · trace(A) · I and solves again. Returns Θ; `ridged` says whether it did.
std::vector<double> solve_spd(const std::vector<double>& A, int64_t n, const std::vector<double>& B, int64_t m,
                              bool* ridged = nullptr);

// ℓ(θ) evaluated from the residuals.
double lstsq_loss(const LstsqProblem& p, const std::vector<double>& theta);

// Largest eigenvalue of a symmetric positive semidefinite n × n matrix by power iteration.
double lambda_max(const std::vector<double>& A, int64_t n, int iters = 200);

struct Convergence {
  double loss0 = 0, loss_star = 0;
  double step = 0;                  // 1 / λ_max(A): the Hessian of ℓ in θ (shared by the f output columns)
  bool ridged = false;
  std::vector<double> gap;          // at each of `at`: (ℓ(θ_K) − ℓ*) / (ℓ(θ_0) − ℓ*)
  int64_t first_below = -1;         // smallest K ≤ max_k with gap < tol; −1 when none
};
// Gradient descent θ ← θ − step·(Aθ − C) from θ0, recording the gap after K ∈ `at` steps and the first
// K with gap < tol (checked after every step up to max_k). Requires ℓ(θ0) > ℓ*.
Convergence gd_convergence(const LstsqProblem& p, const std::vector<double>& theta0, const std::vector<int>& at,
                           int max_k, double tol);

}  // namespace ponder::cli
