// Figures of a comparison: rendered by gnuplot (pngcairo) from data files written next to them,
// and a per-token HTML view. Writing a figure needs gnuplot; a missing gnuplot is a clear error.
#pragma once
#include <string>

#include "experiments/compare.h"

namespace ponder::cli {

// Runs gnuplot on a script; a failure (or no gnuplot) is an error naming the script.
void run_gnuplot(const std::string& script);

// Bits per byte vs FLOPs per token: every method (mean over seeds with the seed range as error bars)
// and the oracle frontier. Writes DIR/pareto.dat, DIR/pareto.gp and DIR/pareto.png.
void write_pareto(const CompareResult& r, const std::string& dir);
// Share of units per step option for every method: DIR/k_hist.{dat,gp,png}.
void write_k_hist(const CompareResult& r, const std::vector<int>& options, const std::string& dir);
// A held-out passage, each byte coloured by the steps its unit received under `method`.
void write_tokens_html(const CompareResult& r, const std::string& method, const std::string& path);

}  // namespace ponder::cli
