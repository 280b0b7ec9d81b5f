// Episodes over many windows (held-out windows, or whole documents read as streams) run side by side on the CPU's
// threads. A comparison's rollouts read one unit of one sequence at a time (batch 1, 16 tokens): the engine's kernels
// find too little work there to share among threads, so one episode keeps about one core busy however many there
// are. Episodes are independent of one another, so they are what runs in parallel: each thread takes the next
// window (the longest first), runs it with its own copy of the policy and its kernels on one thread, and the results
// come back in window order. Every kernel's result is the same on one thread as on many, so the episodes, and every
// sum taken over them in window order, are the same bits whatever the thread count.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "policy/calibrate.h"
#include "tensor/side_by_side.h"

namespace ponder::policy {

// How many windows run side by side: opt.jobs if set, else the CPU threads (cpu::num_threads()), at most the number
// of windows; 1 on a GPU (one stream runs the episodes one after another).
int episode_jobs(const ttt::Model& model, const RolloutOptions& opt, size_t windows);

// A policy for each worker: worker 0 uses `policy` itself, the others a clone() each, made here (on one thread).
class PolicyCopies {
 public:
  PolicyCopies(Policy& policy, int jobs);
  Policy& operator[](int worker) { return worker == 0 ? policy_ : *copies_[size_t(worker)]; }
 private:
  Policy& policy_;
  std::vector<std::unique_ptr<Policy>> copies_;
};

// One episode: window i, with `opt` (its progress already wired to the whole set's), on worker `worker` (0 is the
// calling thread; workers 1… are the others, each running one episode at a time).
using EpisodeFn = std::function<Episode(size_t i, const RolloutOptions& opt, int worker)>;

// Runs `episode` for every window, `jobs` at a time (side_by_side in hand_out_order), and returns the
// episodes in window order. `progress` is told the share of all the windows' tokens read, from one thread at a time.
std::vector<Episode> run_episodes(const std::vector<Window>& windows, const RolloutOptions& opt,
                                  const WindowProgress& progress, int jobs, const EpisodeFn& episode);

}  // namespace ponder::policy
