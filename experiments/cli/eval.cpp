// `ponder eval`: loss, bits per byte, loss by position and FLOPs per token of a checkpoint on a held-out
// split, under a step schedule (by default the one in the checkpoint's config, eval section): on fixed windows, each
// from a fresh state, or (--streams) on the split's streams read whole with the state carried.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "experiments/process/build_info.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/model/regime.h"
#include "experiments/model/device.h"
#include "experiments/model/training.h"
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
  bool streams = false;         // the held-out streams read whole (the config's streams: section cuts them)
  bool reset = false;           // --streams: the state reset at every document's start
  bool other_corpus = false;    // read a corpus other than the checkpoint's (both hashes in the JSON)
  std::optional<int64_t> position_docs, position_len;  // --streams: loss by position from documents' starts
  std::optional<int64_t> max_adapt, max_scored, max_segments;  // --streams: the config's streams: caps, overridden
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
  std::printf("schedule %s, mode %s, path %s: mean K %.2f\n", inner.schedule.text.c_str(), ttt::mode_name(inner.mode),
              ttt::path_name(inner.path), r.mean_k);
  std::printf("loss %.4f nats/token, %.4f bits/byte\n", r.loss, r.bpb);
  // In carry mode a dead carry makes every K ≥ 1 give the same outputs; prefix mode's steps change a unit's own.
  std::printf("carry factor per TTT layer (0: the carried state never moves%s):",
              inner.mode == ttt::StepMode::Carry ? ", every K >= 1 alike" : "");
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

nlohmann::ordered_json position_json(const ttt::PositionBins& b) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < b.lo.size(); ++i)
    out.push_back({{"lo", b.lo[i]}, {"hi", b.hi[i]}, {"tokens", b.count[i]}, {"mean_loss", b.mean(i)}});
  return out;
}

double mean_over_streams(const ttt::StreamEvalResult& r) {
  double sum = 0;
  int64_t n = 0;
  for (double v : r.stream_bpb)
    if (!std::isnan(v)) sum += v, ++n;
  return n > 0 ? sum / double(n) : NAN;
}

// How a pass read its streams, for the text and the JSON.
std::string how_read(const ttt::StreamEvalResult& r, bool reset) {
  return reset ? "the state reset at each of their " + std::to_string(r.pieces) +
                     " documents' starts (each read alone after the token before it)"
               : "each read with the state carried from its first token to its last";
}

void print_streams(const ttt::StreamEvalResult& r, const ttt::InnerRun& inner, const std::string& where,
                   int64_t split_tokens, const std::string& positions, const std::vector<double>& carry, bool reset) {
  std::printf("%s: %lld streams, %lld scored tokens (%.1f %% of the split), %s\n", where.c_str(), (long long)r.streams,
              (long long)r.tokens, 100.0 * double(r.tokens) / double(split_tokens), how_read(r, reset).c_str());
  std::printf("schedule %s, mode %s, path %s\n", inner.schedule.text.c_str(), ttt::mode_name(inner.mode),
              ttt::path_name(inner.path));
  std::printf("%.4f bits/byte over every scored token; %.4f mean over streams\n", r.bpb, mean_over_streams(r));
  std::printf("carry factor per TTT layer:");
  for (double f : carry) std::printf(" %.4g", f);
  std::printf("%s\n", carry.empty() ? " none (no TTT layer)" : "");
  std::printf("FLOPs per token read: %.4g total, %.4g inner TTT\n", r.flops_per_token, r.inner_flops_per_token);
  std::printf("loss by position (nats; %s):\n", positions.c_str());
  for (size_t i = 0; i < r.by_position.lo.size(); ++i)
    std::printf("  [%lld, %lld)  %.4f  (%lld predictions)\n", (long long)r.by_position.lo[i],
                (long long)r.by_position.hi[i], r.by_position.mean(i), (long long)r.by_position.count[i]);
  std::printf("(%.1f s)\n", r.seconds);
}

