#include "experiments/process/parts.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "tensor/cpu/runtime.h"

namespace ponder::cli {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// The parts' names must be unique and every `after` must name an earlier part, so the listed order runs them.
void check_order(const std::vector<Part>& parts) {
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < parts.size(); ++i) {
    for (const std::string& dep : parts[i].after)
      if (!seen.count(dep))
        throw std::invalid_argument("part '" + parts[i].name + "' waits for '" + dep + "', which is not listed before it");
    if (!seen.emplace(parts[i].name, i).second) throw std::invalid_argument("two parts are named '" + parts[i].name + "'");
  }
}

std::string clock(double s) {
  char b[32];
  const long t = long(s + 0.5);
  std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}

// The last `n` lines of a log, joined by " | " (an error is one line).
std::string tail_of(const std::string& path, size_t n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string l; std::getline(in, l);) {
    lines.push_back(l);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}

// A child: its own process group (so a Ctrl-C reaches it once, from the parent), its output in the log, its threads.
[[noreturn]] void run_child(const Part& p, const std::string& log, int threads, pid_t parent) {
  setpgid(0, 0);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  // A parent killed outright (kill -9) takes its parts with it: each gets SIGTERM, which a training part answers by
  // writing its checkpoint, so a rerun resumes it instead of a second writer joining the first.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(1);  // the parent died before the line above
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) _exit(3);
  close(fd);
  cpu::set_num_threads(threads);
  int code = 0;
  try {
    p.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    code = 1;
  } catch (...) {
    std::fprintf(stderr, "error: an exception that is not a std::exception\n");
    code = 1;
  }
  std::fflush(nullptr);
  _exit(code);
}

class Pool {
 public:
  Pool(const std::vector<Part>& parts, int jobs, int threads, std::string log_dir, std::string label)
      : parts_(parts), jobs_(jobs), threads_(std::max(1, threads / jobs)), log_dir_(std::move(log_dir)),
        label_(std::move(label)), state_(parts.size(), Waiting), started_(parts.size()) {}

  void run() {
    std::fprintf(stderr, "%s: %zu parts, %d at a time with %d thread(s) each; their output goes to %s/<part>.log\n",
                 label_.c_str(), parts_.size(), jobs_, threads_, log_dir_.c_str());
    auto last_note = now();
    while (done_ < parts_.size()) {
      if (g_signal && !forwarded_) forward(g_signal);
      if (!forwarded_ && failed_.empty()) start_ready();
      if (running_.empty()) break;  // stopped, or failed with nothing left running
      if (!reap()) {
        usleep(200 * 1000);
        if (seconds(last_note, now()) >= 30) {
          note("");
          last_note = now();
        }
      }
    }
    finish();
  }

 private:
  enum State { Waiting, Running, Done };
  using Clock = std::chrono::steady_clock;
  static Clock::time_point now() { return Clock::now(); }
  static double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

  std::string log_of(size_t i) const { return log_dir_ + "/" + parts_[i].name + ".log"; }

  bool ready(size_t i) const {
    if (state_[i] != Waiting) return false;
    for (const std::string& dep : parts_[i].after)
      for (size_t j = 0; j < parts_.size(); ++j)
        if (parts_[j].name == dep && state_[j] != Done) return false;
    return true;
  }

  // The part's estimate plus the longest chain of parts waiting for it (a training part carries its comparison).
  double chain(size_t i) const {
    double after = 0;
    for (size_t j = 0; j < parts_.size(); ++j)
      for (const std::string& dep : parts_[j].after)
        if (dep == parts_[i].name) after = std::max(after, chain(j));
    return parts_[i].estimate + after;
  }

  // The ready part with the longest chain first, so a long part, or a part others wait for, does not start last and
  // leave a core idle at the end.
  void start_ready() {
    while (int(running_.size()) < jobs_) {
      size_t best = parts_.size();
      for (size_t i = 0; i < parts_.size(); ++i)
        if (ready(i) && (best == parts_.size() || chain(i) > chain(best))) best = i;
      if (best == parts_.size()) return;
      std::fflush(nullptr);
      const pid_t self = getpid();
      const pid_t pid = fork();
      if (pid < 0) throw std::runtime_error(label_ + ": cannot start a process: " + std::strerror(errno));
      if (pid == 0) run_child(parts_[best], log_of(best), threads_, self);
      running_[pid] = best;
      state_[best] = Running;
      started_[best] = now();
      note("started " + parts_[best].name);
    }
  }

