// `ponder flops` and `ponder graph`: one training step of a model (from a config, freshly initialised, or from a
// checkpoint) on the first held-out windows of its corpus, traced by ttt/step_trace.h. `flops` tabulates its FLOPs by
// section and phase and checks that they sum to the engine's totals; `graph` lists every backward node with its
// section, op or parameter, output shape, forward and backward FLOPs and the norm of the gradient flowing into it.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "autograd/optim.h"
#include "experiments/cli/commands.h"
#include "experiments/model/training.h"
#include "ttt/eval.h"
#include "ttt/step_trace.h"

namespace ponder::cli {
namespace cmd_inspect {
namespace {

struct InspectArgs {
  std::string config, checkpoint, schedule, section;
  ConfigOverrides over;
  int64_t batch = 1, tokens = 0;  // tokens 0: the config's train.seq_len
  bool json = false;
};

struct Subject {
  RunConfig config;
  std::unique_ptr<ttt::Model> model;
  std::string what;  // for the header line
};

Subject load_subject(const InspectArgs& a) {
  if (a.config.empty() == a.checkpoint.empty())
    throw std::invalid_argument("give exactly one of --config (a fresh model) and --checkpoint (a trained one)");
  Subject s;
  if (!a.checkpoint.empty()) {
    if (!a.over.empty()) throw std::invalid_argument("--set and --seed apply to --config, not to a --checkpoint");
    TrainedModel m = load_trained(ttt::load_checkpoint(a.checkpoint), a.checkpoint);
    s.config = m.config;
    s.model = std::make_unique<ttt::Model>(std::move(m.model));
    s.what = a.checkpoint + " (step " + std::to_string(m.step) + ")";
  } else {
    s.config = apply_overrides(load_config(resolve_config(a.config)), a.over);
    s.model = std::make_unique<ttt::Model>(s.config.model, uint64_t(s.config.train.seed));
    s.what = resolve_config(a.config) + " (freshly initialised, seed " + std::to_string(s.config.train.seed) + ")";
  }
  return s;
}

// The traced step and a line saying what it ran on.
ttt::StepTrace run_step(const InspectArgs& a, const Subject& s, bool norms, std::string& header) {
  const int64_t tokens = a.tokens > 0 ? a.tokens : s.config.train.seq_len;
  if (tokens % s.config.model.mini_batch != 0)
    throw std::invalid_argument("--tokens " + std::to_string(tokens) + " must be a multiple of model.mini_batch = " +
                                std::to_string(s.config.model.mini_batch));
  const Dataset ds = load_dataset(s.config.data);
  const data::EvalWindows windows(ds.split("valid"), tokens, a.batch);
  if (windows.size() < a.batch)
    throw std::invalid_argument("the valid split holds " + std::to_string(windows.size()) + " windows of " +
                                std::to_string(tokens) + " tokens; --batch " + std::to_string(a.batch) + " needs more");
  const data::Batch b = windows.batch(0, a.batch);
  ttt::InnerRun inner = s.config.eval.inner;
  if (!a.schedule.empty()) inner.schedule = ttt::parse_schedule(a.schedule);
  const std::unique_ptr<ttt::StepSchedule> sched = ttt::make_schedule(inner.schedule);
  header = s.what + ": " + std::to_string(a.batch) + " x " + std::to_string(tokens) + " tokens of " +
           ds.corpus.name + " (valid), schedule " + inner.schedule.text + ", mode " + ttt::mode_name(inner.mode) +
           ", path " + ttt::path_name(inner.path);
  return ttt::trace_step(*s.model, b.input, b.target, ttt::make_run(inner, sched.get(), 1.0, nullptr), norms);
}

std::string with_commas(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), 1, ',');
  return s;
}

void run_flops(const InspectArgs& a) {
  const Subject s = load_subject(a);
  std::string header;
  const ttt::StepTrace t = run_step(a, s, false, header);
  uint64_t fwd = 0, bwd = 0;
  for (const auto& sec : t.sections) fwd += sec.forward, bwd += sec.backward;
  const FlopScope opt_scope;
  AdamW opt(s.model->parameters(), s.config.train.lr);
  opt.step();
  const uint64_t optim = opt_scope.counts().total();
  if (fwd != t.forward_total || bwd != t.backward_total)
    throw std::logic_error("ponder flops: the sections sum to " + std::to_string(fwd) + " forward, " +
                           std::to_string(bwd) + " backward FLOPs but the engine counted " +
                           std::to_string(t.forward_total) + " and " + std::to_string(t.backward_total));
  if (a.json) {
    nlohmann::ordered_json j = {{"subject", header}, {"sections", nlohmann::ordered_json::array()}};
    for (const auto& sec : t.sections)
      j["sections"].push_back({{"section", sec.name}, {"forward", sec.forward}, {"backward", sec.backward}});
    j["forward_total"] = t.forward_total;
    j["backward_total"] = t.backward_total;
    j["optimizer"] = optim;
    std::cout << j.dump() << std::endl;
    return;
  }
  std::printf("%s\n\n%-22s %18s %18s %18s %7s\n", header.c_str(), "section", "forward", "backward", "total", "share");
  const double all = double(fwd + bwd);
  for (const auto& sec : t.sections)
    std::printf("%-22s %18s %18s %18s %6.1f%%\n", sec.name.c_str(), with_commas(sec.forward).c_str(),
                with_commas(sec.backward).c_str(), with_commas(sec.forward + sec.backward).c_str(),
                all > 0 ? 100.0 * double(sec.forward + sec.backward) / all : 0.0);
  std::printf("%-22s %18s %18s %18s\n", "sum = engine total", with_commas(fwd).c_str(), with_commas(bwd).c_str(),
              with_commas(fwd + bwd).c_str());
  std::printf("%-22s %18s %18s %18s\n", "AdamW step", "", "", with_commas(optim).c_str());
}

void run_graph(const InspectArgs& a) {
  const Subject s = load_subject(a);
  std::string header;
  const ttt::StepTrace t = run_step(a, s, true, header);
  if (!a.section.empty() &&
      std::none_of(t.sections.begin(), t.sections.end(), [&](const auto& sec) { return sec.name == a.section; })) {
    std::string names;
    for (const auto& sec : t.sections) names += (names.empty() ? "" : ", ") + sec.name;
    throw std::invalid_argument("graph --section " + a.section + ": the step has no such section (" + names + ")");
  }
  std::printf("%s\n%zu backward nodes, latest first%s\n\n", header.c_str(), t.nodes.size(),
              a.section.empty() ? "" : (", section " + a.section + " only").c_str());
  std::printf("%-6s %-14s %-28s %-22s %14s %14s %12s\n", "#", "section", "op / parameter", "output shape",
              "fwd FLOPs", "bwd FLOPs", "|grad in|");
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    if (!a.section.empty() && t.node_sections[i] != a.section) continue;
    const TraceEntry& e = t.nodes[i];
    std::string shapes;
    for (const Shape& sh : e.output_shapes) {
      if (!shapes.empty()) shapes += ' ';
      shapes += shape_str(sh);
    }
    const std::string op = e.label.empty() ? e.op : "param " + e.label;
    std::printf("%-6zu %-14s %-28s %-22s %14s %14s %12.4g\n", i, t.node_sections[i].c_str(), op.c_str(),
                shapes.c_str(), with_commas(e.forward_flops).c_str(), with_commas(e.backward_flops).c_str(),
                e.grad_norm);
  }
}

