// Training checkpoints on disk. Layout (little-endian):
//   "PONDERCK" | u32 version | u64 payload bytes | payload | sha256 of the payload (64 hex characters)
// The payload holds the config text, key/value metadata, the step, the data sampler and schedule
// generator positions, the AdamW step count, and three tensor lists (parameters, first and second
// moments), each tensor with its name, dtype and shape. Files are replaced atomically (temporary file in
// the same folder, fsync, rename, fsync of the folder), so a crash leaves either the old or the new one.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ponder::ttt {

struct NamedTensor {
  std::string name;
  Tensor value;
};

struct Checkpoint {
  std::string config_text;
  std::vector<std::pair<std::string, std::string>> meta;
  int64_t step = 0;
  uint64_t sampler_state = 0;   // data::WindowSampler::state()
  uint64_t schedule_state = 0;  // counter of the randomised-schedule Generator
  int64_t optimizer_steps = 0;
  std::vector<NamedTensor> params, exp_avg, exp_avg_sq;
  // The value stored under `key`, or "" when absent.
  std::string meta_value(const std::string& key) const;
};

void save_checkpoint(const std::string& path, const Checkpoint& ck);
// Throws std::runtime_error naming `path` when the file is missing, truncated, corrupt or of another format.
Checkpoint load_checkpoint(const std::string& path);

// Test hook: called with the bytes written so far as the temporary file fills; throwing from it
// simulates a failure in the middle of a write.
inline std::function<void(size_t)> checkpoint_write_hook;

}  // namespace ponder::ttt
