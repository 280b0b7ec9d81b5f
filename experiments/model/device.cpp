#include "experiments/model/device.h"

#include <cstdio>
#include <stdexcept>

#include "tensor/cpu/runtime.h"
#include "tensor/cuda/cuda.h"

namespace ponder::cli {
namespace {

std::string version_str(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace

CLI::Option* add_device_option(CLI::App* sub, std::string& name) {
  return sub->add_option("--device", name, "Device to run on: cpu, or cuda (the first GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

Device use_device(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name != "cuda") throw std::invalid_argument("--device: expected cpu or cuda, got '" + name + "'");
  std::string why;
  if (!cuda_init(&why)) throw std::runtime_error("--device cuda: no CUDA device: " + why);
  return Device::CUDA;
}

CLI::Option* add_device_override(CLI::App* sub, std::string& name) {
  return sub->add_option("--device", name,
                         "Device to run on: cpu, or cuda (the first GPU); overrides the config's model.device")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

Device run_device(const std::string& cli, const RunConfig& cfg) {
  set_matmul_precision(cfg.precision);
  if (!cli.empty()) return use_device(cli);
  const std::string name = cfg.device.empty() ? "cpu" : cfg.device;
  try {
    return use_device(name);
  } catch (const std::exception& e) {
    // use_device's message speaks of --device; this choice came from the config.
    std::string why = e.what();
    const std::string flag = "--device ";
    if (why.rfind(flag, 0) == 0) why = why.substr(flag.size());
    throw std::runtime_error(cfg.source + ": model.device: " + why);
  }
}

std::string describe_device(Device d) {
  const MatmulPrecision prec = matmul_precision();
  const std::string precision = prec == MatmulPrecision::F32 ? "" : std::string("; matmul operands ") + precision_name(prec);
  if (d == Device::CPU) {
    const MachineInfo mi = machine_info();
    // at bf16 the CPU's path (its bf16 instruction, or rounded copies) sets the order of the float32 sums
    const std::string path = prec == MatmulPrecision::F32 ? "" : std::string(": ") + cpu::matmul_path(prec);
    return "cpu: " + mi.cpu_model + ", " + std::to_string(cpu::num_threads()) + " threads" + precision + path;
  }
  const CudaDeviceInfo i = cuda_device_info();
  char buf[256];
  std::snprintf(buf, sizeof buf, "cuda: %s (sm_%d%d, %d SMs, %.1f GiB; CUDA runtime %s, driver %s)", i.name.c_str(),
                i.cc_major, i.cc_minor, i.sm_count, double(i.total_bytes) / double(1 << 30),
                version_str(i.runtime_version).c_str(), version_str(i.driver_version).c_str());
  return buf + precision;
}

Rate measure_on(Device d, const std::function<void()>& fn, double work, int reps, double min_seconds) {
  if (d == Device::CPU) return measure(fn, work, reps, min_seconds);
  auto queued = [&] {
    for (int i = 0; i < kQueuedCalls; ++i) fn();
    cuda_synchronize();
  };
  Rate r = measure(queued, work * kQueuedCalls, reps, min_seconds);
  r.calls *= kQueuedCalls;
  return r;
}

std::string cuda_status() {
  if (!cuda_built()) return "CUDA: not built into this binary";
  std::string why;
  if (!cuda_init(&why)) return "CUDA: built; no usable device (" + why + ")";
  return "CUDA: built; device " + describe_device(Device::CUDA);
}

}  // namespace ponder::cli
