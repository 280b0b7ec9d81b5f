// Measurement helpers shared by the `ponder bench` runners: where the numbers came from, and a timer
// that follows llm.c's habit of repeating a call until a repetition is long enough to trust.
#pragma once
#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/tensor.h"

namespace ponder::cli {

struct MachineInfo {
  std::string cpu_model;  // first "model name" in /proc/cpuinfo, "unknown" where absent
  int nproc = 0;          // logical CPUs online
  std::string blas;       // OpenBLAS build configuration
  std::string blas_core;  // the kernels OpenBLAS runs (SkylakeX, Haswell, Prescott, …)
  std::string omp_wait;   // how idle OpenMP threads wait: OMP_WAIT_POLICY / GOMP_SPINCOUNT as set, else libgomp's default
};
MachineInfo machine_info();
// max |got − want| / max |want|: how far a kernel under test is from its reference, checked before it is timed.
double max_rel_err(const Tensor& got, const Tensor& want);
// max_rel_err of got (on any device) against its CPU reference want; past tol a std::runtime_error that starts with
// `what` (the bench, the result and the variant) and gives the error.
double checked_rel_err(const Tensor& got, const Tensor& want, double tol, const std::string& what);
// Each tensor of x on device d, views kept as views (raw::to_device_keep_layout): a bench's operands as a layer
// passes them.
template <size_t N>
std::array<Tensor, N> on_device(const std::array<Tensor, N>& x, Device d) {
  std::array<Tensor, N> r;
  for (size_t i = 0; i < N; ++i) r[i] = raw::to_device_keep_layout(x[i], d);
  return r;
}
inline std::vector<Tensor> on_device(const std::vector<Tensor>& x, Device d) {
  std::vector<Tensor> r;
  for (const Tensor& t : x) r.push_back(raw::to_device_keep_layout(t, d));
  return r;
}
// Bytes this process may still allocate: MemAvailable of /proc/meminfo, or the address-space limit (ulimit -v)
// where that is smaller; 0 where neither is known.
double available_memory_bytes();

// CPU time other processes used since construction, in CPUs (1 = one CPU busy the whole time): on a
// small machine a compile job next door ruins multi-thread timings, so each result says how quiet it was.
class OtherLoad {
 public:
  OtherLoad();
  double cpus() const;
 private:
  double wall0_, busy0_, self0_;
};

struct Rate {
  double best = 0;    // work per second of the fastest repetition
  double median = 0;  // work per second of the median repetition
  long calls = 0;     // calls per repetition
};

// Warms `fn` up, picks a call count so one repetition lasts at least `min_seconds`, then times `reps`
// repetitions. `work` is the amount done by one call (e.g. FLOPs).
Rate measure(const std::function<void()>& fn, double work, int reps, double min_seconds);

}  // namespace ponder::cli
