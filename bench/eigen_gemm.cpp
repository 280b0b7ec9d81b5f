// Does Eigen's matrix product beat OpenBLAS's sgemm, which tensor/cpu/ calls, at the shapes this project runs? One
// thread each, row-major float32, C = A·B with A [m, k] and B [k, n]; the best of several repetitions. Prints one
// JSON object per shape. Built and run by bench/eigen_gemm.sh (not part of the build: Eigen is not a dependency).
#include <cblas.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <class F>
double best_seconds(F f, int calls) {
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  return best;
}

int main() {
  // (m, k, n): a 16-token unit through a d = 64 and a d = 256 projection (comparisons at batch 1), a TTT inner
  // product at d = 64 / 4 heads, and the `small` config's MLP in training.
  const int shapes[][3] = {{16, 64, 64}, {16, 16, 16}, {16, 256, 256}, {16, 256, 1024}, {2048, 256, 704}};
  for (const auto& s : shapes) {
    const int m = s[0], k = s[1], n = s[2];
    RowMajor a = RowMajor::Random(m, k), b = RowMajor::Random(k, n), c(m, n), d(m, n);
    const double flops = 2.0 * m * k * n;
    const int calls = std::max(1, int(2e8 / flops));
    const double eigen = best_seconds([&] { c.noalias() = a * b; }, calls);
    const double blas = best_seconds([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, d.data(), n);
    }, calls);
    const double diff = (c - d).cwiseAbs().maxCoeff();
    std::printf("{\"m\": %d, \"k\": %d, \"n\": %d, \"eigen_gflops\": %.2f, \"openblas_gflops\": %.2f, "
                "\"eigen_over_openblas\": %.3f, \"max_abs_diff\": %.2e}\n",
                m, k, n, flops / eigen / 1e9, flops / blas / 1e9, blas / eigen, diff);
  }
  return 0;
}
