// Finite-difference checks (float64, first and second order) of one piece of the model a config builds:
// `ponder gradcheck --model CONFIG --piece P` (experiments/model/gradcheck_pieces.cpp says how).
#pragma once
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "experiments/model/config.h"

namespace ponder::cli {

struct PieceCheck {
  std::string piece;
  size_t tensors = 0;   // parameter tensors (and inputs) differentiated
  int64_t numbers = 0;  // their elements
  CheckResult grad, gradgrad;
};

// ttt, attention, block (the first block holding one, or block 0), model (every parameter), policy (the MLP
// policy network), lstm (the LSTM policy network).
const std::vector<std::string>& piece_names();
PieceCheck check_piece(const RunConfig& cfg, const std::string& piece, int directions);

}  // namespace ponder::cli
