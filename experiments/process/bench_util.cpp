#include "experiments/process/bench_util.h"

#include <cblas.h>

#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ponder::cli {

double max_rel_err(const Tensor& got, const Tensor& want) {
  const std::vector<double> o = got.to_vector(), r = want.to_vector();
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < o.size(); ++i) {
    err = std::max(err, std::abs(o[i] - r[i]));
    scale = std::max(scale, std::abs(r[i]));
  }
  return err / scale;
}

double checked_rel_err(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  const double e = max_rel_err(raw::to_device(got, Device::CPU), want);
  if (!(e <= tol))
    throw std::runtime_error(what + " differs from its CPU reference: max relative error " + std::to_string(e));
  return e;
}
namespace {

double seconds(const std::function<void()>& fn, long calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Busy CPU-seconds of the whole machine since boot (all fields of the "cpu" line but idle and iowait).
double machine_busy() {
  std::ifstream in("/proc/stat");
  std::string label;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  return (user + nice + system + irq + softirq + steal) / double(sysconf(_SC_CLK_TCK));
}

double self_busy() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

}  // namespace

OtherLoad::OtherLoad() : wall0_(wall_now()), busy0_(machine_busy()), self0_(self_busy()) {}

double OtherLoad::cpus() const {
  const double wall = wall_now() - wall0_;
  const double other = (machine_busy() - busy0_) - (self_busy() - self0_);
  return wall > 0 ? std::max(other / wall, 0.0) : 0.0;
}

double available_memory_bytes() {
  double room = 0;
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemAvailable:", 0) == 0) room = std::stod(line.substr(13)) * 1024.0;
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    room = room > 0 ? std::min(room, double(r.rlim_cur)) : double(r.rlim_cur);
  return room;
}

MachineInfo machine_info() {
  MachineInfo info;
  info.cpu_model = "unknown";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) info.cpu_model = line.substr(colon + 2);
    break;
  }
  info.nproc = int(sysconf(_SC_NPROCESSORS_ONLN));
  info.blas = openblas_get_config();
  while (!info.blas.empty() && info.blas.back() == ' ') info.blas.pop_back();
  info.blas_core = openblas_get_corename();
  for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* v = std::getenv(var); v && *v) {
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on `"" + std::string(var)`.
      if (!info.omp_wait.empty()) info.omp_wait += ' ';
      info.omp_wait.append(var).append("=").append(v);
    }
  if (info.omp_wait.empty()) info.omp_wait = "libgomp default";
  return info;
}

Rate measure(const std::function<void()>& fn, double work, int reps, double min_seconds) {
  fn();  // first touch of outputs, BLAS thread start-up
  long calls = 1;
  // Grow the call count until one repetition is long enough that timer noise does not matter.
  for (double t = seconds(fn, calls); t < min_seconds; t = seconds(fn, calls))
    calls = std::max(calls * 2, long(std::ceil(double(calls) * 1.2 * min_seconds / std::max(t, 1e-9))));
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) rates.push_back(work * double(calls) / seconds(fn, calls));
  std::sort(rates.begin(), rates.end());
  const size_t mid = rates.size() / 2;
  const double median = rates.size() % 2 ? rates[mid] : 0.5 * (rates[mid - 1] + rates[mid]);
  return {rates.back(), median, calls};
}

}  // namespace ponder::cli
