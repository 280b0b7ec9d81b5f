#include "experiments/codebench/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
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
// Host folders where services keep Unix sockets (/run) or people their files: each is covered by an empty tmpfs.
constexpr const char* kHiddenDirs[] = {"/run", "/var/run", "/home", "/root", "/srv", "/mnt", "/media"};

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
  std::string uid_map, gid_map;
  std::string tmp_options, shm_options;  // tmpfs mount options of /tmp and of /dev/shm, /var/tmp (unshare)
  std::vector<std::string> hide;         // folders covered by an empty read-only tmpfs (unshare)
  const std::string* code = nullptr;     // written as /tmp/main.py inside the tmpfs (unshare)
  std::vector<sock_filter> filter;       // seccomp program installed before exec; empty: none (trusted helpers)
  int max_fd = 1024;                     // descriptors below this are closed where close_range(2) is missing

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

// Closes every descriptor but 0, 1 and 2: whatever the caller inherited (a shell's `5>>file`, a secret opened for
// reading, a folder) must not reach the program.
void close_inherited(int max_fd) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  for (int fd = 3; fd < max_fd; ++fd) close(fd);
}

// Writes all of `text` to a new file (async-signal-safe: no allocation).
void write_new_file(const char* path, const std::string& text, mode_t mode) {
  const int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) child_fail("creating main.py in the work dir failed");
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) child_fail("writing main.py into the work dir failed");
    done += size_t(n);
  }
  close(fd);
}

// Covers `dir` with a fresh tmpfs; a folder that exists must be covered, or the run does not start.
void mount_tmpfs(const char* dir, unsigned long flags, const std::string& options, const char* what) {
  struct stat st{};
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return;
  if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | flags, options.c_str()) != 0) child_fail(what);
}

// The unshare backend's filesystem: the host's, read-only where the kernel lets us (mount_setattr, Linux 5.12+),
// with a fresh size- and file-limited tmpfs as /tmp holding main.py, the same for /var/tmp and /dev/shm, and empty
// read-only tmpfs mounts over the folders of kHiddenDirs.
void isolate_filesystem(const ChildPlan& p) {
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) child_fail("making mounts private failed");
#ifdef SYS_mount_setattr
  struct {
    uint64_t attr_set, attr_clr, propagation, userns_fd;
  } attr{0x00000001 /* MOUNT_ATTR_RDONLY */, 0, 0, 0};
  // Best effort: where it fails the filesystem stays as writable as the uid allows, and describe() says so.
  syscall(SYS_mount_setattr, AT_FDCWD, "/", 0x8000 /* AT_RECURSIVE */, &attr, sizeof attr);
#endif
  for (const std::string& dir : p.hide) mount_tmpfs(dir.c_str(), MS_RDONLY | MS_NOEXEC, "size=4k,mode=0755", "hiding a host folder failed");
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, p.tmp_options.c_str()) != 0) child_fail("mounting the work dir's tmpfs failed");
  write_new_file("/tmp/main.py", *p.code, 0444);
  mount_tmpfs("/var/tmp", 0, p.shm_options, "mounting a tmpfs on /var/tmp failed");
  mount_tmpfs("/dev/shm", 0, p.shm_options, "mounting a tmpfs on /dev/shm failed");
}

// no_new_privs, then the seccomp program: from here on no socket(2) of the AF_UNIX family and no io_uring.
void install_filter(const ChildPlan& p) {
  if (p.filter.empty()) return;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child_fail("prctl(PR_SET_NO_NEW_PRIVS) failed");
  sock_fprog prog{static_cast<unsigned short>(p.filter.size()), const_cast<sock_filter*>(p.filter.data())};
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) child_fail("installing the seccomp filter failed");
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

