#include "experiments/model/provenance.h"

#include <optional>
#include <stdexcept>

#include "experiments/model/checkpoint_cache.h"
#include "experiments/model/device.h"
#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/process/command_line.h"
#include "tensor/cpu/runtime.h"
#include "util/files.h"
#include "util/sha256.h"

namespace ponder::cli {

nlohmann::ordered_json provenance(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint,
                                  const std::string& produced_by, const std::string& applied_config) {
  const MachineInfo mi = machine_info();
  nlohmann::ordered_json p = {{"produced_by", produced_by}, {"command", command_line()}, {"version", version()}, {"commit", git_commit()},
          {"build_type", build_type()}, {"machine", mi.cpu_model},
          {"threads", cpu::num_threads()}, {"blas", mi.blas}, {"omp_wait", mi.omp_wait}, {"device", describe_device(m.model.device())},
          {"checkpoint", checkpoint},
          {"trained_steps", m.step}, {"config", m.config.text},
          {"data", ds.corpus.name}, {"data_sha256", ds.corpus.sha256}};
  if (!m.data_sha256.empty() && m.data_sha256 != ds.corpus.sha256) p["trained_on_data_sha256"] = m.data_sha256;
  if (!applied_config.empty() && applied_config != m.config.text) {
    p["config_applied"] = applied_config;  // --config and --set: every section but model:, data: and train:
    p["config_sources"] = {{"model, data, train", "config (the checkpoint's, as trained)"},
                           {"every other section", "config_applied"}};
  }
  return p;
}

namespace {

std::string file_sha256(const std::string& path) {
  const std::optional<std::string> bytes = util::read_file(path);
  if (!bytes) throw std::runtime_error("cannot read " + path);
  return util::sha256_hex(*bytes);
}

}  // namespace

std::string binary_sha256() {
  static const std::string sha = file_sha256("/proc/self/exe");
  return sha;
}

nlohmann::json run_fingerprint(const std::string& checkpoint, const std::string& config_text) {
  // The binary's own hash, not the commit: a rebuild with uncommitted changes keeps its "-dirty" commit.
  return {{"command", fingerprint_command_line()}, {"binary_sha256", binary_sha256()},
          {"checkpoint_sha256", checkpoint_sha256(checkpoint)}, {"config", config_text}};
}


}  // namespace ponder::cli
