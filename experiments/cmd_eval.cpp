// `ponder eval`: loss, bits per byte, loss by position and FLOPs per token of a checkpoint on a held-out
// split, under a step schedule (by default the one in the checkpoint's config, eval section).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "experiments/build_info.h"
#include "experiments/commands.h"
#include "experiments/device.h"
#include "experiments/training.h"
#include "ttt/flop_profile.h"

namespace ponder::cli {
namespace cmd_eval {
namespace {

constexpr int kPositionBuckets = 8;  // the compact loss-by-position line

struct EvalArgs {
  std::string checkpoint, schedule, mode, path, split;
  std::string device;  // empty: the checkpoint config's model.device
  std::optional<int64_t> max_windows;
  bool json = false;
  bool flops_by_layer = false;  // also the FLOPs of one window's forward pass, section by section
};

// One window's forward pass under `inner`, FLOPs per token by section (ttt/flop_profile.h).
nlohmann::ordered_json flops_by_section(const TrainedModel& m, const data::EvalWindows& windows,
                                        const ttt::InnerRun& inner) {
  const ttt::EvalOptions eo = eval_options(m, inner);
  const std::unique_ptr<ttt::StepSchedule> sched = ttt::make_schedule(inner.schedule);
  const Tensor ids = windows.batch(0, 1).input;
  const auto sections = ttt::forward_flops_by_section(m.model, ids, ttt::make_run(inner, sched.get(), eo.lr_mult, nullptr));
  uint64_t total = 0;
  for (const auto& s : sections) total += s.second;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& [name, n] : sections)
    out.push_back({{"section", name}, {"flops_per_token", double(n) / double(ids.shape()[1])},
                   {"share", total ? double(n) / double(total) : 0.0}});
  return out;
}

void print_sections(const nlohmann::ordered_json& sections) {
  std::printf("forward FLOPs per token by section (one window):\n");
  for (const auto& s : sections)
    std::printf("  %-22s %12.4g  %5.1f %%\n", s["section"].get<std::string>().c_str(), s["flops_per_token"].get<double>(),
                100 * s["share"].get<double>());
}

void print_text(const ttt::EvalResult& r, const ttt::InnerRun& inner, const std::string& path, int64_t step,
                const std::string& split, const std::string& device, const std::vector<double>& carry) {
  std::printf("device %s\n", device.c_str());
  std::printf("checkpoint %s (step %lld), %s split: %lld windows of %zu tokens\n", path.c_str(), (long long)step,
              split.c_str(), (long long)r.windows, r.position_loss.size());
  std::printf("schedule %s, mode %s, path %s: mean K %.2f\n", inner.schedule.c_str(), ttt::mode_name(inner.mode),
              ttt::path_name(inner.path), r.mean_k);
  std::printf("loss %.4f nats/token, %.4f bits/byte\n", r.loss, r.bpb);
  std::printf("carry factor per TTT layer (0: the carried state never moves, every K >= 1 alike):");
  for (double f : carry) std::printf(" %.4g", f);
  std::printf("%s\n", carry.empty() ? " none (no TTT layer)" : "");
  std::printf("FLOPs/token: %.4g total, %.4g inner TTT (inner forward %.3g, inner grad %.3g, update %.3g, "
              "output %.3g)\n", r.flops_per_token, r.inner_flops_per_token,
              double(r.inner.inner_forward) / double(r.tokens), double(r.inner.inner_grad) / double(r.tokens),
              double(r.inner.update) / double(r.tokens), double(r.inner.output) / double(r.tokens));
  const size_t T = r.position_loss.size(), width = (T + kPositionBuckets - 1) / kPositionBuckets;
  std::printf("loss by position (nats, mean over windows):");
  for (size_t a = 0; a < T; a += width) {
    const size_t b = std::min(T, a + width);
    double sum = 0;
    for (size_t t = a; t < b; ++t) sum += r.position_loss[t];
    std::printf("  %zu-%zu: %.3f", a + 1, b, sum / double(b - a));
  }
  std::printf("\n(%.1f s)\n", r.seconds);
}

void run_eval(const EvalArgs& o) {
  const ttt::Checkpoint ck = ttt::load_checkpoint(o.checkpoint);
  const std::string source = o.checkpoint + " (its config)";
  const Device device = run_device(o.device, parse_config(ck.config_text, source));
  const TrainedModel m = load_trained(ck, o.checkpoint, device);
  const EvalConfig& ec = m.config.eval;
  ttt::InnerRun inner = ec.inner;
  if (!o.schedule.empty()) inner.schedule = o.schedule;
  if (!o.mode.empty()) inner.mode = ttt::parse_mode(o.mode);
  if (!o.path.empty()) inner.path = ttt::parse_path(o.path);
  const std::string split = o.split.empty() ? ec.split : o.split;
  const Dataset ds = load_dataset(m.config.data);
  const data::EvalWindows windows(ds.split(split), m.config.train.seq_len, o.max_windows.value_or(ec.max_windows));
  const ttt::EvalResult r = ttt::evaluate(m.model, windows, eval_options(m, inner));
  const nlohmann::ordered_json sections = o.flops_by_layer ? flops_by_section(m, windows, inner) : nlohmann::ordered_json();
  if (!o.json) {
    print_text(r, inner, o.checkpoint, m.step, split, describe_device(device), m.model.carry_factors());
    if (o.flops_by_layer) print_sections(sections);
    return;
  }
  nlohmann::ordered_json j = {{"checkpoint", o.checkpoint}, {"step", m.step}, {"split", split},
                              {"device", describe_device(device)},
                              {"corpus", ds.corpus.name}, {"data_sha256", ds.corpus.sha256},
                              {"trained_commit", ck.meta_value("commit")}, {"commit", git_commit()},
                              {"carry_token_factor", m.model.carry_factors()}};
  j.update(eval_json(r, inner));
  if (o.flops_by_layer) j["flops_by_section"] = sections;
  std::cout << j.dump() << std::endl;
}

}  // namespace
}  // namespace cmd_eval

void register_eval(CLI::App& app) {
  using namespace cmd_eval;
  auto opts = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "Evaluate a checkpoint: loss, bits/byte, loss by position, FLOPs/token");
  sub->add_option("--checkpoint", opts->checkpoint, "Checkpoint file (e.g. runs/tiny/checkpoint.ckpt)")->required();
  sub->add_option("--schedule", opts->schedule, "uniform-K or fixed:K1,K2,... (default: the config's eval.schedule)");
  sub->add_option("--mode", opts->mode, "carry or prefix (default: the config's)")
      ->check(CLI::IsMember({"carry", "prefix"}));
  sub->add_option("--path", opts->path, "dual or iterative (default: the config's)")
      ->check(CLI::IsMember({"dual", "iterative"}));
  sub->add_option("--split", opts->split, "valid or test (default: the config's)")
      ->check(CLI::IsMember({"valid", "test"}));
  sub->add_option("--max-windows", opts->max_windows, "Evenly spaced windows of the split; 0 = all")
      ->check(CLI::NonNegativeNumber);
  add_device_override(sub, opts->device);
  sub->add_flag("--flops-by-layer", opts->flops_by_layer,
                "Also the FLOPs per token of one window's forward pass by section: embedding, each block's norm, "
                "mixer (TTT with its inner steps, or attention) and FFN, the final norm, the logits");
  sub->add_flag("--json", opts->json, "One JSON object (with the full loss-by-position array) instead of text");
  sub->callback([opts] { run_eval(*opts); });
}

}  // namespace ponder::cli
