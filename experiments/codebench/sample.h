// Completions of benchmark prompts from a trained byte-level `ponder` checkpoint, for pass@k.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "experiments/codebench/tasks.h"
#include "experiments/model/training.h"

namespace ponder::codebench {

struct SampleOptions {
  int samples = 1;            // completions per problem
  double temperature = 0.8;   // 0: greedy (the most likely byte each time)
  double top_p = 0.95;        // nucleus: sample from the most likely bytes that hold this much probability
  int max_new_bytes = 256;
  uint64_t seed = 0;
};

// `samples` completions of each task's prompt, each cut before the first of the task's stop strings. Deterministic:
// sample s of problem p draws from its own generator seeded by (seed, p, s). Progress goes to stderr.
std::vector<std::vector<std::string>> sample_completions(const cli::TrainedModel& model, const std::vector<Task>& tasks,
                                                         const SampleOptions& options);

// The next byte from logits over the 256 byte values: argmax when temperature is 0, else a top-p draw using
// `uniform` (in [0, 1)).
int pick_byte(const std::vector<double>& logits, double temperature, double top_p, double uniform);

}  // namespace ponder::codebench
