// Independent pieces of work (episodes, streams) run side by side on the CPU's threads. Work that reads one short
// sequence at a time at batch 1 has ops too small to share among threads; whole pieces are what runs in parallel
// then, each op on one thread. Every kernel gives the same bits on one thread as on many, so results that are kept
// per piece and combined in piece order are the same whatever the thread count.
#pragma once
#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

namespace ponder {

// Calls task(i, worker) for every i in `order`, `jobs` threads taking the next i as they finish one (worker 0 is the
// calling thread). The FLOPs the other workers count are added to the calling thread's counters, so a FlopScope
// around the call sees all of them. The first exception a task throws is rethrown here once the workers stop (they
// take no new task after it). On one job, or inside another parallel region, the tasks run here in order.
void side_by_side(const std::vector<size_t>& order, int jobs, const std::function<void(size_t i, int worker)>& task);

// A thread-local setting that a layer above this one keeps (autograd's grad mode). side_by_side's workers take the
// calling thread's value before their first task and have their own back after their last, so a task runs as it would
// on the calling thread: an evaluation under NoGradGuard records no graph on a worker either. Registered once, when
// the layer's code is loaded.
struct ThreadSetting {
  bool (*get)();
  void (*set)(bool);
};
void inherit_on_workers(ThreadSetting setting);

// The order to hand pieces of these sizes to `jobs` threads: on one job index order (one piece after another, as
// before there were threads); on several the largest first (ties in index order), so that the last pieces to start
// are short.
std::vector<size_t> hand_out_order(const std::vector<double>& sizes, int jobs);

// Each piece's share done, told from any thread, summed into one share of the whole weighted by the pieces' sizes
// and passed on to `progress` (one call at a time).
class SharedProgress {
 public:
  SharedProgress(std::function<void(double)> progress, std::vector<double> sizes);
  void tell(size_t piece, double fraction);
 private:
  std::function<void(double)> progress_;
  std::vector<double> sizes_, done_;
  double all_ = 0, read_ = 0;
  std::mutex mu_;
};

}  // namespace ponder
