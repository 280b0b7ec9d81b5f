// `ponder codebench`: HumanEval, MBPP and ClassEval programs run in a sandbox (experiments/codebench/sandbox.h), one process
// each: the canonical solutions (do they all pass here?), deterministic mutants of them (do the tests reject wrong
// code?), or samples from a checkpoint (pass@k). `--program FILE` runs one file in the sandbox and reports how it ended.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "experiments/codebench/codebench.h"
#include "experiments/codebench/mutate.h"
#include "experiments/codebench/sample.h"
#include "experiments/codebench/tasks.h"
#include "experiments/cli/commands.h"

namespace ponder::cli {
namespace cmd_codebench {
namespace {

using nlohmann::ordered_json;
using namespace ponder::codebench;

constexpr const char* kSmallModelNote =
    "models of this size score near 0 pass@k; the harness exists for larger checkpoints";

struct Args {
  std::string bench, solutions, mutation = "auto", bench_dir, sandbox = "auto", python, program;
  std::string checkpoint, ks;
  bool json = false;
  int64_t limit = 0;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency()));
  double timeout_s = 10, cpu_s = 0;
  int64_t memory_mb = 1024, max_procs = 64, disk_mb = 256, shm_mb = 64;
  SampleOptions sampling;
};

// Program output and model samples need not be UTF-8: invalid bytes print as U+FFFD instead of failing the dump.
void print_json(const ordered_json& j) {
  std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

sandbox::Limits limits_of(const Args& a) {
  sandbox::Limits l;
  l.wall_s = a.timeout_s;
  l.cpu_s = a.cpu_s > 0 ? a.cpu_s : a.timeout_s;
  l.memory_mb = a.memory_mb;
  l.max_procs = a.max_procs;
  l.disk_mb = a.disk_mb;
  l.shm_mb = a.shm_mb;
  return l;
}

ordered_json limits_json(const sandbox::Limits& l) {
  return {{"timeout_s", l.wall_s}, {"cpu_s", l.cpu_s}, {"memory_mb", l.memory_mb}, {"max_procs", l.max_procs},
          {"file_mb", l.file_mb}, {"output_bytes", l.output_bytes}, {"disk_mb", l.disk_mb}, {"shm_mb", l.shm_mb},
          {"max_files", l.max_files}};
}

// The --program file (or /dev/stdin); a folder is refused: it opens and reads as an empty program that passes.
std::string read_program(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) throw std::runtime_error("--program " + path + ": no such file");
  if (std::filesystem::is_directory(st)) throw std::runtime_error("--program " + path + " is a folder, not a Python file");
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  if (f) ss << f.rdbuf();
  if (!f.is_open() || f.bad()) throw std::runtime_error("cannot read --program " + path);
  return ss.str();
}

sandbox::Sandbox open_sandbox(const Args& a) {
  std::string python = a.python;
  if (python.empty()) python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  const sandbox::Sandbox box = sandbox::choose(sandbox::parse_backend(a.sandbox), python);
  sandbox::check_limits(box, limits_of(a));  // a --memory-mb too small to start Python is named here, not per program
  return box;
}

// --program: one file through the sandbox; exits 1 unless it passed.
void run_one_program(const Args& a) {
  const std::string code = read_program(a.program);
  const sandbox::Sandbox box = open_sandbox(a);
  const Outcome o = classify(sandbox::run(box, code, limits_of(a)));
  const sandbox::Result& r = o.result;
  ordered_json j = {{"program", a.program}, {"passed", r.passed()}, {"category", o.category}, {"reason", o.reason},
                    {"exit_code", r.exit_code}, {"signal", r.signal}, {"timed_out", r.timed_out},
                    {"seconds", r.seconds}, {"stdout", r.out}, {"stderr", r.err}, {"stdout_truncated", r.out_truncated},
                    {"stderr_truncated", r.err_truncated}, {"workdir", r.workdir},
                    {"workdir_removed", !std::filesystem::exists(r.workdir)}, {"sandbox", box.describe()},
                    {"limits", limits_json(limits_of(a))}};
  if (a.json) print_json(j);
  else std::printf("%s%s%s%s%s: %s%s%s (%.2f s)\nsandbox: %s\n", printable(r.out).c_str(),
                   r.out_truncated ? "\n[stdout truncated]\n" : "", printable(r.err).c_str(),
                   r.err_truncated ? "\n[stderr truncated]\n" : "", a.program.c_str(), o.category.c_str(),
                   o.reason.empty() ? "" : ": ", printable(o.reason).c_str(), r.seconds, box.describe().c_str());
  if (!r.passed()) throw CLI::RuntimeError(1);
}

std::vector<Task> tasks_of(const Args& a) {
  std::vector<Task> tasks = load_tasks(parse_bench(a.bench), a.bench_dir.empty() ? default_bench_dir() : a.bench_dir);
  if (a.limit > 0 && size_t(a.limit) < tasks.size()) tasks.resize(size_t(a.limit));
  return tasks;
}

ordered_json failure_json(const Task& t, const Outcome& o) {
  return {{"task_id", t.id}, {"category", o.category}, {"reason", o.reason}, {"seconds", o.result.seconds}};
}

ordered_json summary_json(const Args& a, const sandbox::Sandbox& box, size_t problems, size_t passed) {
  return {{"bench", a.bench}, {"solutions", a.solutions}, {"problems", problems}, {"passed", passed},
          {"pass_at_1", problems ? double(passed) / double(problems) : 0.0}, {"failed", ordered_json::array()},
          {"sandbox", box.describe()}, {"limits", limits_json(limits_of(a))}};
}

void print_failures(const ordered_json& failures, const char* title) {
  if (failures.empty()) return;
  std::printf("%s\n", title);
  for (const auto& f : failures)
    std::printf("  %-16s %-15s %s\n", f["task_id"].get<std::string>().c_str(), f["category"].get<std::string>().c_str(),
                printable(f["reason"].get<std::string>()).c_str());
}

void run_canonical(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Task> tasks = tasks_of(a);
  const sandbox::Sandbox box = open_sandbox(a);
  std::vector<std::string> programs;
  for (const Task& t : tasks) programs.push_back(t.program(t.solution));
  const std::vector<Outcome> out = run_programs(box, programs, limits_of(a), a.jobs, a.bench + " canonical");
  ordered_json failures = ordered_json::array();
  for (size_t i = 0; i < tasks.size(); ++i)
    if (out[i].category != "passed") failures.push_back(failure_json(tasks[i], out[i]));
  ordered_json j = summary_json(a, box, tasks.size(), tasks.size() - failures.size());
  for (const auto& f : failures) j["failed"].push_back(f["task_id"]);
  j["failures"] = failures;
  j["seconds"] = seconds_since(t0);
  if (a.json) {
    print_json(j);
    return;
  }
  std::printf("codebench %s, canonical solutions: %zu problems\nsandbox: %s\n", a.bench.c_str(), tasks.size(),
              box.describe().c_str());
  print_failures(failures, "failed:");
  std::printf("%zu/%zu passed (pass@1 %.3f) in %.1f s\n", tasks.size() - failures.size(), tasks.size(),
              j["pass_at_1"].get<double>(), j["seconds"].get<double>());
}

// What became of one mutant: killed (it fails, the canonical passes), survived (it passes), inconclusive (both
// fail: the canonical cannot pass here, so the mutant's failure says nothing), unmutated (no operator had a site).
std::string mutant_outcome(const Mutant& m, const Outcome& mutant, const Outcome& canonical) {
  if (m.op.empty()) return "unmutated";
  if (mutant.category == "passed") return "survived";
  return canonical.category == "passed" ? "killed" : "inconclusive";
}

void print_mutation_text(const Args& a, const ordered_json& j, const sandbox::Sandbox& box) {
  std::printf("codebench %s, mutated solutions (operators tried in order:", a.bench.c_str());
  for (const auto& op : j["mutation_order"]) std::printf(" %s", op.get<std::string>().c_str());
  std::printf("): %zu problems\nsandbox: %s\noperators used:", j["problems"].get<size_t>(), box.describe().c_str());
  for (const auto& [op, n] : j["operators"].items()) std::printf(" %s %d", op.c_str(), n.get<int>());
  std::printf("\n");
  std::printf("survivors (mutants that passed):%s\n", j["survivors"].empty() ? " none" : "");
  for (const auto& s : j["survivors"])
    std::printf("  %-16s %s at %d sites\n", s["task_id"].get<std::string>().c_str(),
                s["operator"].get<std::string>().c_str(), s["sites"].get<int>());
  print_failures(j["inconclusive"], "inconclusive (the canonical solution fails here too):");
  std::printf("%zu mutants: %d survived, %d killed, %zu inconclusive, %zu without a site, in %.1f s\n",
              j["problems"].get<size_t>(), j["survived"].get<int>(), j["killed"].get<int>(), j["inconclusive"].size(),
              j["unmutated"].size(), j["seconds"].get<double>());
}

void run_mutated(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Task> tasks = tasks_of(a);
  const std::vector<std::string> order = a.mutation == "auto" ? mutation_operators() : std::vector<std::string>{a.mutation};
  std::vector<Mutant> mutants;
  std::vector<std::string> programs;  // the mutants, then the canonical solutions they are judged against
  for (const Task& t : tasks) mutants.push_back(mutate(t.solution, order));
  for (size_t i = 0; i < tasks.size(); ++i) programs.push_back(tasks[i].program(mutants[i].source));
  for (const Task& t : tasks) programs.push_back(t.program(t.solution));
  const sandbox::Sandbox box = open_sandbox(a);
  const std::vector<Outcome> out = run_programs(box, programs, limits_of(a), a.jobs, a.bench + " mutated + canonical");
  ordered_json j = summary_json(a, box, tasks.size(), 0);
  j["mutation_order"] = order;
  j["operators"] = ordered_json::object();
  for (const char* key : {"survivors", "inconclusive", "unmutated", "mutants"}) j[key] = ordered_json::array();
  int survived = 0, killed = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Outcome &m = out[i], &c = out[tasks.size() + i];
    const std::string what = mutant_outcome(mutants[i], m, c);
    survived += what == "survived";
    killed += what == "killed";
    if (what != "unmutated") j["operators"][mutants[i].op] = j["operators"].value(mutants[i].op, 0) + 1;
    if (what == "survived") j["survivors"].push_back({{"task_id", tasks[i].id}, {"operator", mutants[i].op}, {"sites", mutants[i].sites}});
    if (what == "inconclusive") j["inconclusive"].push_back(failure_json(tasks[i], c));
    if (what == "unmutated") j["unmutated"].push_back(tasks[i].id);
    if (what == "killed" || what == "inconclusive") j["failed"].push_back(tasks[i].id);
    j["mutants"].push_back({{"task_id", tasks[i].id}, {"operator", mutants[i].op}, {"sites", mutants[i].sites},
                            {"outcome", what}, {"category", m.category}, {"reason", m.reason}});
  }
  j["passed"] = survived;
  j["pass_at_1"] = tasks.empty() ? 0.0 : double(survived) / double(tasks.size());
  j["survived"] = survived;
  j["killed"] = killed;
  j["seconds"] = seconds_since(t0);
  if (a.json) print_json(j);
  else print_mutation_text(a, j, box);
}

