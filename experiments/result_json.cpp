#include "experiments/result_json.h"

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

}  // namespace ponder::cli
