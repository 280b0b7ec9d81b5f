#include "policy/episodes.h"

#include <algorithm>

#include "tensor/cpu/runtime.h"

namespace ponder::policy {

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

std::vector<Episode> run_episodes(const std::vector<Window>& windows, const RolloutOptions& opt,
                                  const WindowProgress& progress, int jobs, const EpisodeFn& episode) {
  const size_t n = windows.size();
  std::vector<double> sizes(n);
  for (size_t i = 0; i < n; ++i) sizes[i] = double(windows[i].first.numel());
  SharedProgress told(progress, sizes);
  std::vector<Episode> out(n);
  side_by_side(hand_out_order(sizes, jobs), jobs, [&](size_t i, int w) {
    RolloutOptions o = opt;  // the caller's own progress callback is not made for several threads at once
    o.window = int64_t(i);
    o.progress = progress ? std::function<void(double)>([&told, i](double f) { told.tell(i, f); }) : nullptr;
    out[i] = episode(i, o, w);
    told.tell(i, 1.0);
  });
  return out;
}

}  // namespace ponder::policy
