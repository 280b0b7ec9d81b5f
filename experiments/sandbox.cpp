#include "experiments/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

namespace ponder::sandbox {
namespace sandbox {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Runs as root get uids from this range, which no account uses: one per run, so that the process count RLIMIT_NPROC
// limits is the run's own (a fork bomb's leftovers, still being torn down, do not count against the next run).
constexpr uint32_t kUidBase = 1500000000u, kUidPool = 1u << 16;
// Relaying processes (bwrap's, and ours in the unshare backend) report a program killed by signal n as 128 + n.
constexpr int kSignalBase = 128;
constexpr const char* kPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Everything the child needs, prepared before fork: after fork in a threaded process only async-signal-safe calls
// are allowed, so no allocation happens there.
struct ChildPlan {
  std::vector<std::string> argv_s, env_s;
  std::vector<char*> argv, envp;
  std::string cwd;             // empty: stay where we are
  bool limits = false;         // apply the rlimits below
  rlim_t cpu_s = 0, as_bytes = 0, nproc = 0, fsize = 0;
  bool drop_uid = false;       // setuid(uid) before exec (runs as root)
  uid_t uid = 0;
  bool namespaces = false;     // the unshare backend
  bool user_ns = false;        // not root: a user namespace first, mapping our own ids
  std::string uid_map, gid_map, workdir;

  void seal() {
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env_s) envp.push_back(s.data());
    envp.push_back(nullptr);
  }
};

// Writes "ponder sandbox: WHAT (errno N)" to stderr and exits 126: async-signal-safe, so no printf.
[[noreturn]] void child_fail(const char* what) {
  const int e = errno;
  char num[16];
  int n = 0;
  for (int v = e; n == 0 || v > 0; v /= 10) num[n++] = char('0' + v % 10);
  auto put = [](const char* s, size_t len) { [[maybe_unused]] ssize_t r = write(2, s, len); };
  put("ponder sandbox: ", 16);
  put(what, strlen(what));
  put(" (errno ", 8);
  while (n > 0) put(&num[--n], 1);
  put(")\n", 2);
  _exit(126);
}

bool write_file(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size());
  close(fd);
  return ok;
}

void set_limit(int resource, rlim_t soft, rlim_t hard, const char* what) {
  const rlimit r{soft, hard};
  if (setrlimit(resource, &r) != 0) child_fail(what);
}

void apply_limits(const ChildPlan& p) {
  set_limit(RLIMIT_CPU, p.cpu_s, p.cpu_s + 1, "setrlimit(RLIMIT_CPU) failed");  // SIGXCPU, then SIGKILL
  set_limit(RLIMIT_AS, p.as_bytes, p.as_bytes, "setrlimit(RLIMIT_AS) failed");
  set_limit(RLIMIT_NPROC, p.nproc, p.nproc, "setrlimit(RLIMIT_NPROC) failed");
  set_limit(RLIMIT_FSIZE, p.fsize, p.fsize, "setrlimit(RLIMIT_FSIZE) failed");
  set_limit(RLIMIT_CORE, 0, 0, "setrlimit(RLIMIT_CORE) failed");
}

// The unshare backend's filesystem: the host's, read-only where the kernel lets us (mount_setattr, Linux 5.12+),
// with the run's directory as a writable /tmp and empty size-limited /var/tmp and /dev/shm.
void isolate_filesystem(const ChildPlan& p) {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail("making mounts private failed");
#ifdef SYS_mount_setattr
  struct {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
  } attr{0x00000001 /* MOUNT_ATTR_RDONLY */, 0, 0, 0};
  // Best effort: where it fails the filesystem stays as writable as the uid allows, and describe() says so.
  syscall(SYS_mount_setattr, AT_FDCWD, "/", 0x8000 /* AT_RECURSIVE */, &attr, sizeof attr);
#endif
  if (mount(p.workdir.c_str(), "/tmp", nullptr, MS_BIND, nullptr) != 0) child_fail("binding the work dir failed");
  mount(nullptr, "/tmp", nullptr, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, nullptr);  // writable again
  mount("tmpfs", "/var/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m");
  mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m");
}

// Waits for `pid` and exits with its status, a signal n as 128 + n; `reap_all`: also reaps every other child
// (what pid 1 of a namespace inherits) while waiting.
[[noreturn]] void relay_exit(pid_t pid, bool reap_all) {
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(reap_all ? -1 : pid, &status, 0);
    if (w == pid || (w < 0 && errno != EINTR)) break;
  }
  _exit(WIFSIGNALED(status) ? kSignalBase + WTERMSIG(status) : WEXITSTATUS(status));
}

