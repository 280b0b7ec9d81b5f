#include "experiments/codebench/sample.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

#include "autograd/grad_mode.h"
#include "tensor/rng.h"
#include "ttt/eval.h"
#include "ttt/train.h"

namespace ponder::codebench {
namespace codebench_sample {
namespace {

// Feeds bytes to the model and gives the logits for the byte after them. TTT layers learn a mini-batch at a time,
// so a sequence is fed in whole mini-batches: the complete ones go into `committed_` for good; the incomplete
// rest is fed, padded, to a copy of that state each time a logit is wanted (positions are causal, so the padding
// after the last real byte does not change its logits). Model states hold tensor handles that forward passes
// replace, never write into, so copying one is cheap.
class ByteStream {
 public:
  explicit ByteStream(const cli::TrainedModel& m)
      : m_(m), b_(m.model.config().mini_batch), inner_(m.config.eval.inner),
        schedule_(ttt::make_schedule(inner_.schedule)),
        run_(ttt::make_run(inner_, schedule_.get(), ttt::ttt_lr_mult(m.config.train, m.config.model, m.step), nullptr)) {}

  void push(const std::string& bytes) {
    for (unsigned char c : bytes) {
      tail_.push_back(c);
      if (int64_t(tail_.size()) == b_) commit();
    }
  }

  std::vector<double> next_logits() {
    if (tail_.empty()) {
      if (last_.empty()) throw std::invalid_argument("codebench: an empty prompt has nothing to continue");
      return last_;
    }
    ttt::ModelState scratch = committed_;
    std::vector<int64_t> padded = tail_;
    padded.resize(size_t(b_), 0);
    return row(m_.model.forward_chunk(Tensor::from_ints(padded, {1, b_}), scratch, run_), tail_.size() - 1);
  }

 private:
  void commit() {
    last_ = row(m_.model.forward_chunk(Tensor::from_ints(tail_, {1, b_}), committed_, run_), tail_.size() - 1);
    tail_.clear();
  }
  static std::vector<double> row(const Tensor& logits, size_t t) {
    const std::vector<double> all = logits.to_vector();
    const size_t V = size_t(logits.shape()[2]);
    return std::vector<double>(all.begin() + long(t * V), all.begin() + long((t + 1) * V));
  }

  const cli::TrainedModel& m_;
  int64_t b_;
  ttt::InnerRun inner_;
  std::unique_ptr<ttt::StepSchedule> schedule_;
  ttt::TTTRun run_;
  ttt::ModelState committed_;
  std::vector<int64_t> tail_;
  std::vector<double> last_;  // logits after the last committed byte
};

// Cuts `text` before the first stop string; true when one was found.
bool cut_at_stop(std::string& text, const std::vector<std::string>& stops) {
  size_t first = std::string::npos;
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  if (first == std::string::npos) return false;
  text.resize(first);
  return true;
}

std::string complete(const cli::TrainedModel& m, const Task& task, const SampleOptions& o, Generator& gen) {
  ByteStream stream(m);
  stream.push(task.prompt);
  std::string out;
  while (int(out.size()) < o.max_new_bytes) {
    const int byte = pick_byte(stream.next_logits(), o.temperature, o.top_p, gen.uniform01());
    out.push_back(char(byte));
    if (cut_at_stop(out, task.stops)) break;
    stream.push(std::string(1, char(byte)));
  }
  return out;
}

}  // namespace
}  // namespace codebench_sample

int pick_byte(const std::vector<double>& logits, double temperature, double top_p, double uniform) {
  using namespace codebench_sample;
  if (logits.empty()) throw std::invalid_argument("pick_byte: no logits");
  if (temperature <= 0) return int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - top) / temperature);
  std::vector<int> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  double kept = 0;
  size_t n = 0;
  while (n < order.size() && (n == 0 || kept < top_p * total)) kept += p[size_t(order[n++])];
  double target = uniform * kept;
  for (size_t i = 0; i < n; ++i) {
    target -= p[size_t(order[i])];
    if (target < 0) return order[i];
  }
  return order[n - 1];
}

std::vector<std::vector<std::string>> sample_completions(const cli::TrainedModel& model, const std::vector<Task>& tasks,
                                                         const SampleOptions& o) {
  using namespace codebench_sample;
  NoGradGuard no_grad;
  std::vector<std::vector<std::string>> out(tasks.size());
  const auto t0 = std::chrono::steady_clock::now();
  const size_t total = tasks.size() * size_t(o.samples);
  double shown = 0;
  for (size_t p = 0; p < tasks.size(); ++p) {
    for (int s = 0; s < o.samples; ++s) {
      // One generator per (problem, sample), seeded from the project's counter-based hash of (seed, index).
      Generator gen(uint64_t(rng_uniform_at(o.seed, p * 1000003ull + uint64_t(s)) * 0x1p53));
      out[p].push_back(complete(model, tasks[p], o, gen));
      const size_t done = p * size_t(o.samples) + size_t(s) + 1;
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t - shown >= 5 || (done == total && shown > 0)) {
        shown = t;
        std::fprintf(stderr, "codebench sampling: %zu/%zu completions, %.0f s, ETA %.0f s\n", done, total, t,
                     t / double(done) * double(total - done));
      }
    }
  }
  return out;
}

}  // namespace ponder::codebench
