// One training step's work, node by node and section by section: the forward pass cut at the points the model shows
// to TTTRun::watch (the sections of ttt/flop_profile.h), the backward pass traced by the engine (autograd/engine.h),
// each backward node booked to the section whose forward made it. What `ponder flops` tabulates and `ponder graph`
// lists.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "ttt/model.h"

namespace ponder::ttt {

struct SectionFlops {
  std::string name;
  uint64_t forward = 0, backward = 0;
};

struct StepTrace {
  std::vector<SectionFlops> sections;       // forward order; "logits+loss": the logits, cross-entropy and mean
  std::vector<TraceEntry> nodes;            // in the order the backward ran them
  std::vector<std::string> node_sections;   // nodes[i]'s section
  uint64_t forward_total = 0, backward_total = 0;  // the engine's own counts for the step
};

// The mean token loss of `ids` → `targets` (B, N), its backward into every parameter (gradients accumulate into
// the model's .grad as in training), and where each FLOP went. Parameters are named by parameter_labels() for the
// trace, so each accumulator shows what it feeds. `grad_norms` fills TraceEntry::grad_norm (host reads, no FLOPs:
// the sections sum exactly to the engine's totals either way).
StepTrace trace_step(const Model& model, const Tensor& ids, const Tensor& targets, TTTRun run = {},
                     bool grad_norms = true);

}  // namespace ponder::ttt
