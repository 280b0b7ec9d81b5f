// Ranks that must run the same job: under mpirun a rank with another config, checkpoint or binary either corrupts the
// collectives' buffers, leaves the others waiting forever, or computes a silently different share of the work.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ponder::cli {

// (what it is, its value on this rank): "config (its text after --set and --seed)", the text.
using RankFields = std::vector<std::pair<std::string, std::string>>;

// Gathers a digest of each field from every rank and compares it with rank 0's; on a mismatch every rank throws the
// same dist::SharedError, naming `label`, the first rank and the field that differ, and this rank's value. A
// collective: every rank must call it at the same point. Nothing to do on one rank.
void check_ranks_agree(const std::string& label, const RankFields& fields);

}  // namespace ponder::cli