std::vector<int> parse_ks(const Args& a) {
  std::vector<int> ks;
  std::stringstream in(a.ks.empty() ? "1,10" : a.ks);
  for (std::string item; std::getline(in, item, ',');) {
    int k = 0;
    if (!CLI::detail::lexical_cast(item, k) || k < 1) throw std::invalid_argument("--k: '" + item + "' is not a positive integer");
    if (k > a.sampling.samples) {
      if (a.ks.empty()) continue;  // the default list keeps only what --samples allows
      throw std::invalid_argument("--k " + item + " exceeds --samples " + std::to_string(a.sampling.samples));
    }
    ks.push_back(k);
  }
  if (ks.empty()) throw std::invalid_argument("--k lists no k");
  return ks;
}

ordered_json sampling_json(const Args& a, const TrainedModel& m, const std::vector<Task>& tasks,
                           const std::vector<std::vector<Outcome>>& outcomes, const std::vector<std::vector<std::string>>& completions) {
  const std::vector<int> ks = parse_ks(a);
  ordered_json pass = ordered_json::object(), per = ordered_json::array(), failed = ordered_json::array();
  std::map<std::string, int> categories;
  size_t solved = 0;
  double mean_fraction = 0;  // pass@1 whatever --k lists
  for (const auto& o : outcomes) {
    int c = 0;
    for (const Outcome& x : o) c += x.category == "passed";
    mean_fraction += o.empty() ? 0.0 : double(c) / double(o.size()) / double(outcomes.size());
  }
  for (int k : ks) {
    double sum = 0;
    for (const auto& o : outcomes) {
      int c = 0;
      for (const Outcome& x : o) c += x.category == "passed";
      sum += pass_at_k(int(o.size()), c, k);
    }
    pass[std::to_string(k)] = tasks.empty() ? 0.0 : sum / double(tasks.size());
  }
  for (size_t p = 0; p < tasks.size(); ++p) {
    int c = 0;
    for (const Outcome& x : outcomes[p]) {
      c += x.category == "passed";
      ++categories[x.category];
    }
    solved += c > 0;
    if (c == 0) failed.push_back(tasks[p].id);
    per.push_back({{"task_id", tasks[p].id}, {"correct", c}, {"samples", outcomes[p].size()},
                   {"first_completion", completions[p].empty() ? "" : completions[p][0]},
                   {"first_outcome", outcomes[p].empty() ? "" : outcomes[p][0].category + (outcomes[p][0].reason.empty() ? "" : ": " + outcomes[p][0].reason)}});
  }
  const SampleOptions& s = a.sampling;
  return {{"bench", a.bench}, {"solutions", "checkpoint"}, {"checkpoint", a.checkpoint}, {"step", m.step},
          {"parameters", m.model.num_parameters()}, {"samples", s.samples}, {"temperature", s.temperature},
          {"top_p", s.top_p}, {"max_new_bytes", s.max_new_bytes}, {"seed", s.seed}, {"problems", tasks.size()},
          {"passed", solved}, {"pass_at_1", mean_fraction}, {"pass_at_k", pass},
          {"failed", failed}, {"categories", categories}, {"per_problem", per}, {"note", kSmallModelNote}};
}

