#include "experiments/compare_job.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <unistd.h>

#include "experiments/bench_util.h"
#include "experiments/build_info.h"
#include "experiments/device.h"
#include "experiments/report.h"
#include "tensor/cpu/cpu_kernels.h"

namespace ponder::cli {

CompareProgress stderr_progress(const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty = isatty(STDERR_FILENO);
  auto last_print = std::make_shared<double>(-1);
  return [=](const std::string& what, double done, double total) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!tty && t - *last_print < 5) return;  // a line every few seconds in logs
    *last_print = t;
    const double eta = done > 0 ? t / done * (total - done) : 0;
    std::fprintf(stderr, "%s%s: %-34s %3.0f%%  %5.0f s elapsed, ETA %4.0f s%s", tty ? "\r" : "", label.c_str(),
                 what.c_str(), total > 0 ? 100 * done / total : 0.0, t, eta, tty ? "   " : "\n");
  };
}

nlohmann::ordered_json provenance(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint,
                                  const std::string& produced_by) {
  const MachineInfo mi = machine_info();
  return {{"produced_by", produced_by}, {"version", version()}, {"commit", git_commit()},
          {"build_type", build_type()}, {"machine", mi.cpu_model},
          {"threads", cpu::num_threads()}, {"device", describe_device(m.model.device())},
          {"checkpoint", checkpoint},
          {"trained_steps", m.step}, {"config", m.config.text},
          {"data", ds.corpus.name}, {"data_sha256", ds.corpus.sha256}};
}

std::string run_compare_job(const TrainedModel& m, const Dataset& ds, const CompareOptions& opt,
                            const std::string& checkpoint, const std::string& dir) {
  CompareResult r = run_compare(m.model, ds.valid, ds.test, opt, stderr_progress("compare"));
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\n");
  return write_compare_outputs(r, opt, provenance(m, ds, checkpoint, "ponder compare"), dir);
}

}  // namespace ponder::cli
