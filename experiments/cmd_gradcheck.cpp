// `ponder gradcheck`: runs the op table (autograd/op_table.cpp): forward vs the naive float64
// reference in f64 and f32, gradcheck and gradgradcheck, one line per entry.
#include <cstdio>
#include <string>

#include "autograd/op_table.h"
#include "experiments/commands.h"
#include "experiments/device.h"

namespace ponder::cli {
namespace {

struct GradcheckArgs {
  bool all = false;
  bool list = false;
  std::string op;
  std::string device = "cpu";
};

void run_gradcheck(const GradcheckArgs& a) {
  if (a.list) {
    for (const OpCase& c : op_table()) std::printf("%s\n", c.name.c_str());
    return;
  }
  if (!a.all && a.op.empty()) throw std::invalid_argument("gradcheck: pass --all, --op NAME or --list");
  const Device device = use_device(a.device);
  std::printf("device: %s\n", describe_device(device).c_str());
  int n = 0, grad_fail = 0, gg_fail = 0, fwd_fail = 0;
  std::printf("%-34s %10s %10s %12s %12s  %s\n", "op", "fwd f64", "fwd f32", "grad err", "gradgrad err", "verdict");
  for (const OpCase& c : op_table()) {
    if (!a.all && c.name.find(a.op) == std::string::npos) continue;
    OpCaseReport r = run_op_case(c, device);
    ++n;
    fwd_fail += !r.fwd_ok;
    grad_fail += !r.grad.ok;
    gg_fail += !r.gradgrad.ok;
    std::printf("%-34s %10.2e %10.2e %12.2e %12.2e  %s\n", c.name.c_str(), r.fwd_f64_err, r.fwd_f32_err,
                r.grad.max_abs_err, r.gradgrad.max_abs_err, r.ok() ? "ok" : "FAIL");
    if (!r.grad.ok) std::printf("    gradcheck: %s\n", r.grad.message.c_str());
    if (!r.gradgrad.ok) std::printf("    gradgradcheck: %s\n", r.gradgrad.message.c_str());
    std::fflush(stdout);
  }
  if (n == 0) throw std::invalid_argument("gradcheck: no op matches '" + a.op + "' (see --list)");
  auto verdict = [](int fails) { return fails ? "FAILED for " + std::to_string(fails) : std::string("ok"); };
  std::printf("%d ops: forward %s, gradcheck %s, gradgradcheck %s\n", n, verdict(fwd_fail).c_str(),
              verdict(grad_fail).c_str(), verdict(gg_fail).c_str());
  if (fwd_fail || grad_fail || gg_fail) throw CLI::RuntimeError(1);
}

}  // namespace

void register_gradcheck(CLI::App& app) {
  auto args = std::make_shared<GradcheckArgs>();
  CLI::App* sub = app.add_subcommand(
      "gradcheck", "Check every op's forward against a naive float64 reference and its first and second "
                   "derivatives against central finite differences (float64)");
  sub->add_flag("--all", args->all, "Run every entry of the op table");
  sub->add_option("--op", args->op, "Run the entries whose name contains this text");
  sub->add_flag("--list", args->list, "List the op table's entries");
  add_device_option(sub, args->device);
  sub->callback([args] { run_gradcheck(*args); });
}

}  // namespace ponder::cli
