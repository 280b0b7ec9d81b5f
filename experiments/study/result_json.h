// JSON forms of a comparison's results: per-seed results and training curves as results.json writes them,
// and everything the journal stores to resume a run.
// Templates over nlohmann's json types, so both json and ordered_json use them (found by ADL).
#pragma once
#include <nlohmann/json.hpp>

#include "experiments/study/compare.h"
#include "ttt/stream_eval.h"

namespace ponder::rl {

template <class J>
void to_json(J& j, const IterationStats& it) {
  j = J{{"iteration", it.iteration}, {"loss", it.loss}, {"mean_k", it.mean_k}, {"cost", it.cost},
        {"expected_k", it.expected_k}, {"entropy", it.entropy}, {"objective", it.objective},
        {"lambda", it.lambda}, {"approx_kl", it.approx_kl}, {"clip_fraction", it.clip_fraction},
        {"value_loss", it.value_loss}, {"seconds", it.seconds}};
}
void from_json(const nlohmann::json& j, IterationStats& it);

}  // namespace ponder::rl

namespace ponder::cli {

// JSON has no NaN: nlohmann writes it as null, so null reads back as NaN.
double number_or_nan(const nlohmann::json& v);

template <class J>
void to_json(J& j, const SeedResult& s) {
  j = J{{"seed", s.seed}, {"loss_nats", s.loss}, {"bpb", s.bpb}, {"base_flops_per_token", s.base_per_token},
        {"inner_flops_per_token", s.inner_per_token}, {"overhead_flops_per_token", s.overhead_per_token},
        {"total_flops_per_token", s.total_per_token()}, {"mean_k", s.mean_k},
        {"seconds_per_token", s.seconds_per_token}, {"scored_tokens", s.scored_tokens}, {"window_bpb", s.window_bpb}};
}
void from_json(const nlohmann::json& j, SeedResult& s);

template <class J>
void to_json(J& j, const FrontierPoint& p) {
  j = J{{"mu", p.mu}, {"bpb", p.bpb}, {"inner_flops_per_token", p.inner_per_token},
        {"base_flops_per_token", p.base_per_token}, {"mean_k", p.mean_k}, {"window_bpb", p.window_bpb}};
}
void from_json(const nlohmann::json& j, FrontierPoint& p);

// A pass over whole streams (ttt::evaluate_streams) with every field, as the regime's journal stores it: a reused pass
// equals the recomputed one bit for bit (doubles are written with enough digits to read back exactly, NaN as null).
nlohmann::json stream_result_json(const ttt::StreamEvalResult& r);
ttt::StreamEvalResult stream_result_from_json(const nlohmann::json& j);

}  // namespace ponder::cli