void run_sampling(const Args& a) {
  const auto t0 = std::chrono::steady_clock::now();
  parse_ks(a);  // reject a bad --k before the slow part
  const std::vector<Task> tasks = tasks_of(a);
  const sandbox::Sandbox box = open_sandbox(a);
  const TrainedModel m = load_trained(ttt::load_checkpoint(a.checkpoint), a.checkpoint);
  const auto completions = sample_completions(m, tasks, a.sampling);
  std::vector<std::string> programs;
  for (size_t p = 0; p < tasks.size(); ++p)
    for (const std::string& c : completions[p]) programs.push_back(tasks[p].sample_program(c));
  const std::vector<Outcome> flat = run_programs(box, programs, limits_of(a), a.jobs, a.bench + " samples");
  std::vector<std::vector<Outcome>> outcomes(tasks.size());
  for (size_t p = 0, i = 0; p < tasks.size(); ++p)
    for (size_t s = 0; s < completions[p].size(); ++s) outcomes[p].push_back(flat[i++]);
  ordered_json j = sampling_json(a, m, tasks, outcomes, completions);
  j["sandbox"] = box.describe();
  j["limits"] = limits_json(limits_of(a));
  j["seconds"] = seconds_since(t0);
  if (a.json) {
    print_json(j);
    return;
  }
  std::printf("codebench %s, %d samples per problem from %s (step %lld, %lld parameters): %zu problems\nsandbox: %s\n",
              a.bench.c_str(), a.sampling.samples, a.checkpoint.c_str(), (long long)m.step,
              (long long)m.model.num_parameters(), tasks.size(), box.describe().c_str());
  for (const auto& [k, v] : j["pass_at_k"].items()) std::printf("pass@%s %.4f\n", k.c_str(), v.get<double>());
  std::printf("%zu of %zu problems solved by at least one sample, in %.1f s\nnote: %s\n", j["passed"].get<size_t>(),
              tasks.size(), j["seconds"].get<double>(), kSmallModelNote);
}

