// A comparison run from a trained model, shared by `ponder compare` and `ponder quick`: progress on
// stderr with ETA, provenance, and the outputs of experiments/report.h.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "experiments/training.h"

namespace ponder::cli {

// A progress callback for run_compare that prints "<label>: what  NN%  elapsed, ETA" on stderr
// (overwriting one line on a terminal, a line every few seconds in logs).
CompareProgress stderr_progress(const std::string& label);
// What produced a result file: command, version, commit, machine, checkpoint, config and data hash.
nlohmann::ordered_json provenance(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint,
                                  const std::string& produced_by);

// Runs the comparison on the model's held-out splits (calibration on valid, evaluation on test)
// and writes everything into `dir`. Returns the headline table.
std::string run_compare_job(const TrainedModel& m, const Dataset& ds, const CompareOptions& opt,
                            const std::string& checkpoint, const std::string& dir);

}  // namespace ponder::cli