// Leaves the caller in new network, ipc, uts, mount and pid namespaces. The pid namespace's pid 1 is a reaper
// that only waits: the kernel ignores signals such as SIGXCPU sent to a namespace's init, so the program must not
// be pid 1, and when pid 1 ends the kernel kills everything left in the namespace. Returns in the program's
// process (pid 2); the others exit with its status.
void enter_namespaces(const ChildPlan& p) {
  if (p.user_ns) {
    if (unshare(CLONE_NEWUSER) != 0) child_fail("unshare(CLONE_NEWUSER) failed");
    write_file("/proc/self/setgroups", "deny");
    if (!write_file("/proc/self/uid_map", p.uid_map) || !write_file("/proc/self/gid_map", p.gid_map))
      child_fail("writing the user namespace's id maps failed");
  }
  if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNS | CLONE_NEWPID) != 0)
    child_fail("unshare(net, ipc, uts, mount, pid) failed");
  isolate_filesystem(p);
  const pid_t init = fork();
  if (init < 0) child_fail("fork into the pid namespace failed");
  if (init > 0) relay_exit(init, false);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The namespace's own /proc, so the program sees only its processes (best effort: a container may forbid it).
  mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
  const pid_t program = fork();
  if (program < 0) child_fail("fork of the program failed");
  if (program > 0) relay_exit(program, true);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

[[noreturn]] void child_main(const ChildPlan& p, int out_w, int err_w) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null_in = open("/dev/null", O_RDONLY);
  if (null_in < 0 || dup2(null_in, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0) child_fail("stdio setup failed");
  setsid();  // a process group of its own: the wall clock kills it whole
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (p.limits) apply_limits(p);  // before any user namespace, whose process limit is taken from ours
  if (p.namespaces) enter_namespaces(p);
  if (p.drop_uid) {
    if (setgroups(0, nullptr) != 0 || setgid(p.uid) != 0 || setuid(p.uid) != 0) child_fail("dropping to the sandbox uid failed");
  }
  if (!p.cwd.empty() && chdir(p.cwd.c_str()) != 0) child_fail("chdir into the work dir failed");
  execve(p.argv[0], p.argv.data(), p.envp.data());
  child_fail("exec failed");
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Reads what is ready on `fd` into `keep` up to `cap` bytes; false at end of file.
bool drain(int fd, std::string& keep, size_t cap, bool& truncated) {
  char buf[65536];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  const size_t room = keep.size() < cap ? cap - keep.size() : 0;
  keep.append(buf, std::min(room, size_t(n)));
  if (size_t(n) > room) truncated = true;
  return true;
}

// True once `pid` has exited, without reaping it: its process group id stays reserved until waitpid, so
// killing the group afterwards cannot hit an unrelated process.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Collects the child's output until it exits (or the wall clock runs out: then its process group is killed),
// kills whatever is left of its group, and reaps it.
void collect(pid_t pid, int out_r, int err_r, const Limits& lim, Clock::time_point t0, Result& r) {
  int fds[2] = {out_r, err_r};
  bool open_fd[2] = {true, true};
  std::string* keep[2] = {&r.out, &r.err};
  bool* cut[2] = {&r.out_truncated, &r.err_truncated};
  double exited_at = -1;
  for (;;) {
    const double now = since(t0);
    if (exited_at < 0 && has_exited(pid)) exited_at = now;
    if (exited_at < 0 && now >= lim.wall_s) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      while (!has_exited(pid)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      exited_at = now;
    }
    // A process that left the group may hold the pipes open: stop reading shortly after the program ended.
    if (exited_at >= 0 && ((!open_fd[0] && !open_fd[1]) || now > exited_at + 0.2)) break;
    pollfd p[2];
    int n = 0;
    for (int i = 0; i < 2; ++i)
      if (open_fd[i]) p[n++] = {fds[i], POLLIN, 0};
    const double left = exited_at >= 0 ? 0.01 : std::min(0.05, lim.wall_s - now);
    if (n == 0) {  // both pipes closed: the exit status follows in a moment
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (poll(p, nfds_t(n), std::max(1, int(left * 1000))) <= 0) continue;
    for (int j = 0; j < n; ++j) {
      const int i = p[j].fd == fds[0] ? 0 : 1;
      if (p[j].revents & (POLLIN | POLLHUP | POLLERR)) open_fd[i] = drain(fds[i], *keep[i], lim.output_bytes, *cut[i]);
    }
  }
  kill(-pid, SIGKILL);  // leftovers of the program's group (it may have started background processes)
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  else r.exit_code = WEXITSTATUS(status);
}

Result spawn(ChildPlan& plan, const Limits& lim, bool relays_signals) {
  plan.seal();
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("sandbox: pipe failed: ") + strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    throw std::runtime_error(std::string("sandbox: pipe failed: ") + strerror(errno));
  }
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) child_main(plan, out[1], err[1]);
  close(out[1]);
  close(err[1]);
  Result r;
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    throw std::runtime_error(std::string("sandbox: fork failed: ") + strerror(errno));
  }
  collect(pid, out[0], err[0], lim, t0, r);
  close(out[0]);
  close(err[0]);
  if (relays_signals && r.exit_code > kSignalBase && r.exit_code <= kSignalBase + 64) {
    r.signal = r.exit_code - kSignalBase;
    r.exit_code = -1;
  }
  r.seconds = since(t0);
  return r;
}