void run_codebench(const Args& a) {
  if (!a.program.empty()) return run_one_program(a);
  if (a.bench.empty()) throw std::invalid_argument("codebench: --bench is required (humaneval, mbpp, classeval)");
  parse_bench(a.bench);
  if (!a.checkpoint.empty() && !a.solutions.empty())
    throw std::invalid_argument("codebench: --solutions and --checkpoint exclude each other (a checkpoint's samples are the solutions)");
  if (!a.checkpoint.empty()) return run_sampling(a);
  Args run = a;
  if (run.solutions.empty()) run.solutions = "canonical";
  if (run.solutions == "mutated") return run_mutated(run);
  run_canonical(run);
}

void add_sampling_options(CLI::App* sub, Args& a) {
  sub->add_option("--checkpoint", a.checkpoint, "Sample completions from this checkpoint and report pass@k");
  sub->add_option("--samples", a.sampling.samples, "Completions per problem (--checkpoint)")->check(kPositive)->capture_default_str();
  sub->add_option("--temperature", a.sampling.temperature, "Sampling temperature->capture_default_str(); 0 = greedy")
      ->check(kNonNegative);
  sub->add_option("--top-p", a.sampling.top_p, "Nucleus sampling: keep the likeliest bytes holding this much probability")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  sub->add_option("--max-new-bytes", a.sampling.max_new_bytes, "Longest completion in bytes")->check(kPositive)->capture_default_str();
  sub->add_option("--k", a.ks, "pass@k for these k, comma-separated (default 1,10 where --samples allows)");
  sub->add_option("--seed", a.sampling.seed, "Seed of the sampling")->capture_default_str();
}

}  // namespace
}  // namespace cmd_codebench

