// A comparison run from a trained model, shared by `ponder compare` and `ponder quick`: progress on
// stderr with ETA, provenance, and the outputs of experiments/report.h.
#pragma once
#include <string>

#include "experiments/training.h"

namespace ponder::cli {

// Runs the comparison on the model's held-out splits (calibration on valid, evaluation on test)
// and writes everything into `dir`. Returns the headline table.
std::string run_compare_job(const TrainedModel& m, const Dataset& ds, const CompareOptions& opt,
                            const std::string& checkpoint, const std::string& dir);

}  // namespace ponder::cli
