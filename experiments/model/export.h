// Checkpoints in a format other tools read: safetensors (an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw little-endian row-major bytes). PyTorch, JAX and
// numpy read it (scripts/read_safetensors.py needs numpy only). Only the trained parameters are exported — the
// optimiser moments and sampler positions stay in the checkpoint, which alone can resume training.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "ttt/checkpoint_io.h"

namespace ponder::cli {

// The file's bytes: the checkpoint's parameters in its order under `names` (one per parameter: the model's labels,
// e.g. "block1.ttt.W1", so a reader need not know the storage order); metadata (strings, as the format asks) holds
// the config text, the step and the producer.
std::string safetensors_bytes(const ttt::Checkpoint& ck, const std::vector<std::string>& names);
// Writes them to `path` atomically; an unwritable path is an error naming it.
void export_safetensors(const ttt::Checkpoint& ck, const std::vector<std::string>& names, const std::string& path);
// One object per parameter: name, dtype, shape, and the float64 L2 norm and sum of its values (to check a reader).
nlohmann::ordered_json parameter_summary(const ttt::Checkpoint& ck, const std::vector<std::string>& names);

}  // namespace ponder::cli