void register_codebench(CLI::App& app) {
  using namespace cmd_codebench;
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "codebench", "Run HumanEval / MBPP / ClassEval programs in a sandbox: canonical solutions, their mutants, or "
                   "samples from a checkpoint (pass@k)");
  sub->add_option("--bench", a->bench, "humaneval, mbpp or classeval")->check(CLI::IsMember({"humaneval", "mbpp", "classeval"}));
  sub->add_option("--solutions", a->solutions, "canonical (default), or mutated: a deterministic wrong version of each")
      ->check(CLI::IsMember({"canonical", "mutated"}));
  sub->add_option("--mutation", a->mutation, "auto (operators in order, the first with a site), or one operator")
      ->check(CLI::IsMember({"auto", "return-none", "negate-condition", "negate-comparison", "int-plus-one"}));
  sub->add_option("--bench-dir", a->bench_dir, "Folder of the benchmark files (default: $PONDER_BENCH_DIR, else ../shared/bench)");
  sub->add_flag("--json", a->json, "One JSON object on stdout instead of text");
  sub->add_option("--limit", a->limit, "Only the first N problems")->check(kPositive);
  sub->add_option("--jobs", a->jobs, "Programs run at once (default: the CPU count)")->check(kPositive);
  sub->add_option("--timeout-s", a->timeout_s, "Wall-clock limit per program, seconds")->check(kPositive)->capture_default_str();
  sub->add_option("--cpu-s", a->cpu_s, "CPU-time limit per process, seconds (default: --timeout-s)")->check(kPositive);
  sub->add_option("--memory-mb", a->memory_mb, "Address-space limit per process, MiB")->check(kPositive)->capture_default_str();
  sub->add_option("--max-procs", a->max_procs, "Processes and threads a program may have at once")->check(kPositive)->capture_default_str();
  sub->add_option("--disk-mb", a->disk_mb, "Size of the program's work folder, a tmpfs (bwrap, unshare), MiB")->check(kPositive)->capture_default_str();
  sub->add_option("--shm-mb", a->shm_mb, "Size of each of /dev/shm and /var/tmp inside, tmpfs (bwrap, unshare), MiB")->check(kPositive)->capture_default_str();
  sub->add_option("--sandbox", a->sandbox, "auto (unshare where it makes the host read-only, else bwrap, else unshare), bwrap, unshare, or rlimits (no isolation)")
      ->check(CLI::IsMember({"auto", "bwrap", "unshare", "rlimits"}));
  sub->add_option("--python", a->python, "Interpreter (default /usr/bin/python3, else python3 on PATH)");
  sub->add_option("--program", a->program, "Run this one Python file in the sandbox and report how it ended");
  add_sampling_options(sub, *a);
  sub->callback([a] { run_codebench(*a); });
}

PONDER_COMMAND(codebench, register_codebench);

}  // namespace ponder::cli