std::string find_executable(const std::string& name) {
  auto runnable = [](const fs::path& p) {
    std::error_code ec;
    return access(p.c_str(), X_OK) == 0 && !fs::is_directory(p, ec);
  };
  if (name.find('/') != std::string::npos) return runnable(name) ? fs::absolute(name).string() : "";
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t a = 0; a <= dirs.size();) {
    const size_t b = std::min(dirs.find(':', a), dirs.size());
    const fs::path p = fs::path(dirs.substr(a, b - a).empty() ? "." : dirs.substr(a, b - a)) / name;
    if (runnable(p)) return fs::absolute(p).string();
    a = b + 1;
  }
  return "";
}

// Tasks (processes and threads) the user already runs: not root, RLIMIT_NPROC counts them all, so the limit
// given to a run is that many plus the run's own allowance.
rlim_t tasks_of_user(uid_t uid) {
  rlim_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "status");
    std::string key;
    uid_t real = 0;
    rlim_t threads = 1;
    bool mine = false;
    while (f >> key) {
      if (key == "Uid:" && f >> real) mine = real == uid;
      if (key == "Threads:") f >> threads;
    }
    if (mine) n += threads;
  }
  return n;
}

uid_t next_uid() {
  static std::atomic<uint32_t> counter{0};
  // Mixed with our pid so that two ponder processes at once are unlikely to share uids.
  return uid_t(kUidBase + (uint32_t(getpid()) * 7919u + counter++) % kUidPool);
}

std::vector<std::string> sandbox_env(const std::string& home) {
  return {kPath, "HOME=" + home, "TMPDIR=" + home, "LANG=C.UTF-8", "PYTHONHASHSEED=0", "PYTHONDONTWRITEBYTECODE=1",
          "PYTHONIOENCODING=utf-8", "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1"};
}

// The fresh working directory, removed when the run ends (as root: owned by the run's uid so it can write there).
class WorkDir {
 public:
  std::string path;
  WorkDir(const std::string& code, bool chown_to, uid_t uid) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/ponder-sandbox-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("sandbox: cannot create a directory like " + tmpl + ": " + strerror(errno));
    path = tmpl;
    try {
      fill(code, chown_to, uid);
    } catch (...) {
      remove();
      throw;
    }
  }
  ~WorkDir() { remove(); }

 private:
  void fill(const std::string& code, bool chown_to, uid_t uid) {
    const std::string file = path + "/main.py";
    std::ofstream f(file, std::ios::binary);
    if (!(f << code) || !f.flush()) throw std::runtime_error("sandbox: cannot write " + file);
    f.close();
    if (chown_to && (chown(path.c_str(), uid, uid) != 0 || chown(file.c_str(), uid, uid) != 0))
      throw std::runtime_error("sandbox: cannot hand " + path + " to the sandbox uid: " + strerror(errno));
  }
  void remove() {
    std::error_code ec;
    for (int attempt = 0; attempt < 3 && fs::exists(path, ec); ++attempt) {
      fs::remove_all(path, ec);  // a killed program's last processes may still be writing: try again
      if (ec) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
};

}  // namespace
}  // namespace sandbox

Backend parse_backend(const std::string& name) {
  using namespace sandbox;
  if (name == "auto") return Backend::Auto;
  if (name == "bwrap") return Backend::Bwrap;
  if (name == "unshare") return Backend::Unshare;
  if (name == "rlimits") return Backend::Rlimits;
  throw std::invalid_argument("unknown sandbox '" + name + "' (auto, bwrap, unshare, rlimits)");
}

const char* backend_name(Backend b) {
  using namespace sandbox;
  switch (b) {
    case Backend::Auto: return "auto";
    case Backend::Bwrap: return "bwrap";
    case Backend::Unshare: return "unshare";
    case Backend::Rlimits: return "rlimits";
  }
  return "?";
}

