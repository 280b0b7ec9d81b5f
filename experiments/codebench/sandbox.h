// Runs untrusted Python programs (benchmark solutions, model samples) one process per program, isolated:
// no network, a CPU-time, memory, process-count and output limit, a wall clock after which the whole process
// tree is killed, and a fresh size-limited working directory that is gone afterwards.
//
// Two isolations give that (Backend::Auto: unshare where it makes the host read-only, else bwrap, else unshare):
//   bwrap    bubblewrap (Debian `bubblewrap`): new user, network, pid, ipc, uts and mount namespaces, the host
//            filesystem read-only, a size-limited tmpfs as /tmp (the working directory, main.py bound read-only into
//            it), /dev/shm and /var/tmp, and a private /dev.
//   unshare  the same namespaces made here with unshare(2), the filesystem made read-only with mount_setattr(2)
//            where the kernel allows it, the tmpfs mounts also capped in files, for machines where bwrap is missing
//            or cannot create its namespaces.
// In both, folders where host services keep their Unix sockets or users their files (/run, /var/run, /home,
// /root, /srv, /mnt, /media) are covered by empty read-only tmpfs mounts, and a seccomp filter refuses socket(2) for
// AF_UNIX, datagram socketpairs and io_uring, so no host Unix socket can be reached from anywhere in the tree.
// Every mode closes all inherited file descriptors but stdin, stdout and stderr before the program starts, runs it
// under rlimits (RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC, RLIMIT_FSIZE, no core files) in a new session, with
// no_new_privs. As root, each run also gets its own unprivileged uid: the kernel does not apply RLIMIT_NPROC to root,
// so without it a fork bomb would not be stopped. Backend::Rlimits (only when asked for) is the limits, the closed
// descriptors and the seccomp filter alone: no network or filesystem isolation, a work folder on the host disk, and
// describe() says so.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ponder::sandbox {

enum class Backend { Auto, Bwrap, Unshare, Rlimits };
Backend parse_backend(const std::string& name);  // auto | bwrap | unshare | rlimits; throws naming the value
const char* backend_name(Backend b);

struct Limits {
  double wall_s = 10;          // wall clock: then the process group (and its pid namespace) is killed
  double cpu_s = 10;           // RLIMIT_CPU of each process: SIGXCPU, then SIGKILL a second later
  int64_t memory_mb = 1024;    // RLIMIT_AS of each process
  int64_t max_procs = 64;      // processes and threads of the program together (RLIMIT_NPROC)
  int64_t file_mb = 64;        // largest file the program may write (RLIMIT_FSIZE)
  size_t output_bytes = 65536; // stdout and stderr each keep this many bytes; the rest is read and dropped
  int64_t disk_mb = 256;       // size of the working directory's tmpfs (/tmp inside; bwrap and unshare)
  int64_t shm_mb = 64;         // size of each of /dev/shm and /var/tmp (tmpfs; bwrap and unshare)
  int64_t max_files = 16384;   // files and folders each of those tmpfs may hold (unshare; bwrap cannot set it)
};

struct Result {
  int exit_code = -1;       // the program's exit status when it exited; -1 when a signal ended it
  int signal = 0;           // the signal that ended it (0: none); SIGXCPU / SIGKILL for the CPU limit
  bool timed_out = false;   // the wall clock ran out and the sandbox killed it
  std::string out, err;     // captured, at most Limits::output_bytes each
  bool out_truncated = false, err_truncated = false;
  double seconds = 0;       // wall clock, sandbox start-up included
  std::string workdir;      // the host directory that held main.py (removed by now); empty when there was none
  bool passed() const { return !timed_out && signal == 0 && exit_code == 0; }
};

// An isolation that has been checked to work, with the interpreter it runs.
struct Sandbox {
  Backend backend = Backend::Auto;
  std::string python;  // absolute path of the interpreter
  std::string bwrap;   // absolute path of bwrap (Backend::Bwrap)
  bool read_only_fs = false;  // the host filesystem is read-only inside
  std::vector<std::string> hidden;   // host folders covered by an empty tmpfs inside
  std::vector<std::string> visible;  // folders of that list left visible because the interpreter lies in them
  std::string describe() const;  // one line: what isolates the program
};

// Resolves `python` (a name on PATH or a path), checks that it runs a one-line program, and sets up the isolation
// asked for, trying that program through it (Auto: the order above). Throws saying what failed when the isolation asked for cannot run here.
Sandbox choose(Backend want, const std::string& python);

// Runs the probe program under `limits`; throws naming the limits when the interpreter cannot start under them (a
// --memory-mb too small for the dynamic loader reads as a failed program otherwise).
void check_limits(const Sandbox& box, const Limits& limits);

// Runs `code` as the program file main.py in its working directory, with `args` after it. Never throws for what the
// program does; throws only when the sandbox itself cannot start (no temporary directory, fork failing).
Result run(const Sandbox& box, const std::string& code, const Limits& limits, const std::vector<std::string>& args = {});

// A trusted helper command (not sandboxed): its exit status, stdout and stderr, killed after `wall_s`.
Result run_command(const std::vector<std::string>& argv, double wall_s);

}  // namespace ponder::sandbox
