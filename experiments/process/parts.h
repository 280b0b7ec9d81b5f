// Independent parts of a long job (trainings, comparisons of different models) run side by side in child processes.
//
// Why processes and not threads: most of a comparison runs on one thread (experiments/study/compare.cpp), and a small
// model's training gains only ~1.4x from a second core, so two single-thread parts at once do more work per second
// than one part on two threads. Each part writes its results where a later, serial pass finds and reuses them
// (checkpoints, fingerprinted comparison folders), so the serial code stays the one place that assembles a report,
// and a part that failed or was interrupted is redone by the next run, nothing else.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace ponder::cli {

struct Part {
  std::string name;                // file name safe; its output goes to <log_dir>/<name>.log
  std::vector<std::string> after;  // names of the parts that must finish first
  double estimate = 1;             // its cost in seconds on one thread, roughly: drives the order and the ETA
  std::function<void()> run;
};

// Runs every part, at most `jobs` at a time, each in a forked child with max(1, threads / jobs) threads, its stdout
// and stderr in <log_dir>/<name>.log. Progress with an ETA goes to stderr as "<label>: …". Ctrl-C or SIGTERM is
// passed on once to the running parts (a training checkpoints and stops) and no new part starts. A part that fails
// stops the run after the running ones end: the error names it, its exit status and the end of its log.
// With jobs <= 1 the parts run here, in order, with no child processes and no logs.
// The caller must not have entered an OpenMP parallel region before (the children could not use theirs).
void run_parts(const std::vector<Part>& parts, int jobs, int threads, const std::string& log_dir,
               const std::string& label);

}  // namespace ponder::cli
