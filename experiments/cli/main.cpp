// `ponder`: the command-line front end. Global options take effect before any subcommand runs, and
// every failure leaves as one line on stderr with exit status 1, so scripts can rely on both.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "experiments/process/bench_util.h"
#include "experiments/process/build_info.h"
#include "experiments/process/command_line.h"
#include "experiments/cli/commands.h"
#include "experiments/model/device.h"
#include "experiments/process/environment.h"
#include "tensor/cpu/runtime.h"
#include "tensor/dist.h"

namespace ponder_main {
namespace {

int fail(std::string message) {
  // Engine messages may span lines; the contract is one line per error.
  for (char& c : message)
    if (c == '\n') c = ' ';
  std::cerr << "ponder: error: " << message << "\n";
  return 1;
}

// Two libraries read settings from the environment when they load, before main, so ponder re-executes itself once
// with them set unless the user set them:
// - How long an idle OpenMP thread spins before it sleeps. libgomp's default (300,000 spins) and
//   OMP_WAIT_POLICY=active steal the cores from anything else running, and a busy neighbour makes them crawl (a
//   comparison took 6.7 s instead of 0.66 s on a loaded 2-core machine); passive waiting (no spin) pays a wake-up
//   at every parallel region, which a model of tiny's size has ~400 of per step. GOMP_SPINCOUNT=3000 keeps the
//   quick hand-over without the crawl: tiny, 2 threads, 25,578 tokens/s against 19,556 passive on a quiet 2-core
//   machine and 10,084 against 9,804 beside one busy process (30,000 spins: 4,876); small 6,613 against 5,967
//   quiet, 3,182 against 3,460 loaded (`ponder bench train --variants dual`, one run each).
// - OpenBLAS runs a CPU model it does not know on its SSE3 kernels (cpu::blas_core_override says when, and what):
//   OPENBLAS_CORETYPE names the kernels this CPU can run.
void reexec_with_library_settings(char** argv) {
  bool changed = false;
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT"))
    changed = setenv("GOMP_SPINCOUNT", "3000", 1) == 0;
  if (const std::string core = ponder::cpu::blas_core_override(); !core.empty())
    changed = setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0 || changed;
  if (changed) execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

// OpenBLAS reserves a buffer of about 128 MiB of address space per thread that calls it, and when an address-space
// limit (`ulimit -v`) refuses one it retries forever: `--threads 32` under a 4 GiB limit hung before any output. A
// thread that calls BLAS also mallocs, which gives it a glibc arena (64 MiB reserved); the kernels that run one head
// per thread (attention, the TTT dual form) make every worker such a thread. So each thread is budgeted 200 MiB and
// the threads are kept to what half the limit holds (the other half: the libraries, CUDA's among them, and the
// data), and the cut is said once.
int threads_within_address_limit(int n) {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return n;
  const double per_thread = 200.0 * 1024 * 1024, limit = double(r.rlim_cur);
  const int cap = std::max(1, int(limit / 2 / per_thread));
  if (n <= cap) return n;
  std::fprintf(stderr, "ponder: %d threads would need more address space than the limit (ulimit -v, %.1f GiB) "
                       "leaves for OpenBLAS's buffers; using %d\n", n, limit / (1024.0 * 1024 * 1024), cap);
  return cap;
}

// Under a launcher with several ranks, the commands that divide their work over them (data-parallel training, the
// cells of a comparison); any other command would only run N times over, racing on its output files.
std::string refused_over_ranks(CLI::App& app, int argc, char** argv) {
  const int ranks = ponder::dist::launcher_size();
  if (ranks <= 1) return "";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() != arg) continue;
      if (arg == "train" || arg == "compare" || arg == "ablate") return "";
      return "ponder " + arg + " runs as one process, but mpirun started " + std::to_string(ranks) + " of them; only "
             "train, compare and ablate divide their work over ranks: run it without mpirun";
    }
  }
  return "";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first word that is not an option (nor --threads' value), when it names no subcommand: "unknown subcommand
// 'trian' (did you mean 'train'?)" instead of CLI11's "A subcommand is required".
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads") ++i;
    if (arg.empty() || arg[0] == '-') continue;
    std::string names, closest;
    size_t best = 3;  // suggest only a near miss
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() == arg) return "";
      names += (names.empty() ? "" : ", ") + sub->get_name();
      if (const size_t d = edit_distance(arg, sub->get_name()); d < best) best = d, closest = sub->get_name();
    }
    return "unknown subcommand '" + arg + "'" + (closest.empty() ? "" : " (did you mean '" + closest + "'?)") +
           "; the subcommands: " + names;
  }
  return "";
}

