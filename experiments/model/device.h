// `--device cpu|cuda` for the subcommands that can run on a GPU: the option, a one-line error when CUDA
// is unusable, and the line each of them prints to say where it ran.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "experiments/process/bench_util.h"
#include "experiments/model/config.h"
#include "tensor/dtype.h"

namespace ponder::cli {

// Adds --device (cpu or cuda, default cpu) to `sub`, stored in `name`.
CLI::Option* add_device_option(CLI::App* sub, std::string& name);
// The device called `name`, with CUDA initialised for "cuda"; throws "--device cuda: no CUDA device: <why>".
Device use_device(const std::string& name);

// For commands that read a run config (train, eval, quick, compare): --device cpu|cuda with no default,
// so `name` stays empty unless given and the config's model.device applies.
CLI::Option* add_device_override(CLI::App* sub, std::string& name);
// The device such a command runs on: `cli` (its --device, empty when not given) over the config's model.device,
// initialised by use_device. When cuda comes from the config and cannot be used, the error names the file and
// the key: "<source>: model.device: cuda: no CUDA device: <why>". Also sets the config's model.precision for
// every later float32 product (tensor/precision.h).
Device run_device(const std::string& cli, const RunConfig& cfg);
// "cpu: <model>, N threads" or "cuda: <GPU> (sm_90, 132 SMs, 79.6 GiB; CUDA runtime 13.0, driver 12.8)", then
// "; matmul operands bf16" when float32 products run below float32 (tensor/precision.h), so every log and
// results file that names the device says so too.
std::string describe_device(Device d);
// For `ponder --version`: whether this build has CUDA and whether a GPU is usable here.
std::string cuda_status();

// bench_util's measure() for work on `d`. GPU kernels run asynchronously, so a timed call on CUDA queues
// `fn` kQueuedCalls times and then waits once: the rate is the GPU's, not a launch-and-wait round trip's.
constexpr int kQueuedCalls = 20;
Rate measure_on(Device d, const std::function<void()>& fn, double work, int reps, double min_seconds);

}  // namespace ponder::cli
