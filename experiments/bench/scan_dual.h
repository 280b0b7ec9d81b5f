// `ponder bench dual --units N`: the dual form (TTT-Linear, or TTT-MLP with --inner mlp) over N units (mini-batches)
// of every head, as a layer's scan node runs it: through the backend's scan kernel (one call each way) and through the one-unit kernel called unit by
// unit (experiments/bench/scan_dual.cpp), beside the one-unit rows of experiments/cli/bench_dual.cpp.
#pragma once
#include "experiments/bench/dual_options.h"

namespace ponder::cli {

// For the scan kernel and then unit by unit: on a GPU every result checked against the CPU's scan first (throws past
// 1e-3 relative), then forward and backward timed (µs per call of the whole sequence and per unit, GFLOP/s from the
// engine's counts). The two ways give the same bits; the rows say what the per-unit calls cost.
void run_bench_scan_dual(const DualBenchOptions& o);

}  // namespace ponder::cli
