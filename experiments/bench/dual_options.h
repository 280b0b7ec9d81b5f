// The options of `ponder bench dual` (experiments/cli/bench_dual.cpp), which also run its TTT-MLP rows
// (experiments/bench/mlp_dual.cpp) and its scan rows (experiments/bench/scan_dual.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace ponder::cli {

struct DualBenchOptions {
  std::string device = "cuda";
  std::string inner = "linear";  // linear (TTT-Linear) or mlp (TTT-MLP)
  int64_t batch = 16, heads = 12, mini_batch = 16, head_dim = 64;
  int64_t hidden = 0;  // TTT-MLP's hidden width; 0: 4 × head_dim
  int64_t units = 0;   // > 0: the dual form over that many units per call, scan kernel against unit by unit
  int reps = 5;
  bool phases = true;  // TTT-Linear's one-unit rows: the backward phase by phase too (GPU)
  bool check_only = false, json = false;

  // TTT-MLP's hidden width, or 0 for TTT-Linear.
  int64_t mlp_hidden() const { return inner == "mlp" ? (hidden > 0 ? hidden : 4 * head_dim) : 0; }
};

}  // namespace ponder::cli
