// `ponder gradcheck`: runs the op table (autograd/op_table.cpp): forward vs the naive float64
// reference in f64 and f32, gradcheck and gradgradcheck, one line per entry; then whole TTT layers
// (`--op ttt`): the outer gradient through K inner steps per unit, first and second order; or, with --model, pieces
// of the model a config builds (experiments/model/gradcheck_pieces.h).
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/op_table.h"
#include "experiments/cli/commands.h"
#include "experiments/model/device.h"
#include "experiments/model/gradcheck_pieces.h"
#include "ttt/eval.h"
#include "ttt/ttt_layer.h"

namespace ponder::cli {
namespace cmd_gradcheck {
namespace {

struct GradcheckArgs {
  bool all = false;
  bool list = false;
  std::string op;
  std::string device = "cpu";
  std::string model;                 // a config: check pieces of the model it builds
  std::vector<std::string> pieces;   // empty with --model: every piece the model has
  int directions = 4;
  ConfigOverrides over;
};

// --model: each piece's first- and second-order directional checks, one line each.
void run_model_pieces(const GradcheckArgs& a) {
  const RunConfig cfg = apply_overrides(load_config(resolve_config(a.model)), a.over);
  std::printf("model %s (float64, seed %lld), schedule %s, mode %s, path %s; %d random directions\n",
              resolve_config(a.model).c_str(), (long long)cfg.train.seed, cfg.eval.inner.schedule.text.c_str(),
              ttt::mode_name(cfg.eval.inner.mode), ttt::path_name(cfg.eval.inner.path), a.directions);
  std::printf("%-10s %8s %10s %12s %12s  %s\n", "piece", "tensors", "numbers", "grad err", "gradgrad err", "verdict");
  int fails = 0, ran = 0;
  for (const std::string& p : a.pieces.empty() ? piece_names() : a.pieces) {
    PieceCheck c;
    try {
      c = check_piece(cfg, p, a.directions);
    } catch (const std::invalid_argument& e) {
      if (!a.pieces.empty()) throw;
      continue;  // with no --piece, a piece the model lacks (attention in an all-TTT model) is skipped
    }
    ++ran;
    const bool ok = c.grad.ok && c.gradgrad.ok;
    fails += !ok;
    std::printf("%-10s %8zu %10lld %12.2e %12.2e  %s\n", c.piece.c_str(), c.tensors, (long long)c.numbers,
                c.grad.max_abs_err, c.gradgrad.max_abs_err, ok ? "ok" : "FAIL");
    if (!c.grad.ok) std::printf("    gradcheck: %s\n", c.grad.message.c_str());
    if (!c.gradgrad.ok) std::printf("    gradgradcheck: %s\n", c.gradgrad.message.c_str());
    std::fflush(stdout);
  }
  std::printf("%d pieces: %s\n", ran, fails ? ("FAILED for " + std::to_string(fails)).c_str() : "ok");
  if (fails) throw CLI::RuntimeError(1);
}

// A whole TTT layer on 3 units of 4 tokens (d 8, 2 heads, float64, CPU), checked against its input u: the loss
// sum(out ⊙ r) depends on u through every inner step (XK, XV and XQ are projections of u), so gradcheck tests the
// outer gradient through the inner loop and gradgradcheck its derivative, through K steps per unit given by `ks`.
struct LayerCase {
  std::string name;
  bool mlp = false;
  ttt::StepMode mode = ttt::StepMode::Carry;
  std::vector<int> ks;  // K of units 0, 1, 2
  // Iterative: inner gradients by the engine, so their derivatives are the engine's too. Dual: prefix mode's
  // closed-form steps (docs/ttt.md §3.3), whose derivatives go through the fused LN+L2 gradient's rules.
  ttt::InnerPath path = ttt::InnerPath::Iterative;
};

std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> out;
  for (bool mlp : {false, true})
    for (ttt::StepMode mode : {ttt::StepMode::Carry, ttt::StepMode::Prefix})
      for (const std::vector<int>& ks : {std::vector<int>{1, 1, 1}, std::vector<int>{2, 0, 3}}) {
        std::string k;
        for (int x : ks) {
          if (!k.empty()) k += ',';
          k += std::to_string(x);
        }
        out.push_back({std::string("ttt-") + (mlp ? "mlp " : "linear ") + ttt::mode_name(mode) + " K=" + k, mlp, mode, ks});
      }
  for (bool mlp : {false, true})
    out.push_back({std::string("ttt-") + (mlp ? "mlp" : "linear") + " prefix K=2,0,3 closed form", mlp,
                   ttt::StepMode::Prefix, {2, 0, 3}, ttt::InnerPath::Dual});
  return out;
}

std::pair<CheckResult, CheckResult> run_layer_case(const LayerCase& c) {
  ttt::TTTConfig cfg;
  cfg.d = 8;
  cfg.heads = 2;
  cfg.mini_batch = 4;
  cfg.mlp = c.mlp;
  cfg.base_lr = c.mlp ? 0.1 : 1.0;
  cfg.init_std = 0.3;  // larger than the default so inner steps move the outputs noticeably
  Generator gen(7);
  const ttt::TTTLayer layer(cfg, 0, gen, DType::F64);
  const Tensor u = gen.normal({1, 12, 8}, 0, 1, DType::F64), r = gen.normal({1, 12, 8}, 0, 1, DType::F64);
  auto fn = [&](const std::vector<Tensor>& xs) {
    ttt::FixedSchedule sched(c.ks);
    ttt::TTTRun run;
    run.path = c.path;
    run.mode = c.mode;
    run.schedule = &sched;
    return sum(mul(layer.forward(xs[0], run), r));
  };
  return {gradcheck(fn, {u}, {true}), gradgradcheck(fn, {u}, {true})};
}

// The TTT layer cases whose name contains `filter` (all of them for an empty filter); returns how many ran and fails.
std::pair<int, int> run_layer_cases(const std::string& filter) {
  int n = 0, fails = 0;
  for (const LayerCase& c : layer_cases()) {
    if (c.name.find(filter) == std::string::npos) continue;
    const auto [g, gg] = run_layer_case(c);
    ++n;
    fails += !(g.ok && gg.ok);
    std::printf("%-34s %10s %10s %12.2e %12.2e  %s\n", c.name.c_str(), "-", "-", g.max_abs_err, gg.max_abs_err,
                g.ok && gg.ok ? "ok" : "FAIL");
    if (!g.ok) std::printf("    gradcheck: %s\n", g.message.c_str());
    if (!gg.ok) std::printf("    gradgradcheck: %s\n", gg.message.c_str());
    std::fflush(stdout);
  }
  return {n, fails};
}

void run_gradcheck(const GradcheckArgs& a) {
  if (!a.model.empty()) {
    // The pieces are built and checked on the CPU; a --device cuda that silently ran there would report the CPU.
    if (a.device != "cpu") throw std::invalid_argument("gradcheck: --model checks run on the CPU only; drop --device " + a.device);
    return run_model_pieces(a);
  }
  if (!a.pieces.empty()) throw std::invalid_argument("gradcheck: --piece needs --model CONFIG");
  if (a.list) {
    for (const OpCase& c : op_table()) std::printf("%s\n", c.name.c_str());
    for (const LayerCase& c : layer_cases()) std::printf("%s\n", c.name.c_str());
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
  const auto [layers, layer_fail] = run_layer_cases(a.all ? "" : a.op);  // CPU only: they build their own layer
  if (n + layers == 0) throw std::invalid_argument("gradcheck: no op matches '" + a.op + "' (see --list)");
  auto verdict = [](int fails) { return fails ? "FAILED for " + std::to_string(fails) : std::string("ok"); };
  std::printf("%d ops: forward %s, gradcheck %s, gradgradcheck %s; %d TTT layer cases: %s\n", n,
              verdict(fwd_fail).c_str(), verdict(grad_fail).c_str(), verdict(gg_fail).c_str(), layers,
              verdict(layer_fail).c_str());
  if (fwd_fail || grad_fail || gg_fail || layer_fail) throw CLI::RuntimeError(1);
}

}  // namespace
}  // namespace cmd_gradcheck

void register_gradcheck(CLI::App& app) {
  using namespace cmd_gradcheck;
  auto args = std::make_shared<GradcheckArgs>();
  CLI::App* sub = app.add_subcommand(
      "gradcheck", "Check every op's forward against a naive float64 reference and its first and second "
                   "derivatives against central finite differences (float64)");
  sub->add_flag("--all", args->all, "Run every entry of the op table");
  sub->add_option("--op", args->op, "Run the entries whose name contains this text (ttt: the whole TTT layer cases)");
  sub->add_flag("--list", args->list, "List the op table's entries");
  add_device_option(sub, args->device);
  sub->add_option("--model", args->model,
                  "A config (e.g. tiny): check pieces of the model it builds, in float64 along random directions");
  sub->add_option("--piece", args->pieces, "With --model: ttt, attention, block, model, policy or lstm (repeatable; "
                                           "default: every piece the model has)");
  sub->add_option("--directions", args->directions, "With --model: random directions per check (default 4)")
      ->check(kPositive);
  add_override_options(sub, args->over, true);
  sub->callback([args] { run_gradcheck(*args); });
}

PONDER_COMMAND(gradcheck, register_gradcheck);

}  // namespace ponder::cli
