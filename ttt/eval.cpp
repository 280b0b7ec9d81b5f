#include "ttt/eval.h"

#include <chrono>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "autograd/grad_mode.h"

namespace ponder::ttt {
namespace {

// A step count as written in a spec: an integer in [0, kMaxInnerSteps] and nothing else.
int parse_k(const std::string& text, const std::string& spec) {
  size_t used = 0;
  int k = -1;
  try {
    k = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || k < 0 || k > kMaxInnerSteps)
    throw std::invalid_argument("schedule '" + spec + "': '" + text + "' is not a step count (an integer in 0.." +
                                std::to_string(kMaxInnerSteps) + ")");
  return k;
}

}  // namespace

ScheduleSpec parse_schedule(const std::string& spec) {
  if (spec.rfind("uniform-", 0) == 0) return {{parse_k(spec.substr(8), spec)}, false, spec};
  if (spec.rfind("fixed:", 0) == 0) {
    ScheduleSpec s{{}, true, spec};
    const std::string list = spec.substr(6);
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      s.ks.push_back(parse_k(list.substr(at, comma - at), spec));
      at = comma + 1;
    }
    return s;
  }
  throw std::invalid_argument("schedule '" + spec + "': expected uniform-K or fixed:K1,K2,... (K in 0.." +
                              std::to_string(kMaxInnerSteps) + ")");
}

std::unique_ptr<StepSchedule> make_schedule(const ScheduleSpec& spec) {
  if (spec.fixed) return std::make_unique<FixedSchedule>(spec.ks);
  return std::make_unique<UniformSchedule>(spec.ks.at(0));
}

StepMode parse_mode(const std::string& s) {
  if (s == "carry") return StepMode::Carry;
  if (s == "prefix") return StepMode::Prefix;
  throw std::invalid_argument("mode must be 'carry' or 'prefix', got '" + s + "'");
}

InnerPath parse_path(const std::string& s) {
  if (s == "dual") return InnerPath::Dual;
  if (s == "iterative") return InnerPath::Iterative;
  throw std::invalid_argument("path must be 'dual' or 'iterative', got '" + s + "'");
}

const char* mode_name(StepMode m) { return m == StepMode::Carry ? "carry" : "prefix"; }
const char* path_name(InnerPath p) { return p == InnerPath::Dual ? "dual" : "iterative"; }

TTTRun make_run(const InnerRun& inner, StepSchedule* schedule, double lr_mult, std::vector<UnitCost>* costs) {
  TTTRun run;
  run.path = inner.path;
  run.mode = inner.mode;
  run.schedule = schedule;
  run.lr_mult = lr_mult;
  run.costs = costs;
  return run;
}

void add_costs(const std::vector<UnitCost>& costs, UnitCost& total) {
  for (const UnitCost& c : costs) {
    total.inner_forward += c.inner_forward;
    total.inner_grad += c.inner_grad;
    total.update += c.update;
    total.output += c.output;
  }
}

EvalResult evaluate(const Model& model, const data::EvalWindows& windows, const EvalOptions& opt) {
  const int64_t T = windows.seq_len();
  if (T % model.config().mini_batch != 0)
    throw std::invalid_argument("evaluate: window length " + std::to_string(T) + " is not a multiple of the " +
                                "mini-batch size " + std::to_string(model.config().mini_batch));
  if (windows.size() == 0) throw std::invalid_argument("evaluate: no windows to evaluate");
  NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<StepSchedule> schedule = make_schedule(opt.inner.schedule);
  EvalResult r;
  r.position_loss.assign(size_t(T), 0.0);
  double loss_sum = 0, k_sum = 0, k_count = 0;
  FlopScope scope;
  for (int64_t i = 0; i < windows.num_batches(opt.batch_size); ++i) {
    const data::Batch batch = windows.batch(i, opt.batch_size);
    const int64_t rows = batch.input.shape()[0];
    std::vector<UnitCost> costs;
    const TTTRun run = make_run(opt.inner, schedule.get(), opt.lr_mult, &costs);
    const std::vector<double> losses = model.token_losses(batch.input, batch.target, run).to_vector();  // (rows, T)
    for (int64_t b = 0; b < rows; ++b)
      for (int64_t t = 0; t < T; ++t) r.position_loss[size_t(t)] += losses[size_t(b * T + t)];
    add_costs(costs, r.inner);
    for (const UnitCost& c : costs) {
      k_sum += double(c.steps) * double(rows);  // one decision covers every row of the batch
      k_count += double(rows);
    }
    r.windows += rows;
  }
  r.flops = scope.counts();
  r.tokens = r.windows * T;
  for (double& p : r.position_loss) {
    loss_sum += p;
    p /= double(r.windows);
  }
  r.loss = loss_sum / double(r.tokens);
  r.bpb = r.loss / std::numbers::ln2;
  r.flops_per_token = double(r.flops.total()) / double(r.tokens);
  r.inner_flops_per_token = double(r.inner.total()) / double(r.tokens);
  r.mean_k = k_count > 0 ? k_sum / k_count : 0.0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ponder::ttt
