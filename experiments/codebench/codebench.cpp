#include "experiments/codebench/codebench.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ponder::codebench {
namespace codebench {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The exception line of a Python traceback: the first unindented line after "Traceback (most recent call
// last):" (or after "SyntaxError"-style reports, which have no traceback header, the last line). `after`: use the
// first traceback that starts at or after this line (unittest reports one per failed test), else the last one.
std::string exception_line(const std::vector<std::string>& lines, size_t after = std::string::npos) {
  size_t tb = std::string::npos;
  for (size_t i = 0; i < lines.size(); ++i)
    if (starts(lines[i], "Traceback (most recent call last)")) {
      tb = i;
      if (after != std::string::npos && i >= after) break;
    }
  if (tb != std::string::npos)
    for (size_t i = tb + 1; i < lines.size(); ++i)
      if (!lines[i].empty() && lines[i][0] != ' ' && lines[i][0] != '\t') return lines[i];
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (!it->empty() && (*it)[0] != ' ') return *it;
  return "";
}

// Where the traceback last was in the program: " (main.py line N)", or "".
std::string program_line(const std::vector<std::string>& lines) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const size_t at = it->find("main.py\", line ");
    if (at == std::string::npos) continue;
    const size_t b = at + 15, e = it->find_first_not_of("0123456789", b);
    return " (main.py line " + it->substr(b, e - b) + ")";
  }
  return "";
}

std::string clip(std::string s, size_t n = 300) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s.size() > n ? s.substr(0, n - 3) + "..." : s;
}

std::string category_of(const std::string& exc) {
  if (starts(exc, "ModuleNotFoundError") || starts(exc, "ImportError: No module named")) return "missing-module";
  if (starts(exc, "MemoryError")) return "memory";
  if (starts(exc, "SyntaxError") || starts(exc, "IndentationError") || starts(exc, "TabError")) return "syntax-error";
  if (starts(exc, "AssertionError")) return "failed-test";
  return "error";
}

// Progress on stderr for runs longer than a moment: rewritten in place on a terminal, a line every few seconds
// otherwise.
class Progress {
 public:
  Progress(std::string label, size_t total) : label_(std::move(label)), total_(total), tty_(isatty(STDERR_FILENO)) {}
  void show(size_t done, size_t failed, bool last) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!last && t - shown_ < (tty_ ? 0.5 : 5.0)) return;
    if (last && shown_ == 0) return;  // finished before the first line was due: nothing to say
    shown_ = t;
    const double eta = done ? t / double(done) * double(total_ - done) : 0;
    std::fprintf(stderr, "%scodebench %s: %zu/%zu programs, %zu failed, %.0f s, ETA %.0f s%s", tty_ ? "\r" : "",
                 label_.c_str(), done, total_, failed, t, eta, tty_ && !last ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  std::string label_;
  size_t total_;
  bool tty_;
  double shown_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace
}  // namespace codebench

std::string printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  char hex[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;  // U+0080..U+009F in UTF-8
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else if (c1) {
      std::snprintf(hex, sizeof hex, "\\u%04x", unsigned(static_cast<unsigned char>(text[++i])));
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out;
}

Outcome classify(const sandbox::Result& r) {
  using namespace codebench;
  Outcome o{r, "passed", ""};
  if (r.passed()) return o;
  const std::vector<std::string> lines = lines_of(r.err);
  if (r.timed_out) {
    o.category = "timeout";
    o.reason = "killed at the wall-clock limit after " + std::to_string(int(std::lround(r.seconds))) + " s";
  } else if (r.signal == SIGXCPU || r.signal == SIGKILL) {
    o.category = "cpu-limit";
    o.reason = std::string("killed by ") + (r.signal == SIGXCPU ? "SIGXCPU" : "SIGKILL") + " at the CPU-time limit";
  } else if (r.signal != 0) {
    o.category = "signal";
    o.reason = "killed by signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
  } else if (r.exit_code == 126 && starts(r.err, "ponder sandbox:")) {
    o.category = "sandbox-error";
    o.reason = lines.empty() ? "" : lines[0];
  } else {
    std::string test;  // unittest names the first test that failed
    size_t at = std::string::npos;
    for (size_t i = 0; i < lines.size() && test.empty(); ++i)
      if (starts(lines[i], "FAIL: ") || starts(lines[i], "ERROR: ")) {
        test = lines[i] + ": ";
        at = i;
      }
    const std::string exc = exception_line(lines, at);
    o.category = exc.empty() ? "error" : category_of(exc);
    o.reason = exc.empty() ? "exit status " + std::to_string(r.exit_code) + " with no traceback"
                           : test + exc + (test.empty() ? program_line(lines) : "");
    if (!test.empty() && o.category == "error") o.category = "failed-test";  // a test that raised
  }
  o.reason = clip(o.reason);
  return o;
}

std::vector<Outcome> run_programs(const sandbox::Sandbox& box, const std::vector<std::string>& programs,
                                  const sandbox::Limits& limits, int jobs, const std::string& label) {
  using namespace codebench;
  std::vector<Outcome> out(programs.size());
  std::atomic<size_t> next{0}, done{0}, failed{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::atomic<bool> stop{false};
  auto worker = [&] {
    for (size_t i; (i = next++) < programs.size();) {
      try {
        out[i] = classify(sandbox::run(box, programs[i], limits));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        stop = true;
        next = programs.size();  // hand out no more work
      }
      if (out[i].category != "passed") ++failed;
      ++done;
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < std::max(1, jobs); ++j) pool.emplace_back(worker);
  Progress progress(label, programs.size());
  while (done < programs.size() && !stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    progress.show(done, failed, false);
  }
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  progress.show(done, failed, true);
  return out;
}

double pass_at_k(int n, int c, int k) {
  using namespace codebench;
  if (k < 1 || k > n || c < 0 || c > n) throw std::invalid_argument("pass@k needs 1 <= k <= n and 0 <= c <= n");
  if (n - c < k) return 1.0;
  double none = 1.0;  // C(n-c, k) / C(n, k) as a product, which stays accurate for large n
  for (int i = n - c + 1; i <= n; ++i) none *= 1.0 - double(k) / double(i);
  return 1.0 - none;
}

}  // namespace ponder::codebench
