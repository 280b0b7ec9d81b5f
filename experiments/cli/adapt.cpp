// `ponder adapt`: test-time training of fast weights on a frozen trained base, chunk by chunk, under each allocation
// method (policy/adapt_rollout.h), through the same comparison, statistics and report as `ponder compare`.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "data/byte_tokenizer.h"
#include "util/sha256.h"
#include "experiments/study/adapt_models.h"
#include "experiments/study/adapt_report.h"
#include "experiments/codebench/tasks.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/study/control.h"
#include "policy/adapt_rollout.h"

namespace ponder::cli {
namespace cmd_adapt {
namespace {

CompareOptions adapt_options(const CheckpointJobArgs& a, const AdaptSection& adapt, const CompareOptions& compare,
                             int64_t mini_batch) {
  CompareOptions opt = adapt_compare_options(adapt, compare, mini_batch);
  if (a.seeds > 0) opt.seeds = a.seeds;
  return opt;
}

// Where the held-out streams come from instead of the checkpoint's test split: a code benchmark, each problem one
// stream of its prompt (read, not scored) then its canonical solution (scored).
struct BenchArgs {
  std::string bench, dir;
};

// The streams of `b`'s problems; stream names are the task ids. Also the manifest's sha256 (of every stream's bytes).
std::vector<data::StreamTokens> bench_streams(const BenchArgs& b, std::string& sha) {
  const std::vector<codebench::Task> tasks = codebench::load_tasks(codebench::parse_bench(b.bench), b.dir);
  std::vector<data::StreamTokens> out;
  std::string all;
  for (const codebench::Task& t : tasks) {
    data::StreamTokens s;
    s.name = t.id;
    s.tokens = data::ByteTokenizer().encode(t.prompt + t.solution);
    s.first_scored = std::max<int64_t>(1, int64_t(t.prompt.size()));
    if (s.scored() > 0) out.push_back(std::move(s));
    all += t.id + '\0' + t.prompt + '\0' + t.solution + '\0';
  }
  sha = util::sha256_hex(all);
  return out;
}

void run(const CheckpointJobArgs& a, const BenchArgs& b, CompareResult* result = nullptr) {
  CheckpointJob job = load_checkpoint_job(a, "adapt");
  if (job.as_run.adapt.split == "valid") {
    if (!b.bench.empty()) throw std::invalid_argument("adapt: --bench reads a benchmark, not a split; drop adapt.split valid");
    if (job.ds.valid_streams.empty()) throw std::invalid_argument("adapt: adapt.split valid, but the corpus has no validation streams");
    job.ds.test_streams = job.ds.valid_streams;
    std::fprintf(stderr, "adapt: adapt.split valid: reading the %zu validation streams, not the test split\n",
                 job.ds.test_streams.size());
  }
  nlohmann::ordered_json bench;
  if (!b.bench.empty()) {
    std::string sha;
    job.ds.test_streams = bench_streams(b, sha);
    bench = {{"bench", b.bench}, {"problems", job.ds.test_streams.size()}, {"sha256", sha},
             {"scored", "the canonical solution of each problem, read after its prompt"}};
    std::fprintf(stderr, "adapt: %zu %s problems as streams (prompt read, canonical solution scored)\n",
                 job.ds.test_streams.size(), b.bench.c_str());
  }
  const policy::AdaptRollouts rollouts(job.m.model, job.as_run.adapt.rollouts);
  const CompareOptions opt = adapt_options(a, job.as_run.adapt, job.opt, job.m.model.config().mini_batch);
  CompareResult r;
  Journal journal;  // the cells (opened by run_compare_job), then the regime's passes
  std::printf("%s", run_compare_job(job.m, job.ds, opt, a.checkpoint, job.as_run.text, a.out, &r, &rollouts, {},
                                    &journal).c_str());
  const AdaptSummary s = summarize_adapt(r);
  nlohmann::ordered_json top = adapt_json(s, job.as_run.adapt);
  std::string md = adapt_markdown(s, job.as_run.adapt);
  if (!bench.empty()) {
    top["code_benchmark"] = bench;
    md = "Streams: the " + b.bench + " problems, each its prompt then its canonical solution; only the "
         "solution's bytes are scored (bits/byte of the reference answer given the prompt, fast weights adapted on the "
         "prompt and on the solution as it is read).\n\n" + md;
  }
  // On generated documents with a planted effect (configs/adapt_planted.yaml) the run is this path's positive
  // control: the same verdict as `ponder control`, at the top of both files.
  if (bench.empty() && job.ds.corpus.name.rfind("planted", 0) == 0) {
    const ControlVerdict v = judge_control(r, opt);
    top["positive_control"] = control_json(v);
    md = control_markdown(v, a.out + "/report.md") + md;
    std::fprintf(stderr, "adapt: positive control %s\n", v.passed ? "passed" : "FAILED");
  }
  merge_outputs(a.out, top, md, "");
  merge_regime(job, a.out, "ponder adapt", nullptr, "", &journal);
  journal.remove();
  std::printf("\n%sreport: %s/report.md\n", adapt_markdown(s, job.as_run.adapt, false).c_str(), a.out.c_str());
  if (result) *result = std::move(r);
}

// The adapt options of a multi-model run, from the first checkpoint's config (they share one, less train.seed).
CompareOptions replicate_options(const CheckpointJobArgs& a) {
  const RunConfig cfg = checkpoint_job_config(a);
  return adapt_options(a, cfg.adapt, checkpoint_job_options(a), cfg.model.mini_batch);
}

}  // namespace
}  // namespace cmd_adapt

void register_adapt(CLI::App& app) {
  using namespace cmd_adapt;
  auto args = std::make_shared<CheckpointJobArgs>();
  auto bench = std::make_shared<BenchArgs>();
  args->out = "results/adapt";
  CLI::App* sub = app.add_subcommand(
      "adapt",
      "Test-time training of fast weights on a frozen trained base: every held-out stream is read in chunks "
      "(adapt.chunk tokens); each chunk is scored with the fast weights as they are, then a method picks K in "
      "adapt.step_options (SKIP = 0) from what has been read and takes K optimiser steps on that chunk's next-token "
      "loss, and the updated fast weights carry to the next chunk. Fast weights (adapt.fast): lora (rank adapt.rank "
      "on adapt.targets of the last adapt.last_blocks blocks, starting as the identity) or head (a residual SwiGLU "
      "head of width adapt.head_hidden, starting at 0); inner optimiser adapt.optimizer (sgd | momentum | adam) with "
      "adapt.lr, adapt.clip and adapt.normalize; adapt.replay R makes each step's loss cover the R chunks before too. The base's parameters never change. Methods (adapt.methods): "
      "uniform-K, every-K/N, front-K (K per chunk until the budget is spent), random, loss and entropy heuristics calibrated to uniform-<adapt.budget_k>'s FLOPs (gate-loss and gate-entropy: the same with the threshold adapted along each stream by an EMA, the published gate), "
      "learned-reinforce and learned-ppo-pid trained on this protocol, and the oracle; adaptive methods are held to a "
      "hard budget of adapt.budget_k updates per chunk of each stream (adapt.hard_budget). --seeds sets adapt.seeds; "
      "--windows has no effect here (every held-out stream is read; adapt.split valid reads the validation streams "
      "instead, for choosing adapt.lr and the like without the test split). With several --checkpoint, statistics over "
      "independently trained bases. Writes results.json "
      "(with cost_multiples and adapt_summary), report.md and the figures of ponder compare; a rerun resumes from "
      "the journal");
  add_checkpoint_job_options(sub, *args, "Config whose adapt: and compare: sections set the protocol and methods", true);
  sub->add_option("--bench", bench->bench,
                  "Read a code benchmark's problems as the held-out streams instead of the test split: humaneval, mbpp "
                  "or classeval, each problem its prompt (read) then its canonical solution (scored)")
      ->check(CLI::IsMember({"humaneval", "mbpp", "classeval"}));
  bench->dir = codebench::default_bench_dir();
  sub->add_option("--bench-dir", bench->dir, "Folder holding HumanEval.jsonl.gz, mbpp.jsonl, ClassEval_data.json")
      ->capture_default_str();
  sub->callback([args, bench] {
    if (args->checkpoints.size() > 1)
      run_replicates(
          *args, "adapt", replicate_options(*args),
          [bench](const CheckpointJobArgs& one, CompareResult* r) { run(one, *bench, r); },
          [](const std::vector<nlohmann::json>& per_model, nlohmann::ordered_json& top, std::string& section) {
            const AdaptOverModels pooled = adapt_over_models(per_model);
            top["cost_multiples"] = pooled.cost_multiples;
            top["adapt_summary"] = pooled.summary;
            section = pooled.markdown;
          });
    else
      run(*args, *bench);
  });
}

PONDER_COMMAND(adapt, register_adapt);

}  // namespace ponder::cli
