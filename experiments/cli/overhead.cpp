// `ponder overhead` (docs/method.md §5.3): what each difficulty policy spends on deciding (policy FLOPs)
// against the inner FLOPs it saves relative to always taking the high step count and relative to
// the uniform schedule at the same budget. The net saving can be negative, and is reported so.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/study/result_util.h"
#include "experiments/model/training.h"
#include "util/files.h"

namespace ponder::cli {
namespace cmd_overhead {
namespace {

double base_of(const SeedResult& s) { return s.base_per_token; }
double inner_of(const SeedResult& s) { return s.inner_per_token; }
double overhead_of(const SeedResult& s) { return s.overhead_per_token; }

void run(const CheckpointJobArgs& a) {
  CheckpointJob job = load_checkpoint_job(a, "overhead");
  CompareOptions& opt = job.opt;
  const TrainedModel& m = job.m;
  const Dataset& ds = job.ds;
  const std::string budget = "uniform-" + std::to_string(opt.budget_k), high = "uniform-" + std::to_string(opt.high);
  std::vector<std::string> names = {"entropy", "loss", "ttt-loss", "gradnorm", budget};
  if (high != budget) names.push_back(high);
  opt.methods = methods::parse_methods(names);
  const CompareResult r = run_compare(m.model, ds.valid, ds.test, opt, stderr_progress("overhead"), nullptr,
                                      &ds.test_streams, {}, &ds.valid_streams);
  std::fprintf(stderr, "\n");
  const std::vector<std::string> refs = high == budget ? std::vector<std::string>{high}
                                                       : std::vector<std::string>{high, budget};

  std::ostringstream txt;
  txt << "Policy overhead vs inner FLOPs saved (" << scored_label(r, opt) << "; FLOPs per token, means over seeds; heuristics calibrated to " << budget << "'s cost).\n"
      << "saved = inner(reference) - inner(method); net = saved - policy overhead; % of the base forward.\n"
      << "A negative net saving means the method costs more than the reference.\n\n";
  txt << "method      bpb     mean K  base        inner       overhead";
  for (const std::string& ref : refs) txt << "  | vs " << ref << ": saved     net        net % base";
  txt << "\n";
  nlohmann::ordered_json methods = nlohmann::ordered_json::array();
  for (const MethodResult& mr : r.methods) {
    const double base = seed_mean(mr, base_of), inner = seed_mean(mr, inner_of), over = seed_mean(mr, overhead_of);
    char row[160];
    std::snprintf(row, sizeof row, "%-10s  %.4f  %6.2f  %10.4g  %10.4g  %10.4g", mr.name.c_str(), seed_mean(mr, bpb_of),
                  seed_mean(mr, k_of), base, inner, over);
    txt << row;
    nlohmann::ordered_json vs = nlohmann::ordered_json::object();
    for (const std::string& ref : refs) {
      const double saved = seed_mean(*find(r, ref), inner_of) - inner, net = saved - over;
      std::snprintf(row, sizeof row, "  |    %+10.4g  %+10.4g  %+8.2f%%", saved, net, 100 * net / base);
      txt << row;
      vs[ref] = {{"saved_inner_flops_per_token", saved}, {"net_saving_flops_per_token", net},
                 {"net_saving_pct_of_base", 100 * net / base}};
    }
    txt << "\n";
    methods.push_back({{"name", mr.name}, {"kind", methods::kind_name(mr.kind)}, {"detail", mr.detail}, {"bpb", seed_mean(mr, bpb_of)},
                       {"mean_k", seed_mean(mr, k_of)}, {"base_flops_per_token", base},
                       {"inner_flops_per_token", inner}, {"overhead_flops_per_token", over}, {"vs", vs}});
  }
  txt << "\n";
  for (const MethodResult& mr : r.methods) {
    if (mr.kind != methods::MethodKind::Heuristic) continue;
    txt << mr.name << ":";
    for (const std::string& ref : refs) {
      const double net = seed_mean(*find(r, ref), inner_of) - seed_mean(mr, inner_of) - seed_mean(mr, overhead_of);
      txt << (ref == refs.front() ? " " : "; ") << (net >= 0 ? "net saving " : "net LOSS (costs more than it saves) ")
          << fmt("%.4g", std::abs(net)) << " FLOPs/token vs " << ref;
    }
    txt << "\n";
  }
  nlohmann::ordered_json j = provenance(m, ds, a.checkpoint, "ponder overhead");
  j["seeds"] = opt.seeds;
  j["windows_per_seed"] = opt.windows_per_seed;
  j["references"] = {{"high", high}, {"budget", budget}};
  j["methods"] = methods;
  const std::string path = (std::filesystem::path(a.out) / "overhead.json").string();
  util::write_atomically(path, j.dump(2) + "\n");
  std::printf("%s\nwrote %s\n", txt.str().c_str(), path.c_str());
}

}  // namespace
}  // namespace cmd_overhead

void register_overhead(CLI::App& app) {
  using namespace cmd_overhead;
  auto args = std::make_shared<CheckpointJobArgs>();
  args->out = "results/overhead";
  CLI::App* sub = app.add_subcommand(
      "overhead", "Policy FLOPs vs inner FLOPs saved (against the always-high and the budget uniform schedules) "
                  "for each difficulty heuristic: the net saving; writes overhead.json");
  add_checkpoint_job_options(sub, *args, "Config whose compare: section sets seeds, budget_k and high");
  sub->callback([args] { run(*args); });
}

PONDER_COMMAND(overhead, register_overhead);

}  // namespace ponder::cli
