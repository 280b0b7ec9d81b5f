// FLOPs of one forward pass of a model, section by section, read from the engine's counters between the points the
// model shows to TTTRun::watch — so anyone can see where a model's compute goes without writing C++
// (`ponder eval --flops-by-layer`).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ttt/model.h"

namespace ponder::ttt {

// In forward order: "embedding", then per block L "blockL.seq_norm" (pre-conv and norm), "blockL.ttt" (the mixer's
// projections, every inner step and its output; or "blockL.attention"), "blockL.ffn" (the residual add, norm and
// SwiGLU), then "final_norm" (the last residual add and norm) and "logits". Their sum is the pass's total. `run`'s
// own watch, if any, is replaced for the pass.
// The section a watch point belongs to: "block3.ttt.unit2.out" → "block3.ttt" (a layer's own points are its section's).
std::string section_of(const std::string& point);

std::vector<std::pair<std::string, uint64_t>> forward_flops_by_section(const Model& model, const Tensor& ids,
                                                                       TTTRun run = {});

}  // namespace ponder::ttt