  // Collects one finished child, if any.
  bool reap() {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0 || (pid < 0 && errno == EINTR)) return false;
    if (pid < 0) throw std::runtime_error(label_ + ": waitpid: " + std::strerror(errno));
    const auto it = running_.find(pid);
    if (it == running_.end()) return true;
    const size_t i = it->second;
    running_.erase(it);
    state_[i] = Done;
    ++done_;
    const double took = seconds(started_[i], now());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      done_estimate_ += parts_[i].estimate;
      done_seconds_ += took;
      note("finished " + parts_[i].name + " in " + clock(took));
    } else {
      const std::string why = WIFSIGNALED(status) ? std::string("was killed by ") + strsignal(WTERMSIG(status))
                                                  : "exited with status " + std::to_string(WEXITSTATUS(status));
      failed_ += " " + parts_[i].name + " " + why + "; the end of " + log_of(i) + ": " + tail_of(log_of(i), 6) + ".";
      note(parts_[i].name + " " + why + (running_.empty() ? "" : "; waiting for the running parts"));
    }
    return true;
  }

  void forward(int sig) {
    forwarded_ = true;
    for (const auto& [pid, i] : running_) kill(pid, sig);
    note(std::string("passed ") + strsignal(sig) + " on to the running parts; no new part starts");
  }

  void note(const std::string& what) {
    double left = 0;  // estimated single-thread seconds still to run
    for (size_t i = 0; i < parts_.size(); ++i)
      if (state_[i] == Waiting) left += parts_[i].estimate;
      else if (state_[i] == Running) left += std::max(0.0, parts_[i].estimate - seconds(started_[i], now()));
    const double scale = done_estimate_ > 0 ? done_seconds_ / done_estimate_ : 1.0;
    std::string running;
    for (const auto& [pid, i] : running_) running += (running.empty() ? "" : ", ") + parts_[i].name;
    std::fprintf(stderr, "%s: %s%s%zu of %zu parts done%s%s, elapsed %s, ETA ~%s\n", label_.c_str(), what.c_str(),
                 what.empty() ? "" : "; ", done_, parts_.size(), running.empty() ? "" : ", running: ", running.c_str(),
                 clock(seconds(t0_, now())).c_str(), clock(scale * left / double(jobs_)).c_str());
  }

  void finish() const {
    if (!failed_.empty())
      throw std::runtime_error(label_ + ": a part failed (finished parts are kept; a rerun redoes only the rest):" +
                               failed_);
    if (forwarded_)
      throw std::runtime_error(label_ + ": interrupted (" + std::string(strsignal(g_signal)) +
                               "); finished parts are kept and a rerun continues from them");
  }

  const std::vector<Part>& parts_;
  const int jobs_, threads_;
  const std::string log_dir_, label_;
  std::vector<State> state_;
  std::vector<Clock::time_point> started_;
  std::map<pid_t, size_t> running_;
  size_t done_ = 0;
  double done_estimate_ = 0, done_seconds_ = 0;
  bool forwarded_ = false;
  std::string failed_;
  const Clock::time_point t0_ = now();
};

}  // namespace

void run_parts(const std::vector<Part>& parts, int jobs, int threads, const std::string& log_dir,
               const std::string& label) {
  check_order(parts);
  if (jobs <= 1) {
    for (const Part& p : parts) p.run();
    return;
  }
  std::filesystem::create_directories(log_dir);
  g_signal = 0;
  auto prev_int = std::signal(SIGINT, on_signal), prev_term = std::signal(SIGTERM, on_signal);
  try {
    Pool(parts, jobs, threads, log_dir, label).run();
  } catch (...) {
    std::signal(SIGINT, prev_int);
    std::signal(SIGTERM, prev_term);
    throw;
  }
  std::signal(SIGINT, prev_int);
  std::signal(SIGTERM, prev_term);
}

}  // namespace ponder::cli
