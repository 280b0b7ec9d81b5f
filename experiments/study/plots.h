// Figures of a comparison: k_hist and loss by position by gnuplot (pngcairo) from data files written next to them,
// pareto and forest plots by matplotlib from results.json, and a per-token HTML view; a missing tool is a clear error.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "experiments/study/compare.h"

namespace ponder::cli {

// Runs gnuplot on a script; a failure (or no gnuplot) is an error naming the script.
void run_gnuplot(const std::string& script);

// pareto.png (bits/byte against total FLOPs: the uniform curve, each method with its paired CI, the oracle
// frontier) and forest.png (each method's distance to the uniform frontier, over models when there are several)
// from DIR/results.json, by scripts/plot_compare.py (matplotlib). Call it once results.json is complete.
void write_compare_figures(const std::string& dir);
// Training curves (loss, validation bits/byte, carry token factor per layer) of runs given as (label, train.jsonl)
// into `png`, by scripts/plot_training.py (matplotlib).
void write_training_figure(const std::string& png, const std::vector<std::pair<std::string, std::string>>& logs);
// Share of units per step option for every method: DIR/k_hist.{dat,gp,png}.
void write_k_hist(const CompareResult& r, const std::vector<int>& options, const std::string& dir);
// Bytes in a valid UTF-8 character starting at bytes[i] (1–4), or 0 when none starts there.
size_t utf8_char_length(const std::vector<int32_t>& bytes, size_t i);
// A held-out passage side by side under each of `methods` (e.g. the oracle and the best method), each character
// coloured by the steps its unit received, with the bits spent predicting it on hover.
void write_tokens_html(const CompareResult& r, const std::vector<std::string>& methods, const std::string& path);

}  // namespace ponder::cli