std::string Sandbox::describe() const {
  using namespace sandbox;
  const std::string limits = "rlimits (cpu, address space, processes, file size, no core), wall-clock kill of the "
                             "process group, fresh work dir removed afterwards";
  const std::string uid = geteuid() == 0 ? ", a fresh unprivileged uid per run" : "";
  const std::string fsys = read_only_fs ? "read-only host filesystem" : "host filesystem writable where the uid may write";
  switch (backend) {
    case Backend::Bwrap:
      return "bwrap: new user, network, pid, ipc, uts and mount namespaces, " + fsys + ", private /tmp; " + limits + uid;
    case Backend::Unshare:
      return std::string("unshare: new ") + (geteuid() == 0 ? "" : "user, ") + "network, pid, ipc, uts and mount " +
             "namespaces, " + fsys + ", private /tmp; " + limits + uid;
    default:
      return "rlimits only: NO network or filesystem isolation; " + limits + uid;
  }
}

Result run(const Sandbox& box, const std::string& code, const Limits& lim, const std::vector<std::string>& args) {
  using namespace sandbox;
  ChildPlan p;
  p.drop_uid = geteuid() == 0;
  p.uid = p.drop_uid ? next_uid() : getuid();
  WorkDir dir(code, p.drop_uid, p.uid);
  const bool inside = box.backend != Backend::Rlimits;  // the work dir is /tmp inside the namespaces
  const std::string home = inside ? "/tmp" : dir.path;
  p.limits = true;
  p.cpu_s = rlim_t(std::max(1.0, std::ceil(lim.cpu_s)));
  p.as_bytes = rlim_t(lim.memory_mb) << 20;
  p.nproc = rlim_t(lim.max_procs) + (p.drop_uid ? 0 : tasks_of_user(getuid()));
  p.fsize = rlim_t(lim.file_mb) << 20;
  p.env_s = sandbox_env(home);
  if (box.backend == Backend::Bwrap) {
    p.argv_s = {box.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
                "/proc", "--bind", dir.path, "/tmp", "--size", "67108864", "--tmpfs", "/var/tmp", "--chdir", "/tmp"};
  } else if (box.backend == Backend::Unshare) {
    p.namespaces = true;
    p.user_ns = !p.drop_uid;
    p.uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1";
    p.gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1";
    p.workdir = dir.path;
  }
  if (box.backend == Backend::Unshare) p.cwd = "/tmp";
  if (box.backend == Backend::Rlimits) p.cwd = dir.path;
  for (const std::string& a : {box.python, std::string("-B"), std::string("main.py")}) p.argv_s.push_back(a);
  p.argv_s.insert(p.argv_s.end(), args.begin(), args.end());
  Result r = spawn(p, lim, inside);
  r.workdir = dir.path;
  return r;
}

Result run_command(const std::vector<std::string>& argv, double wall_s) {
  using namespace sandbox;
  if (argv.empty()) throw std::invalid_argument("run_command: no command");
  ChildPlan p;
  p.argv_s = argv;
  p.argv_s[0] = find_executable(argv[0]);
  if (p.argv_s[0].empty()) throw std::runtime_error("'" + argv[0] + "' is not installed (not found on PATH)");
  for (char** e = environ; *e; ++e) p.env_s.emplace_back(*e);
  Limits lim;
  lim.wall_s = wall_s;
  lim.output_bytes = size_t(1) << 30;
  return spawn(p, lim, false);
}

Sandbox choose(Backend want, const std::string& python) {
  using namespace sandbox;
  Sandbox box;
  box.python = find_executable(python);
  if (box.python.empty()) throw std::runtime_error("sandbox: Python interpreter '" + python + "' not found");
  box.bwrap = find_executable("bwrap");
  // The probe also reports whether the host filesystem came out read-only.
  const std::string probe = "import os\nprint('ok', int(bool(os.statvfs('/usr').f_flag & os.ST_RDONLY)))\n";
  std::string why;
  for (Backend b : {Backend::Bwrap, Backend::Unshare, Backend::Rlimits}) {
    if (want != b && !(want == Backend::Auto && b != Backend::Rlimits)) continue;
    if (b == Backend::Bwrap && box.bwrap.empty()) {
      why += "bwrap: not installed (Debian package bubblewrap); ";
      continue;
    }
    box.backend = b;
    Limits lim;
    lim.wall_s = 30;
    const Result r = run(box, probe, lim);
    if (r.passed() && r.out.rfind("ok ", 0) == 0) {
      box.read_only_fs = r.out.compare(0, 4, "ok 1") == 0;
      return box;
    }
    const std::string err = r.err.empty() ? "exit " + std::to_string(r.exit_code) : r.err.substr(0, r.err.find('\n'));
    why += std::string(backend_name(b)) + ": " + err + "; ";
  }
  throw std::runtime_error("sandbox: no isolation works here (" + why.substr(0, why.size() - 2) +
                           "); install bubblewrap (scripts/setup.sh does), or pass --sandbox rlimits to run without "
                           "network or filesystem isolation");
}

}  // namespace ponder::sandbox