// The standard streams: /dev/null, the two pipes. Each is moved above 2 first, so a pipe that happens to be
// descriptor 1 or 2 (a parent started with a closed stream) is still dup2'ed and loses O_CLOEXEC.
void setup_stdio(int out_w, int err_w) {
  const int null_in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int in = fcntl(null_in, F_DUPFD_CLOEXEC, 3), out = fcntl(out_w, F_DUPFD_CLOEXEC, 3),
            err = fcntl(err_w, F_DUPFD_CLOEXEC, 3);
  if (null_in < 0 || in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
    child_fail("stdio setup failed");
}

[[noreturn]] void child_main(const ChildPlan& p, int out_w, int err_w) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setup_stdio(out_w, err_w);
  close_inherited(p.max_fd);
  setsid();  // a process group of its own: the wall clock kills it whole
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (p.limits) apply_limits(p);  // before any user namespace, whose process limit is taken from ours
  if (p.namespaces) enter_namespaces(p);
  if (p.drop_uid) {
    if (setgroups(0, nullptr) != 0 || setgid(p.uid) != 0 || setuid(p.uid) != 0) child_fail("dropping to the sandbox uid failed");
  }
  if (!p.cwd.empty() && chdir(p.cwd.c_str()) != 0) child_fail("chdir into the work dir failed");
  install_filter(p);
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
  const long open_max = sysconf(_SC_OPEN_MAX);
  plan.max_fd = int(std::clamp(open_max, 1024L, 1L << 20));
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

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "sandbox: no seccomp architecture for this target"
#endif

// The seccomp program: socket(AF_UNIX, ...) and datagram or seqpacket socketpairs (which sendto(2) could aim at a
// host socket's path) fail with EACCES; io_uring_setup (io_uring makes sockets without socket(2)) with ENOSYS;
// another system-call ABI (32-bit int 0x80, x32) kills the process, so socketcall(2) cannot go around the rule.
std::vector<sock_filter> socket_filter() {
  std::vector<sock_filter> f;
  auto op = [&](uint16_t code, uint32_t k) { f.push_back(BPF_STMT(code, k)); };
  auto jump = [&](uint16_t cmp, uint32_t k, uint8_t jt, uint8_t jf) { f.push_back(BPF_JUMP(BPF_JMP | cmp | BPF_K, k, jt, jf)); };
  const uint16_t load = BPF_LD | BPF_W | BPF_ABS, ret = BPF_RET | BPF_K;
  const uint32_t allow = SECCOMP_RET_ALLOW, kill = SECCOMP_RET_KILL_PROCESS, refuse = SECCOMP_RET_ERRNO | EACCES;
  op(load, offsetof(seccomp_data, arch));
  jump(BPF_JEQ, kAuditArch, 1, 0);
  op(ret, kill);
  op(load, offsetof(seccomp_data, nr));
#if defined(__x86_64__)
  jump(BPF_JGE, 0x40000000u /* __X32_SYSCALL_BIT */, 0, 1);
  op(ret, kill);
#endif
  jump(BPF_JEQ, SYS_io_uring_setup, 0, 1);
  op(ret, SECCOMP_RET_ERRNO | ENOSYS);
  jump(BPF_JEQ, SYS_socket, 0, 4);  // not socket(2): on to socketpair
  op(load, offsetof(seccomp_data, args[0]));  // the domain (an int: the low word on little-endian targets)
  jump(BPF_JEQ, AF_UNIX, 0, 1);
  op(ret, refuse);
  op(ret, allow);
  jump(BPF_JEQ, SYS_socketpair, 0, 5);  // not socketpair(2): allowed
  op(load, offsetof(seccomp_data, args[1]));  // the type, with SOCK_NONBLOCK / SOCK_CLOEXEC in its high bits
  op(BPF_ALU | BPF_AND | BPF_K, 0xf);
  jump(BPF_JEQ, SOCK_STREAM, 0, 1);
  op(ret, allow);  // a connected stream pair (asyncio's self-pipe) reaches nothing outside
  op(ret, refuse);
  op(ret, allow);
  return f;
}

bool under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

// The folders of kHiddenDirs to cover (real folders, not symbolic links such as Debian's /var/run -> /run, which the
// folder it points to covers), except those holding the interpreter, given or resolved, which go to `visible`.
std::vector<std::string> folders_to_hide(const std::string& python, std::vector<std::string>& visible) {
  std::error_code ec;
  const std::string resolved = fs::canonical(python, ec).string();
  std::vector<std::string> hide;
  for (const char* dir : kHiddenDirs) {
    if (!fs::is_directory(fs::symlink_status(dir, ec))) continue;
    if (under(python, dir) || under(resolved, dir)) visible.push_back(dir);
    else hide.push_back(dir);
  }
  return hide;
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
                             "process group, inherited descriptors closed, no AF_UNIX sockets (seccomp)";
  const std::string uid = geteuid() == 0 ? ", a fresh unprivileged uid per run" : "";
  const std::string fsys = read_only_fs ? "read-only host filesystem" : "host filesystem writable where the uid may write";
  std::string hid, shown;
  for (const std::string& d : hidden) hid += (hid.empty() ? "" : " ") + d;
  for (const std::string& d : visible) shown += " " + d;
  const std::string tmpfs = ", size-limited tmpfs as /tmp, /dev/shm, /var/tmp" +
                            std::string(backend == Backend::Unshare ? " (bytes and files)" : " (bytes)") +
                            (hid.empty() ? "" : ", empty " + hid) + (shown.empty() ? "" : ", left visible for the interpreter:" + shown);
  switch (backend) {
    case Backend::Bwrap:
      return "bwrap: new user, network, pid, ipc, uts and mount namespaces, " + fsys + tmpfs + "; " + limits + uid;
    case Backend::Unshare:
      return std::string("unshare: new ") + (geteuid() == 0 ? "" : "user, ") + "network, pid, ipc, uts and mount " +
             "namespaces, " + fsys + tmpfs + "; " + limits + uid;
    default:
      return "rlimits only: NO network or filesystem isolation, a work dir on the host disk bounded only per file; " +
             limits + ", work dir removed afterwards" + uid;
  }
}

namespace sandbox {
namespace {

std::string tmpfs_options(int64_t mb, int64_t files, const std::string& mode_uid) {
  return "size=" + std::to_string(mb) + "m,nr_inodes=" + std::to_string(files) + "," + mode_uid;
}

// bwrap's command line: the host read-only, a private read-only /dev (its tmpfs has no size limit) and /proc, empty read-only tmpfs mounts over the hidden
// folders, size-limited tmpfs mounts as /tmp (main.py bound into it read-only), /dev/shm and /var/tmp.
std::vector<std::string> bwrap_argv(const Sandbox& box, const Limits& lim, const std::string& main_py) {
  const std::string disk = std::to_string(lim.disk_mb << 20), shm = std::to_string(lim.shm_mb << 20);
  std::vector<std::string> a = {box.bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
                                "--remount-ro", "/dev", "--size", shm, "--tmpfs", "/dev/shm", "--proc", "/proc"};
  for (const std::string& dir : box.hidden)
    for (const char* x : {"--size", "4096", "--tmpfs", dir.c_str(), "--remount-ro", dir.c_str()}) a.push_back(x);
  for (const char* x : {"--size", disk.c_str(), "--tmpfs", "/tmp", "--ro-bind", main_py.c_str(), "/tmp/main.py",
                               "--size", shm.c_str(), "--tmpfs", "/var/tmp", "--chdir", "/tmp"})
    a.push_back(x);
  return a;
}

}  // namespace
}  // namespace sandbox

Result run(const Sandbox& box, const std::string& code, const Limits& lim, const std::vector<std::string>& args) {
  using namespace sandbox;
  ChildPlan p;
  p.drop_uid = geteuid() == 0;
  p.uid = p.drop_uid ? next_uid() : getuid();
  // bwrap binds main.py from a host folder; rlimits runs there; unshare writes main.py into its own tmpfs.
  std::optional<WorkDir> dir;
  if (box.backend != Backend::Unshare) dir.emplace(code, p.drop_uid, p.uid);
  const bool inside = box.backend != Backend::Rlimits;  // the work dir is /tmp inside the namespaces
  const std::string home = inside ? "/tmp" : dir->path;
  p.limits = true;
  p.cpu_s = rlim_t(std::max(1.0, std::ceil(lim.cpu_s)));
  p.as_bytes = rlim_t(lim.memory_mb) << 20;
  p.nproc = rlim_t(lim.max_procs) + (p.drop_uid ? 0 : tasks_of_user(getuid()));
  p.fsize = rlim_t(lim.file_mb) << 20;
  p.env_s = sandbox_env(home);
  p.filter = socket_filter();
  if (box.backend == Backend::Bwrap) p.argv_s = bwrap_argv(box, lim, dir->path + "/main.py");
  if (box.backend == Backend::Unshare) {
    p.namespaces = true;
    p.user_ns = !p.drop_uid;
    p.uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1";
    p.gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1";
    const std::string owner = std::to_string(p.drop_uid ? p.uid : getuid());
    p.tmp_options = tmpfs_options(lim.disk_mb, lim.max_files, "mode=0700,uid=" + owner + ",gid=" + owner);
    p.shm_options = tmpfs_options(lim.shm_mb, lim.max_files, "mode=1777");
    p.hide = box.hidden;
    p.code = &code;
    p.cwd = "/tmp";
  }
  if (box.backend == Backend::Rlimits) p.cwd = dir->path;
  for (const std::string& a : {box.python, std::string("-B"), std::string("main.py")}) p.argv_s.push_back(a);
  p.argv_s.insert(p.argv_s.end(), args.begin(), args.end());
  Result r = spawn(p, lim, inside);
  if (dir) r.workdir = dir->path;
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

namespace sandbox {
namespace {

// The probe also reports whether the host filesystem came out read-only.
constexpr const char* kProbe = "import os\nprint('ok', int(bool(os.statvfs('/usr').f_flag & os.ST_RDONLY)))\n";

bool probe_passed(const Result& r) { return r.passed() && r.out.rfind("ok ", 0) == 0; }

// How a run that should have printed "ok" ended, in a few words.
std::string how_it_failed(const Result& r) {
  if (r.timed_out) return "killed at the wall clock after " + std::to_string(int(r.seconds)) + " s";
  if (r.signal) return "killed by signal " + std::to_string(r.signal);
  if (!r.err.empty()) return r.err.substr(0, r.err.find('\n'));
  return "exit " + std::to_string(r.exit_code) + (r.out.empty() ? ", no output" : ", printed '" + r.out.substr(0, 40) + "'");
}

}  // namespace
}  // namespace sandbox

Sandbox choose(Backend want, const std::string& python) {
  using namespace sandbox;
  Sandbox box;
  box.python = find_executable(python);
  if (box.python.empty()) throw std::runtime_error("sandbox: Python interpreter '" + python + "' not found");
  box.bwrap = find_executable("bwrap");
  box.hidden = folders_to_hide(box.python, box.visible);
  Limits lim;
  lim.wall_s = 30;
  // The interpreter first, with the limits alone (the probe is our own program): an interpreter that cannot run it
  // is named as the problem, not the isolations that would all fail with it.
  box.backend = Backend::Rlimits;
  if (const Result r = run(box, kProbe, lim); !probe_passed(r))
    throw std::runtime_error("sandbox: '" + box.python + "' does not run a one-line Python program (" + how_it_failed(r) +
                             "); is it a Python 3 interpreter? (--python)");
  // Auto: unshare where it also makes the host read-only (it caps the files of its tmpfs mounts, which bwrap
  // cannot), else bwrap, else unshare with a writable host.
  std::string why;
  std::optional<Sandbox> writable_unshare;
  for (Backend b : {Backend::Unshare, Backend::Bwrap, Backend::Rlimits}) {
    if (want != b && !(want == Backend::Auto && b != Backend::Rlimits)) continue;
    if (b == Backend::Bwrap && box.bwrap.empty()) {
      why += "bwrap: not installed (Debian package bubblewrap); ";
      continue;
    }
    box.backend = b;
    const Result r = run(box, kProbe, lim);
    if (probe_passed(r)) {
      box.read_only_fs = r.out.compare(0, 4, "ok 1") == 0;
      if (box.read_only_fs || want != Backend::Auto || b != Backend::Unshare) return box;
      writable_unshare = box;
      continue;
    }
    why += std::string(backend_name(b)) + ": " + how_it_failed(r) + "; ";
  }
  if (writable_unshare) return *writable_unshare;
  throw std::runtime_error("sandbox: no isolation works here (" + why.substr(0, why.size() - 2) +
                           "); install bubblewrap (scripts/setup.sh does), or pass --sandbox rlimits to run without "
                           "network or filesystem isolation");
}

void check_limits(const Sandbox& box, const Limits& limits) {
  using namespace sandbox;
  const Result r = run(box, kProbe, limits);
  if (probe_passed(r)) return;
  char what[160];
  std::snprintf(what, sizeof what, "memory %lld MiB, %lld processes, %.3g s of CPU, %.3g s wall clock",
                (long long)limits.memory_mb, (long long)limits.max_procs, limits.cpu_s, limits.wall_s);
  throw std::runtime_error(std::string("sandbox: the interpreter cannot start under the limits asked for (") + what +
                           "): " + how_it_failed(r) + "; raise the limit that is too small");
}

}  // namespace ponder::sandbox