// --streams: every held-out stream of the split (cut as the config's streams: section says) read whole under the
// schedule; loss by position from documents' starts with --position-docs (or streams.position_docs), else along the
// streams themselves.
void run_stream_eval(const EvalArgs& o, const TrainedModel& m, const ttt::InnerRun& inner, const std::string& split,
                     const Dataset& ds, const ttt::Checkpoint& ck) {
  RegimeOptions ro = regime_options(m.config.streams);
  ro.split = split;
  if (o.position_docs) ro.position_docs = *o.position_docs;
  if (o.position_len) ro.position_len = *o.position_len;
  if (o.max_adapt) ro.max_adapt = *o.max_adapt;
  if (o.max_scored) ro.max_scored = *o.max_scored;
  if (o.max_segments) ro.max_segments = *o.max_segments;
  int64_t split_tokens = 0, candidates = 0;
  const std::vector<data::StreamTokens> streams = held_out_streams(ds, ro, split_tokens);
  const std::vector<data::StreamTokens> docs = position_documents(ds, ro, candidates);  // fails before the pass
  ttt::StreamEvalOptions so;
  so.inner = inner;
  so.chunk = ro.chunk;
  so.lr_mult = eval_options(m, inner).lr_mult;
  so.reset_at_documents = o.reset;
  // One progress line over both passes, each weighed by the tokens it reads, so the ETA covers what is left of both.
  const double first = tokens_of(streams), total = first + tokens_of(docs);
  const CompareProgress progress = stderr_progress("eval");
  so.progress = [&](double f) { progress(inner.schedule.text + " on the streams", f * first, total); };
  ttt::StreamEvalResult r = ttt::evaluate_streams(m.model, streams, so);
  std::string positions = "every prediction read, by its position in its stream";
  if (!docs.empty()) {
    so.progress = [&](double f) { progress(inner.schedule.text + " from documents' starts", first + f * (total - first), total); };
    r.by_position = ttt::evaluate_streams(m.model, docs, so).by_position;
    positions = std::to_string(docs.size()) + " documents read from their first token, " +
                std::to_string(ro.position_len) + " tokens each";
  }
  if (!o.json) {
    std::printf("device %s\ncheckpoint %s (step %lld)\n", describe_device(m.model.device()).c_str(),
                o.checkpoint.c_str(), (long long)m.step);
    print_streams(r, inner, split + " split", split_tokens, positions, m.model.carry_factors(), o.reset);
    return;
  }
  std::vector<std::string> names;  // the order of stream_bpb and stream_tokens
  for (const data::StreamTokens& st : streams) names.push_back(st.name);
  nlohmann::ordered_json j = provenance(m, ds, o.checkpoint, "ponder eval --streams");
  j.update({{"trained_commit", ck.meta_value("commit")}, {"split", split}, {"schedule", inner.schedule.text},
            {"mode", ttt::mode_name(inner.mode)}, {"path", ttt::path_name(inner.path)},
            {"carry_token_factor", m.model.carry_factors()}, {"streams", r.streams}, {"read", how_read(r, o.reset)},
            {"reset_at_documents", o.reset}, {"documents_read_alone", o.reset ? r.pieces : 0}, {"scored_tokens", r.tokens},
            {"split_tokens", split_tokens}, {"read_tokens", r.read}, {"bpb", r.bpb},
            {"bpb_mean_over_streams", mean_over_streams(r)}, {"loss", r.loss}, {"stream_bpb", r.stream_bpb},
            {"stream_tokens", r.stream_tokens}, {"stream_names", names}, {"flops_per_token", r.flops_per_token},
            {"inner_flops_per_token", r.inner_flops_per_token}, {"loss_by_position_source", positions},
            {"loss_by_position", position_json(r.by_position)}, {"seconds", r.seconds}});
  std::cout << j.dump() << std::endl;
}

