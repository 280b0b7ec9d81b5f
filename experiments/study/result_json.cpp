#include "experiments/study/result_json.h"

#include <cmath>

namespace ponder {
namespace cli {

double number_or_nan(const nlohmann::json& v) { return v.is_null() ? std::nan("") : v.get<double>(); }

}  // namespace cli
namespace {

double number(const nlohmann::json& j, const char* key) { return cli::number_or_nan(j.at(key)); }

}  // namespace
}  // namespace ponder

namespace ponder::rl {

void from_json(const nlohmann::json& j, IterationStats& it) {
  j.at("iteration").get_to(it.iteration);
  it.loss = number(j, "loss");
  it.mean_k = number(j, "mean_k");
  it.cost = number(j, "cost");
  it.expected_k = number(j, "expected_k");
  it.entropy = number(j, "entropy");
  it.objective = number(j, "objective");
  it.lambda = number(j, "lambda");
  it.approx_kl = number(j, "approx_kl");
  it.clip_fraction = number(j, "clip_fraction");
  it.value_loss = number(j, "value_loss");
  it.seconds = number(j, "seconds");
}

}  // namespace ponder::rl

namespace ponder::cli {

void from_json(const nlohmann::json& j, SeedResult& s) {
  j.at("seed").get_to(s.seed);
  s.loss = number(j, "loss_nats");
  s.bpb = number(j, "bpb");
  s.base_per_token = number(j, "base_flops_per_token");
  s.inner_per_token = number(j, "inner_flops_per_token");
  s.overhead_per_token = number(j, "overhead_flops_per_token");
  s.mean_k = number(j, "mean_k");
  s.seconds_per_token = number(j, "seconds_per_token");
  s.scored_tokens = number(j, "scored_tokens");
  s.window_bpb.clear();
  for (const auto& v : j.at("window_bpb")) s.window_bpb.push_back(number_or_nan(v));
}

void from_json(const nlohmann::json& j, FrontierPoint& p) {
  p.mu = number(j, "mu");
  p.bpb = number(j, "bpb");
  p.inner_per_token = number(j, "inner_flops_per_token");
  p.base_per_token = number(j, "base_flops_per_token");
  p.mean_k = number(j, "mean_k");
  p.window_bpb.clear();
  if (j.contains("window_bpb"))  // journals written before it was recorded: no paired interval
    for (const auto& v : j.at("window_bpb")) p.window_bpb.push_back(number_or_nan(v));
}

nlohmann::json stream_result_json(const ttt::StreamEvalResult& r) {
  const ttt::PositionBins& b = r.by_position;
  const ttt::UnitCost& u = r.inner;
  return {{"streams", r.streams}, {"pieces", r.pieces}, {"tokens", r.tokens}, {"read", r.read}, {"loss", r.loss}, {"bpb", r.bpb},
          {"stream_bpb", r.stream_bpb}, {"stream_tokens", r.stream_tokens},
          {"by_position", {{"lo", b.lo}, {"hi", b.hi}, {"loss_sum", b.loss_sum}, {"count", b.count}}},
          {"flops", {{"n", r.flops.n}, {"bytes_moved", r.flops.bytes_moved}}},
          {"inner", {{"layer", u.layer}, {"unit", u.unit}, {"steps", u.steps}, {"inner_forward", u.inner_forward},
                     {"inner_grad", u.inner_grad}, {"update", u.update}, {"output", u.output}}},
          {"flops_per_token", r.flops_per_token}, {"inner_flops_per_token", r.inner_flops_per_token},
          {"seconds", r.seconds}};
}

ttt::StreamEvalResult stream_result_from_json(const nlohmann::json& j) {
  ttt::StreamEvalResult r;
  j.at("streams").get_to(r.streams);
  r.pieces = j.value("pieces", r.streams);  // journals written before resets were read: one read per stream
  j.at("tokens").get_to(r.tokens);
  j.at("read").get_to(r.read);
  r.loss = number(j, "loss");
  r.bpb = number(j, "bpb");
  for (const auto& v : j.at("stream_bpb")) r.stream_bpb.push_back(number_or_nan(v));
  j.at("stream_tokens").get_to(r.stream_tokens);
  const nlohmann::json& b = j.at("by_position");
  b.at("lo").get_to(r.by_position.lo);
  b.at("hi").get_to(r.by_position.hi);
  for (const auto& v : b.at("loss_sum")) r.by_position.loss_sum.push_back(number_or_nan(v));
  b.at("count").get_to(r.by_position.count);
  j.at("flops").at("n").get_to(r.flops.n);
  j.at("flops").at("bytes_moved").get_to(r.flops.bytes_moved);
  const nlohmann::json& u = j.at("inner");
  u.at("layer").get_to(r.inner.layer);
  u.at("unit").get_to(r.inner.unit);
  u.at("steps").get_to(r.inner.steps);
  u.at("inner_forward").get_to(r.inner.inner_forward);
  u.at("inner_grad").get_to(r.inner.inner_grad);
  u.at("update").get_to(r.inner.update);
  u.at("output").get_to(r.inner.output);
  r.flops_per_token = number(j, "flops_per_token");
  r.inner_flops_per_token = number(j, "inner_flops_per_token");
  r.seconds = number(j, "seconds");
  return r;
}

}  // namespace ponder::cli
