// `ponder bench dual --inner mlp`: TTT-MLP's dual-form kernel on one mini-batch of every head (experiments/
// bench_mlp_dual.cpp), beside the TTT-Linear rows of experiments/cli/bench_dual.cpp.
#pragma once
#include "experiments/bench/dual_options.h"

namespace ponder::cli {

// On the CPU: the kernel's forward and backward rows (µs per call, GFLOP/s from the engine's counts). On a GPU:
// every result checked against the CPU kernel first (throws past 1e-3 relative), then the same rows.
void run_bench_mlp_dual(const DualBenchOptions& o);

}  // namespace ponder::cli