CLI::App* add_common(CLI::App& app, const char* name, const char* help, InspectArgs& a) {
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("--config", a.config, "Config name or path: a freshly initialised model (e.g. tiny)");
  sub->add_option("--checkpoint", a.checkpoint, "A trained checkpoint instead of --config");
  sub->add_option("--schedule", a.schedule, "uniform-K or fixed:K1,K2,... (default: the config's eval.schedule)");
  sub->add_option("--batch", a.batch, "Windows in the batch (default 1)")->check(kPositive);
  sub->add_option("--tokens", a.tokens, "Tokens per window (default: the config's train.seq_len)")->check(kPositive);
  add_override_options(sub, a.over, true);
  return sub;
}

}  // namespace
}  // namespace cmd_inspect

void register_inspect(CLI::App& app) {
  using namespace cmd_inspect;
  auto fl = std::make_shared<InspectArgs>();
  CLI::App* f = add_common(app, "flops",
                           "FLOPs of one training step by section (embedding, each block's norm, mixer and FFN, "
                           "logits and loss) and phase (forward, backward), checked to sum to the engine's totals, "
                           "and the optimiser step",
                           *fl);
  f->add_flag("--json", fl->json, "One JSON object instead of the table");
  f->callback([fl] { run_flops(*fl); });
  auto gr = std::make_shared<InspectArgs>();
  CLI::App* g = add_common(app, "graph",
                           "Every node of one training step's backward graph: section, op or parameter, output shape, "
                           "forward and backward FLOPs, norm of the gradient flowing in",
                           *gr);
  g->add_option("--section", gr->section, "Only this section's nodes (e.g. block0.ttt, logits+loss)");
  g->callback([gr] { run_graph(*gr); });
}

PONDER_COMMAND(flops, register_inspect);  // and `graph`

}  // namespace ponder::cli
