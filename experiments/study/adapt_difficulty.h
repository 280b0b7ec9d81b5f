// Where the fast-weight methods spend their updates, by how hard each chunk is for the frozen base: the failure-mode
// view of `ponder adapt` below the per-stream one. Every chunk read (adaptation parts included, every seed) is put in
// one of `bands` equal-count bands by SKIP's (uniform-0's) loss on it, the share of tokens the base already predicts
// well; per band and method: the mean K it took there (against the oracle's, so over- and under-spending show), its
// mean chunk loss minus SKIP's on the same chunks (what the updates made so far bought there), and the share of chunks
// it read worse than SKIP (where earlier updates hurt later chunks).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/study/compare.h"

namespace ponder::cli {

struct DifficultyBand {
  double lo = 0, hi = 0;  // SKIP's chunk loss (nats) of the band's easiest and hardest chunk
  int64_t chunks = 0;
};

struct DifficultyRow {
  std::string name;
  std::vector<double> mean_k;      // per band
  std::vector<double> delta_nats;  // per band: mean (chunk loss − SKIP's chunk loss), nats per token
  std::vector<double> worse;       // per band: share of chunks whose loss is above SKIP's
};

struct DifficultySummary {
  std::vector<DifficultyBand> bands;
  std::vector<DifficultyRow> rows;  // methods whose chunks align with SKIP's, in the comparison's order
  std::string note;                 // why there are no bands, or which methods are left out
};

// Needs uniform-0 with its per-chunk losses (MethodResult::unit_loss); methods with another number of chunks (another
// unit size, or restored from a journal written before losses were kept) are left out and named in `note`.
DifficultySummary spend_by_difficulty(const CompareResult& r, int bands = 3);

nlohmann::ordered_json difficulty_json(const DifficultySummary& d);
// The table, with the oracle's mean K per band in the header; "" when there are no bands.
std::string difficulty_markdown(const DifficultySummary& d);

}  // namespace ponder::cli
