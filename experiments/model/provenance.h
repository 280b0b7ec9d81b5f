// What produced a results file and what a finished one depends on: provenance fields, the run's fingerprint
// (command line, binary, checkpoint, config) and the running binary's sha256.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "experiments/model/training.h"

namespace ponder::cli {

// What produced a result file: command, version, commit, machine, checkpoint, config (the checkpoint's, as trained)
// and data hash; `applied_config`, when it differs from the checkpoint's (--config, --set), as config_applied.
nlohmann::ordered_json provenance(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint,
                                  const std::string& produced_by, const std::string& applied_config = "");

// What a finished comparison of `checkpoint` depends on: the command line, this binary, the checkpoint's bytes and
// the config text. A journal or a finished model's outputs are reused only under the same fingerprint.
nlohmann::json run_fingerprint(const std::string& checkpoint, const std::string& config_text);
// The sha256 of the running `ponder` binary: what made a result, also for a build with uncommitted changes.
std::string binary_sha256();
}  // namespace ponder::cli