void run_eval(const EvalArgs& o) {
  const ttt::Checkpoint ck = ttt::load_checkpoint(o.checkpoint);
  const std::string source = o.checkpoint + " (its config)";
  const Device device = run_device(o.device, parse_config(ck.config_text, source));
  const TrainedModel m = load_trained(ck, o.checkpoint, device);
  const EvalConfig& ec = m.config.eval;
  ttt::InnerRun inner = ec.inner;
  if (!o.schedule.empty()) inner.schedule = ttt::parse_schedule(o.schedule);
  if (!o.mode.empty()) inner.mode = ttt::parse_mode(o.mode);
  if (!o.path.empty()) inner.path = ttt::parse_path(o.path);
  const std::string split = o.split.empty() ? ec.split : o.split;
  const Dataset ds = load_dataset(m.config.data);
  check_corpus(m, ds, o.checkpoint, o.other_corpus);
  if (o.streams) return run_stream_eval(o, m, inner, split, ds, ck);
  if (o.position_docs || o.position_len || o.reset || o.max_adapt || o.max_scored || o.max_segments)
    throw std::invalid_argument("ponder eval: --position-docs, --position-len, --reset-at-documents and --max-adapt, "
                                "--max-scored, --max-segments read held-out streams; add --streams");
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
                              {"trained_on_data_sha256", m.data_sha256},
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
  sub->add_flag("--other-corpus", opts->other_corpus,
                "Read the corpus even when it is not the one the checkpoint was trained on (both hashes in --json)");
  sub->add_option("--schedule", opts->schedule, "uniform-K or fixed:K1,K2,... (default: the config's eval.schedule)");
  sub->add_option("--mode", opts->mode, "carry or prefix (default: the config's)")
      ->check(CLI::IsMember({"carry", "prefix"}));
  sub->add_option("--path", opts->path, "dual or iterative (default: the config's)")
      ->check(CLI::IsMember({"dual", "iterative"}));
  sub->add_option("--split", opts->split, "valid or test (default: the config's)")
      ->check(CLI::IsMember({"valid", "test"}));
  sub->add_option("--max-windows", opts->max_windows, "Evenly spaced windows of the split; 0 = all")
      ->check(kNonNegative);
  add_device_override(sub, opts->device);
  sub->add_flag("--flops-by-layer", opts->flops_by_layer,
                "Also the FLOPs per token of one window's forward pass by section: embedding, each block's norm, "
                "mixer (TTT with its inner steps, or attention) and FFN, the final norm, the logits");
  sub->add_flag("--streams", opts->streams,
                "Read the split's held-out streams whole, the state carried from each one's first token to its last "
                "(cut as the config's streams: section says), instead of fixed windows from a fresh state");
  sub->add_flag("--reset-at-documents", opts->reset,
                "With --streams: reset the state at every document's start (each file of a repository's stream read "
                "alone, after the byte before it), scoring the same tokens; loss by position is then along each file");
  struct Cap {
    const char* flag;
    std::optional<int64_t>* value;
    const char* help;
  };
  for (const Cap& c : {Cap{"--max-adapt", &opts->max_adapt,
                           "With --streams: unscored tokens read before each scored segment, at most (default "
                           "streams.max_adapt; 0 = all)"},
                       Cap{"--max-scored", &opts->max_scored,
                           "With --streams: scored tokens per segment (default streams.max_scored; 0 = a stream's "
                           "whole scored part)"},
                       Cap{"--max-segments", &opts->max_segments,
                           "With --streams: segments kept per stream, evenly spaced (default streams.max_segments; 0 = "
                           "all: with --max-scored 0, every scored token of the split)"}})
    sub->add_option(c.flag, *c.value, c.help)->check(kNonNegative);
  sub->add_option("--position-docs", opts->position_docs,
                  "With --streams: loss by position from this many documents' starts (default streams.position_docs; "
                  "0 = along the streams)")
      ->check(kNonNegative);
  sub->add_option("--position-len", opts->position_len,
                  "With --streams: tokens read from each of those documents' starts (default streams.position_len)")
      ->check(CLI::PositiveNumber);
  sub->add_flag("--json", opts->json, "One JSON object (with the full loss-by-position array) instead of text");
  sub->callback([opts] { run_eval(*opts); });
}

PONDER_COMMAND(eval, register_eval);

}  // namespace ponder::cli
