// Evaluation of a language model on fixed windows: mean loss, bits per byte, the loss at each position
// of the window (the TTT paper's loss-vs-position curve) and the FLOPs the forward pass spent per token,
// in total and in the TTT inner loop, under a given step schedule.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "data/windows.h"
#include "ttt/model.h"

namespace ponder::ttt {

// A step schedule as configs and the CLI spell it, parsed once (parse_schedule): "uniform-K", K on every unit, or
// "fixed:K1,K2,…", one K per unit, the last repeating.
struct ScheduleSpec {
  std::vector<int> ks = {1};  // uniform: its one K; fixed: the list
  bool fixed = false;
  std::string text = "uniform-1";  // as written: what results and messages print
};

// How a forward pass runs its TTT layers, as configs and the CLI spell it.
struct InnerRun {
  ScheduleSpec schedule;
  StepMode mode = StepMode::Carry;
  InnerPath path = InnerPath::Dual;
};

// The most inner steps a unit may be given: a larger count is a typo or an overflow, not a schedule (a graph of
// 100,000 steps a unit exhausts memory before its first unit ends).
inline constexpr int kMaxInnerSteps = 64;

// Parses a schedule as written; throws std::invalid_argument naming the text and the accepted forms.
ScheduleSpec parse_schedule(const std::string& text);
std::unique_ptr<StepSchedule> make_schedule(const ScheduleSpec& spec);
StepMode parse_mode(const std::string& s);    // "carry" | "prefix"
InnerPath parse_path(const std::string& s);   // "dual" | "iterative"
const char* mode_name(StepMode m);
const char* path_name(InnerPath p);

// The TTTRun of a forward pass under `inner`, with `schedule` (made from inner.schedule) and a cost log.
TTTRun make_run(const InnerRun& inner, StepSchedule* schedule, double lr_mult, std::vector<UnitCost>* costs);
// Adds the inner-loop FLOPs of `costs` into `total`.
void add_costs(const std::vector<UnitCost>& costs, UnitCost& total);

struct EvalOptions {
  InnerRun inner;
  int64_t batch_size = 8;  // windows per forward pass
  double lr_mult = 1.0;    // ttt_lr_mult (TTT-MLP ends its warm-up at 1)
};

struct EvalResult {
  int64_t windows = 0;
  int64_t tokens = 0;                  // windows × seq_len predicted tokens
  double loss = 0;                     // mean cross-entropy, nats per token
  double bpb = 0;                      // loss / ln 2: tokens are bytes
  std::vector<double> position_loss;   // (seq_len): mean loss at each window position
  FlopCounts flops;                    // everything the forward passes computed
  UnitCost inner;                      // the TTT layers' inner-loop FLOPs, summed over units and layers
  double flops_per_token = 0;          // flops.total() / tokens
  double inner_flops_per_token = 0;    // inner.total() / tokens
  double mean_k = 0;                   // mean inner steps per unit and TTT layer
  double seconds = 0;
};

// Runs every window of `windows` through `model` under NoGradGuard. The windows' seq_len must be a
// multiple of the model's mini-batch.
EvalResult evaluate(const Model& model, const data::EvalWindows& windows, const EvalOptions& opt);

}  // namespace ponder::ttt
