#include "tensor/side_by_side.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <numeric>

#include "tensor/flops.h"

namespace ponder {

namespace {

std::vector<ThreadSetting>& inherited() {
  static std::vector<ThreadSetting> settings;
  return settings;
}

// Sets the calling thread's values of the inherited settings on a worker for its lifetime in side_by_side.
class Inherit {
 public:
  explicit Inherit(const std::vector<bool>& values) {
    for (size_t i = 0; i < values.size(); ++i) {
      own_.push_back(inherited()[i].get());
      inherited()[i].set(values[i]);
    }
  }
  ~Inherit() {
    for (size_t i = 0; i < own_.size(); ++i) inherited()[i].set(own_[i]);
  }
  Inherit(const Inherit&) = delete;

 private:
  std::vector<bool> own_;
};

}  // namespace

void inherit_on_workers(ThreadSetting setting) { inherited().push_back(setting); }

void side_by_side(const std::vector<size_t>& order, int jobs, const std::function<void(size_t, int)>& task) {
  if (jobs <= 1 || order.size() <= 1 || omp_in_parallel()) {
    for (size_t i : order) task(i, 0);
    return;
  }
  std::vector<FlopCounts> counted(static_cast<size_t>(jobs));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  std::vector<bool> caller;
  for (const ThreadSetting& s : inherited()) caller.push_back(s.get());
#pragma omp parallel num_threads(jobs)
  {
    const int w = omp_get_thread_num();
    const Inherit settings(caller);
    const FlopScope scope;
    for (size_t t = 0; !failed && (t = next++) < order.size();) {
      try {
        task(order[t], w);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
    if (w != 0) counted[size_t(w)] = scope.counts();
  }
  for (size_t w = 1; w < counted.size(); ++w) flops::absorb(counted[w]);
  if (error) std::rethrow_exception(error);
}

std::vector<size_t> hand_out_order(const std::vector<double>& sizes, int jobs) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t(0));
  if (jobs > 1) std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  return order;
}

SharedProgress::SharedProgress(std::function<void(double)> progress, std::vector<double> sizes)
    : progress_(std::move(progress)), sizes_(std::move(sizes)), done_(sizes_.size(), 0.0),
      all_(std::accumulate(sizes_.begin(), sizes_.end(), 0.0)) {}

void SharedProgress::tell(size_t piece, double fraction) {
  std::lock_guard<std::mutex> lk(mu_);
  read_ += (fraction - done_[piece]) * sizes_[piece];
  done_[piece] = fraction;
  if (progress_ && all_ > 0) progress_(read_ / all_);
}

}  // namespace ponder