// An error this rank alone may have: with several ranks running, it is named by rank and ends them all (none may be
// left waiting in a collective).
int fail_here(const std::string& message) {
  using namespace ponder;
  if (dist::size() > 1) {
    fail("rank " + std::to_string(dist::rank()) + " of " + std::to_string(dist::size()) + ": " + message);
    dist::abort(1);
  }
  if (dist::launcher_rank() > 0) return fail("rank " + std::to_string(dist::launcher_rank()) + ": " + message);
  return fail(message);
}

// An error every rank raised alike (dist::SharedError, a bad command line): said once, by rank 0.
int fail_everywhere(const std::string& message) {
  using namespace ponder;
  const bool lead = dist::size() > 1 ? dist::rank() == 0 : dist::launcher_rank() == 0;
  dist::finalize();
  return lead ? fail(message) : 1;
}

}  // namespace
}  // namespace ponder_main

int main(int argc, char** argv) {
  using namespace ponder_main;
  using namespace ponder::cli;
  reexec_with_library_settings(argv);
  set_command_line(argc, argv);
  CLI::App app{"PonderTTT: a C++ research engine for adaptive test-time training", "ponder"};
  app.require_subcommand(1);
  app.fallthrough();  // lets global options follow the subcommand too
  // A function, so CUDA is probed only when --version is asked for.
  app.set_version_flag("--version", [] {
    return std::string("ponder ") + version() + " (commit " + git_commit() + ", " + build_type() + " build)\n" +
           "BLAS: " + machine_info().blas + "\n" + cuda_status() + "\n" + ponder::dist::mpi_status() + "\n" + ponder::dist::nccl_status();
  });
  // OMP_NUM_THREADS far above the machine (a typo, 100000) would start that many threads and record them in every
  // results file: the default is kept to the CPUs there are, and the cut is said.
  const int cpus = int(std::max(1u, std::thread::hardware_concurrency()));
  if (ponder::cpu::num_threads() > cpus) {
    std::fprintf(stderr, "ponder: %d threads asked for by the environment (OMP_NUM_THREADS), this machine has %d CPUs; "
                 "using %d (--threads sets more on purpose)\n", ponder::cpu::num_threads(), cpus, cpus);
    ponder::cpu::set_num_threads(cpus);
  }
  const int default_threads = ponder::cpu::num_threads(), fitting = threads_within_address_limit(default_threads);
  if (fitting < default_threads) ponder::cpu::set_num_threads(fitting);
  // Runs while parsing, before any subcommand callback, so every kernel sees the setting.
  app.add_option_function<int>(
         "--threads", [](const int& n) { ponder::cpu::set_num_threads(threads_within_address_limit(n)); },
         "Threads for OpenMP kernels and OpenBLAS; comparisons and policy training run whole episodes side by side on "
         "them instead (default: OpenMP's, e.g. OMP_NUM_THREADS)")
      ->check(kPositive);
  add_registered_commands(app);
  if (const std::string why = unknown_subcommand(app, argc, argv); !why.empty()) return fail_everywhere(why);
  if (const std::string why = refused_over_ranks(app, argc, argv); !why.empty()) return fail_everywhere(why);
  try {
    check_ponder_environment();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_name() == "RuntimeError") return e.get_exit_code();  // the subcommand has reported already
    if (e.get_exit_code() == 0) return app.exit(e);                 // --help, --version
    return fail_everywhere(std::string(e.what()) + " (see ponder --help)");
  } catch (const std::bad_alloc&) {
    return fail_here("out of memory (std::bad_alloc): what this run allocates does not fit; make model.d, "
                     "model.layers, train.batch_size or train.seq_len smaller, or free memory (finished checkpoints "
                     "and journal cells are kept)");
  } catch (const ponder::dist::SharedError& e) {
    return fail_everywhere(e.what());
  } catch (const std::exception& e) {
    return fail_here(e.what());
  }
  ponder::dist::finalize();
  return 0;
}
