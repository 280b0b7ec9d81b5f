// `ponder bench dual --inner mlp`: TTT-MLP's dual-form kernel on one mini-batch of every head (experiments/
// bench_mlp_dual.cpp), beside the TTT-Linear rows of experiments/cmd_bench_dual.cpp.
#pragma once
#include <cstdint>
#include <string>

namespace ponder::cli {

struct MlpDualBench {
  std::string device = "cuda";
  int64_t batch = 16, heads = 12, mini_batch = 16, head_dim = 64, hidden = 256;
  int reps = 5;
  bool check_only = false, json = false;
};
// On the CPU: the kernel's forward and backward rows (µs per call, GFLOP/s from the engine's counts). On a GPU:
// every result checked against the CPU kernel first (throws past 1e-3 relative), then the same rows.
void run_bench_mlp_dual(const MlpDualBench& o);

}  // namespace ponder::cli
