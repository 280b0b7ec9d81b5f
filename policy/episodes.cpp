#include "policy/episodes.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <numeric>

#include "tensor/cpu/runtime.h"

namespace ponder::policy {
namespace {

// Each window's share read so far, summed into one share of all the windows' tokens; told from any worker.
class SetProgress {
 public:
  SetProgress(const WindowProgress& progress, const std::vector<double>& sizes, double all)
      : progress_(progress), sizes_(sizes), done_(sizes.size(), 0.0), all_(all) {}
  void tell(size_t i, double fraction) {
    std::lock_guard<std::mutex> lk(mu_);
    read_ += (fraction - done_[i]) * sizes_[i];
    done_[i] = fraction;
    if (progress_) progress_(read_ / all_);
  }
 private:
  const WindowProgress& progress_;
  const std::vector<double>& sizes_;
  std::vector<double> done_;
  double all_, read_ = 0;
  std::mutex mu_;
};

std::vector<Episode> one_at_a_time(const std::vector<double>& sizes, double all, const RolloutOptions& opt,
                                   const WindowProgress& progress, const EpisodeFn& episode) {
  std::vector<Episode> out;
  double read = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (progress && i > 0) progress(read / all);
    out.push_back(episode(i, window_progress(opt, progress, read, sizes[i], all), 0));
    read += sizes[i];
  }
  return out;
}

}  // namespace

int episode_jobs(const ttt::Model& model, const RolloutOptions& opt, size_t windows) {
  if (opt.jobs < 0) throw std::invalid_argument("rollout: jobs must be >= 0, got " + std::to_string(opt.jobs));
  if (model.device() != Device::CPU) return 1;
  const int jobs = opt.jobs > 0 ? opt.jobs : cpu::num_threads();
  return int(std::clamp<size_t>(size_t(jobs), 1, std::max<size_t>(windows, 1)));
}

PolicyCopies::PolicyCopies(Policy& policy, int jobs) : policy_(policy) {
  copies_.resize(size_t(std::max(jobs, 1)));
  for (size_t w = 1; w < copies_.size(); ++w) copies_[w] = policy.clone();
}

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
#pragma omp parallel num_threads(jobs)
  {
    const int w = omp_get_thread_num();
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

std::vector<Episode> run_episodes(const std::vector<Window>& windows, const RolloutOptions& opt,
                                  const WindowProgress& progress, int jobs, const EpisodeFn& episode) {
  const size_t n = windows.size();
  std::vector<double> sizes(n);
  for (size_t i = 0; i < n; ++i) sizes[i] = double(windows[i].first.numel());
  const double all = std::accumulate(sizes.begin(), sizes.end(), 0.0);
  if (jobs <= 1 || n <= 1) return one_at_a_time(sizes, all, opt, progress, episode);

  // The longest windows first, so that the last ones to start are short (held-out streams differ in length 10×).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  SetProgress told(progress, sizes, all);
  std::vector<Episode> out(n);
  side_by_side(order, jobs, [&](size_t i, int w) {
    RolloutOptions o = opt;  // the caller's own progress callback is not made for several threads at once
    o.progress = progress ? std::function<void(double)>([&told, i](double f) { told.tell(i, f); }) : nullptr;
    out[i] = episode(i, o, w);
    told.tell(i, 1.0);
  });
  return out;
}

}  // namespace ponder::policy
