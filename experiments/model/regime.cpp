#include "experiments/model/regime.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numbers>
#include <sstream>
#include <stdexcept>

#include "data/ngram.h"
#include "experiments/study/plots.h"
#include "experiments/study/result_json.h"
#include "experiments/study/result_util.h"

namespace ponder::cli {

RegimeOptions regime_options(const StreamsConfig& streams) {
  RegimeOptions ro;
  ro.chunk = streams.chunk;
  ro.max_adapt = streams.max_adapt;
  ro.max_scored = streams.max_scored;
  ro.max_segments = streams.max_segments;
  ro.max_ngram = int(streams.max_ngram);
  ro.position_docs = streams.position_docs;
  ro.position_len = streams.position_len;
  ro.reset_ks = streams.reset_ks;
  return ro;
}
namespace {

// Mean loss of uniform-K's scored predictions at positions [lo, hi) (bins wholly inside the range).
double mean_between(const ttt::PositionBins& b, int64_t lo, int64_t hi) {
  double sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < b.lo.size(); ++i)
    if (b.lo[i] >= lo && b.hi[i] <= hi) {
      sum += b.loss_sum[i];
      n += b.count[i];
    }
  return n > 0 ? sum / double(n) : NAN;
}

double ngram_bits(const data::NgramModel& model, const std::vector<data::StreamTokens>& streams, int64_t& tokens) {
  double bits = 0;
  tokens = 0;
  for (const data::StreamTokens& s : streams) {
    if (s.first_scored >= int64_t(s.tokens.size())) continue;
    bits += model.bits(s.tokens, size_t(s.first_scored), s.tokens.size());
    tokens += s.scored();
  }
  return bits;
}

}  // namespace

namespace {

// The pass of uniform-K among `passes`, or null.
const ttt::StreamEvalResult* pass_of(const std::vector<std::pair<int, ttt::StreamEvalResult>>& passes, int k) {
  for (const auto& [kk, r] : passes)
    if (kk == k) return &r;
  return nullptr;
}

}  // namespace

const ttt::StreamEvalResult* RegimeResult::uniform_k(int k) const { return pass_of(uniform, k); }
const ttt::StreamEvalResult* RegimeResult::reset_k(int k) const { return pass_of(reset, k); }

bool RegimeResult::carry_alive() const {
  for (double f : carry_factors)
    if (f > 0) return true;
  return false;
}

bool RegimeResult::loss_falls() const {
  const ttt::StreamEvalResult* u1 = uniform_k(1);
  if (!u1) return false;
  const double early = mean_between(u1->by_position, 16, 64), late = mean_between(u1->by_position, 64, INT64_MAX);
  return late < early;
}

bool RegimeResult::ttt_helps() const {
  const ttt::StreamEvalResult *u0 = uniform_k(0), *u1 = uniform_k(1);
  return u0 && u1 && u1->bpb < u0->bpb;
}

double RegimeResult::benefit(int64_t lo, int64_t hi) const {
  const ttt::StreamEvalResult *u0 = uniform_k(0), *u1 = uniform_k(1);
  if (!u0 || !u1) return NAN;
  return mean_between(u0->by_position, lo, hi) - mean_between(u1->by_position, lo, hi);
}

bool RegimeResult::benefit_grows() const { return benefit(64, INT64_MAX) > benefit(16, 64); }

double RegimeResult::best_ngram() const {
  double best = INFINITY;
  for (const auto& [n, bpb] : ngram_bpb) best = std::min(best, bpb);
  return best;
}

std::vector<data::StreamTokens> document_starts(const std::vector<std::vector<int32_t>>& docs, int64_t max_docs,
                                                int64_t len, int64_t& candidates) {
  std::vector<const std::vector<int32_t>*> longer;
  for (const std::vector<int32_t>& d : docs)
    if (int64_t(d.size()) >= len) longer.push_back(&d);
  candidates = int64_t(longer.size());
  const int64_t n = std::min<int64_t>(max_docs, candidates);
  std::vector<data::StreamTokens> out;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& d = *longer[size_t(i * candidates / n)];
    out.push_back({"doc" + std::to_string(i), std::vector<int32_t>(d.begin(), d.begin() + len), 1});
  }
  return out;
}

namespace {

// The attention-only baseline's read: no inner steps to choose, only the chunk.
ttt::StreamEvalOptions attention_options(int64_t chunk) {
  ttt::StreamEvalOptions so;
  so.chunk = chunk;
  return so;
}

// uniform-K read with the state carried, at the model's own inner step size, in the comparison's mode.
ttt::StreamEvalOptions uniform_options(const TrainedModel& m, int k, const RegimeOptions& opt) {
  ttt::StreamEvalOptions so;
  so.inner = {ttt::parse_schedule("uniform-" + std::to_string(k)), opt.mode, ttt::InnerPath::Dual};
  so.chunk = opt.chunk;
  so.lr_mult = eval_options(m, so.inner).lr_mult;
  return so;
}

// A uniform pass's name in progress lines and the journal (carry mode's as before prefix mode was read here).
std::string uniform_name(int k, const RegimeOptions& opt) {
  return "uniform-" + std::to_string(k) + (opt.mode == ttt::StepMode::Prefix ? " (prefix mode)" : "");
}

// The regime's passes as one progress line: each pass weighs the tokens it reads, its own progress (a share of
// them) reported inside it.
class PassProgress {
 public:
  PassProgress(const CompareProgress& report, double total) : report_(report), total_(total) {}
  // `so` reporting as the pass `what` over `tokens` tokens; the next pass starts where it ends.
  ttt::StreamEvalOptions track(ttt::StreamEvalOptions so, const std::string& what, double tokens) {
    if (!report_) return so;
    const double at = done_;
    done_ += tokens;
    report_(what, at, total_);
    so.progress = [report = report_, what, at, tokens, total = total_](double f) { report(what, at + f * tokens, total); };
    return so;
  }

 private:
  CompareProgress report_;
  double total_, done_ = 0;
};

// One pass, or the same pass from the journal of an interrupted run (the key names the model, schedule and streams).
ttt::StreamEvalResult journaled(Journal* journal, const std::string& key, const std::function<ttt::StreamEvalResult()>& run) {
  if (journal)
    if (const nlohmann::json* rec = journal->find("regime/" + key)) {
      std::fprintf(stderr, "regime: %s reused from %s\n", key.c_str(), journal->path().c_str());
      return read_record(*journal, "regime/" + key, *rec, stream_result_from_json);
    }
  ttt::StreamEvalResult r = run();
  if (journal) journal->add("regime/" + key, stream_result_json(r));
  return r;
}

// The documents loss by position is read on when streams.position_docs > 0 (RegimeOptions).
std::vector<data::StreamTokens> position_documents(RegimeResult& r, const Dataset& ds, const RegimeOptions& opt) {
  std::vector<data::StreamTokens> docs = cli::position_documents(ds, opt, r.position_candidates);
  r.position_docs = int64_t(docs.size());
  r.position_len = docs.empty() ? 0 : opt.position_len;
  return docs;
}

// Replaces every result's by_position with the bins of `docs` read from their start.
void read_positions(RegimeResult& r, const TrainedModel& m, const TrainedModel* attention,
                    const std::vector<data::StreamTokens>& docs, const RegimeOptions& opt, PassProgress& passes,
                    Journal* journal) {
  const double n = tokens_of(docs);
  for (auto& [k, res] : r.uniform) {
    const std::string what = uniform_name(k, opt) + " by position";
    const ttt::StreamEvalOptions so = passes.track(uniform_options(m, k, opt), what, n);
    res.by_position = journaled(journal, what, [&] { return ttt::evaluate_streams(m.model, docs, so); }).by_position;
  }
  if (attention && r.attention) {
    const ttt::StreamEvalOptions so = passes.track(attention_options(opt.chunk), "attention-only by position", n);
    r.attention->by_position =
        journaled(journal, "attention-only by position", [&] { return ttt::evaluate_streams(attention->model, docs, so); })
            .by_position;
  }
  std::fprintf(stderr, "regime: loss by position from %lld documents' first %lld tokens\n", (long long)r.position_docs,
               (long long)r.position_len);
}

// Whether some stream joins documents: otherwise a reset at every document reads exactly what the carried pass read.
bool several_documents(const std::vector<data::StreamTokens>& streams) {
  for (const data::StreamTokens& s : streams)
    if (!s.doc_starts.empty()) return true;
  return false;
}

// The held-out streams the regime reads, cut by RegimeOptions' caps; counts the split's and the scored tokens.
std::vector<data::StreamTokens> regime_streams(RegimeResult& r, const Dataset& ds, const RegimeOptions& opt) {
  std::vector<data::StreamTokens> streams = held_out_streams(ds, opt, r.split_tokens);
  r.eval_tokens = data::scored_tokens(streams);
  r.streams = int64_t(streams.size());
  return streams;
}

}  // namespace

double tokens_of(const std::vector<data::StreamTokens>& streams) { return data::stream_tokens(streams); }

std::vector<data::StreamTokens> held_out_streams(const Dataset& ds, const RegimeOptions& opt, int64_t& split_tokens) {
  std::vector<data::StreamTokens> streams;
  for (const data::StreamTokens& s : ds.streams(opt.split)) {
    split_tokens += s.scored();
    for (data::StreamTokens& c : data::segment_stream(s, opt.max_adapt, opt.max_scored, opt.max_segments))
      if (c.scored() > 0) streams.push_back(std::move(c));
  }
  if (streams.empty()) throw std::invalid_argument("regime: the " + opt.split + " split has no scored token");
  return streams;
}

std::vector<data::StreamTokens> position_documents(const Dataset& ds, const RegimeOptions& opt, int64_t& candidates) {
  if (opt.position_docs <= 0) return {};
  std::vector<data::StreamTokens> docs =
      document_starts(ds.documents_read(opt.split).docs, opt.position_docs, opt.position_len, candidates);
  if (docs.empty())
    throw std::invalid_argument("regime: streams.position_docs asks for documents of at least " +
                                std::to_string(opt.position_len) + " tokens, and the " + opt.split +
                                " split has none; lower streams.position_len or set position_docs to 0");
  return docs;
}

RegimeResult run_regime(const TrainedModel& m, const TrainedModel* attention, const Dataset& ds,
                        const RegimeOptions& opt, const CompareProgress& progress, Journal* journal) {
  RegimeResult r;
  r.mode = opt.mode;
  r.carry_factors = m.model.carry_factors();
  r.model_layers = m.model.config().layers;
  if (attention) {
    r.attention_layers = attention->model.config().layers;
    r.attention_window = attention->model.config().attn_window;
  }
  const std::vector<data::StreamTokens> streams = regime_streams(r, ds, opt);
  const std::vector<data::StreamTokens> docs = position_documents(r, ds, opt);  // before the passes: fails fast
  const std::vector<int> reset_ks = several_documents(streams) ? opt.reset_ks : std::vector<int>{};
  const double passes_each = double(opt.ks.size()) + (attention ? 1 : 0);
  PassProgress passes(progress, passes_each * (tokens_of(streams) + tokens_of(docs)) +
                                    double(reset_ks.size()) * tokens_of(streams));
  for (int k : opt.ks) {
    const double n = tokens_of(streams);
    const std::string what = uniform_name(k, opt);
    const ttt::StreamEvalOptions so = passes.track(uniform_options(m, k, opt), what, n);
    r.uniform.push_back({k, journaled(journal, what, [&] { return ttt::evaluate_streams(m.model, streams, so); })});
    std::fprintf(stderr, "regime: %s on %lld streams: %.4f bits/byte (%.1f s)\n", what.c_str(), (long long)r.streams,
                 r.uniform.back().second.bpb, r.uniform.back().second.seconds);
  }
  for (int k : reset_ks) {
    const std::string what = uniform_name(k, opt) + ", reset at every document";
    ttt::StreamEvalOptions so = passes.track(uniform_options(m, k, opt), what, tokens_of(streams));
    so.reset_at_documents = true;
    r.reset.push_back({k, journaled(journal, what, [&] { return ttt::evaluate_streams(m.model, streams, so); })});
    std::fprintf(stderr, "regime: %s (%lld documents): %.4f bits/byte (%.1f s)\n", what.c_str(),
                 (long long)r.reset.back().second.pieces, r.reset.back().second.bpb, r.reset.back().second.seconds);
  }
  if (attention) {
    const ttt::StreamEvalOptions so = passes.track(attention_options(opt.chunk), "attention-only", tokens_of(streams));
    r.attention = journaled(journal, "attention-only", [&] { return ttt::evaluate_streams(attention->model, streams, so); });
    std::fprintf(stderr, "regime: attention-only: %.4f bits/byte (%.1f s)\n", r.attention->bpb, r.attention->seconds);
  }
  for (int n = 1; n <= opt.max_ngram; ++n) {
    const data::NgramModel ng(n, int(m.model.config().vocab), ds.train.docs);
    int64_t tokens = 0;
    const double bits = ngram_bits(ng, streams, tokens);
    r.ngram_bpb[n] = bits / double(tokens);
  }
  if (!docs.empty()) read_positions(r, m, attention, docs, opt, passes, journal);
  return r;
}

CarriedVsReset carried_vs_reset(const RegimeResult& r, int k) {
  CarriedVsReset c;
  const ttt::StreamEvalResult *carried = r.uniform_k(k), *reset = r.reset_k(k);
  if (!carried || !reset) return c;
  c.delta = carried->bpb - reset->bpb;
  for (size_t i = 0; i < carried->stream_bpb.size() && i < reset->stream_bpb.size(); ++i) {
    const double a = carried->stream_bpb[i], b = reset->stream_bpb[i];
    if (std::isnan(a) || std::isnan(b)) continue;
    ++c.compared;
    c.better += a < b;
  }
  return c;
}

void add_regime_json(const RegimeResult& r, nlohmann::ordered_json& j) {
  j["carry_token_factor"] = r.carry_factors;
  nlohmann::ordered_json ng = nlohmann::ordered_json::object();
  for (const auto& [n, bpb] : r.ngram_bpb) ng[std::to_string(n)] = bpb;
  j["ngram_bpb"] = ng;
  nlohmann::ordered_json bins = nlohmann::ordered_json::array();
  const ttt::PositionBins& ref = r.uniform.front().second.by_position;
  for (size_t i = 0; i < ref.lo.size(); ++i) {
    nlohmann::ordered_json b = {{"lo", ref.lo[i]}, {"hi", ref.hi[i]}, {"tokens", ref.count[i]}};
    nlohmann::ordered_json loss = nlohmann::ordered_json::object();
    for (const auto& [k, res] : r.uniform)
      loss["uniform-" + std::to_string(k)] = i < res.by_position.lo.size() ? res.by_position.mean(i) : NAN;
    if (r.attention) loss["attention"] = i < r.attention->by_position.lo.size() ? r.attention->by_position.mean(i) : NAN;
    b["mean_loss"] = loss;
    bins.push_back(b);
  }
  j["loss_by_position"] = bins;
  j["eval_tokens"] = r.eval_tokens;
  const nlohmann::ordered_json source =
      r.position_docs > 0 ? nlohmann::ordered_json{{"read", "documents from their first token"},
                                                   {"documents", r.position_docs}, {"tokens_each", r.position_len},
                                                   {"documents_that_long", r.position_candidates}}
                          : nlohmann::ordered_json{{"read", "the streams above, every prediction"}};
  nlohmann::ordered_json reg = {{"mode", ttt::mode_name(r.mode)}, {"streams", r.streams}, {"split_tokens", r.split_tokens},
                                {"stream_tokens", r.uniform.front().second.stream_tokens},  // scored, per stream
                                {"loss_by_position_source", source},
                                {"scored_fraction", r.scored_fraction()}, {"carry_alive", r.carry_alive()},
                                {"loss_falls_with_position", r.loss_falls()}, {"ttt_beats_uniform0", r.ttt_helps()},
                                {"ttt_benefit_early_nats", r.benefit(16, 64)},
                                {"ttt_benefit_late_nats", r.benefit(64, INT64_MAX)},
                                {"ttt_benefit_grows_with_position", r.benefit_grows()},
                                {"best_ngram_bpb", r.best_ngram()}};
  nlohmann::ordered_json sched = nlohmann::ordered_json::array();
  for (const auto& [k, res] : r.uniform)
    sched.push_back({{"schedule", "uniform-" + std::to_string(k)}, {"bpb", res.bpb}, {"flops_per_token", res.flops_per_token},
                     {"inner_flops_per_token", res.inner_flops_per_token}, {"stream_bpb", res.stream_bpb},
                     {"seconds", res.seconds}});
  reg["uniform"] = sched;
  nlohmann::ordered_json resets = nlohmann::ordered_json::array();
  for (const auto& [k, res] : r.reset) {
    const CarriedVsReset c = carried_vs_reset(r, k);
    resets.push_back({{"schedule", "uniform-" + std::to_string(k)}, {"bpb", res.bpb}, {"documents", res.pieces},
                      {"carried_minus_reset_bpb", c.delta}, {"streams_better_carried", c.better},
                      {"streams_compared", c.compared}, {"flops_per_token", res.flops_per_token},
                      {"stream_bpb", res.stream_bpb}, {"seconds", res.seconds}});
  }
  reg["reset_at_documents"] = resets;
  if (r.attention)
    reg["attention"] = {{"checkpoint", r.attention_checkpoint}, {"bpb", r.attention->bpb},
                        {"flops_per_token", r.attention->flops_per_token}, {"stream_bpb", r.attention->stream_bpb}};
  j["regime"] = reg;
}

namespace {

std::string position_source(const RegimeResult& r) {
  if (r.position_docs == 0) return "every prediction read in the streams above";
  return "read on " + std::to_string(r.position_docs) + " held-out documents from their first token, each alone with a "
         "fresh state and cut to " + std::to_string(r.position_len) + " tokens (of the " +
         std::to_string(r.position_candidates) + " documents that long), so every bin holds the same documents";
}

// The answer to "does carrying the state across documents help?" for uniform-K.
std::string reset_bullet(const RegimeResult& r, int k, const ttt::StreamEvalResult& reset) {
  const ttt::StreamEvalResult* carried = r.uniform_k(k);
  if (!carried) return "";
  const CarriedVsReset c = carried_vs_reset(r, k);
  return "- State carried across each stream's documents vs reset at every document's start (uniform-" +
         std::to_string(k) + "; " + std::to_string(reset.pieces) + " documents read alone, each after the token "
         "before it, the same scored tokens): " + fmt("%.4f", carried->bpb) + " vs " + fmt("%.4f", reset.bpb) +
         " bits/byte → **carrying " + (c.delta < 0 ? "helps" : "does not help") + "** (" + fmt("%+.4f", c.delta) +
         "; better carried on " + std::to_string(c.better) + " of " + std::to_string(c.compared) + " streams). A reset "
         "also shortens what the state is carried through: a read with the context bounded instead "
         "(`streams.max_adapt`, `max_scored`) tells length from file boundaries.\n";
}

}  // namespace

std::string regime_markdown(const RegimeResult& r) {
  std::ostringstream md;
  const ttt::StreamEvalResult *u0 = r.uniform_k(0), *u1 = r.uniform_k(1);
  md << "## Is the question live here?\n\n"
     << r.streams << " held-out streams or stream segments (`streams.max_scored`, `max_segments`), each read whole "
     << "(state carried from its first token to its last), "
     << r.eval_tokens << " scored tokens = " << fmt("%.1f", 100 * r.scored_fraction()) << " % of the split's "
     << r.split_tokens << ". Bits/byte here are over the scored tokens, each counted once, so a long stream weighs "
     << "by its length; the comparison's tables average per stream, so the two differ when the streams' lengths and "
     << "losses go together.";
  if (r.mode == ttt::StepMode::Prefix)
    md << " The uniform schedules take their inner steps in `prefix` mode, as the comparison does: K ≥ 1 change each "
       << "unit's own outputs, whatever the carry factor.";
  md << "\n\n";
  std::string factors;
  for (double f : r.carry_factors) factors += (factors.empty() ? "" : ", ") + fmt("%.4g", f);
  md << "- Carry factor per TTT layer (η's last-row token factor; 0 = the carried state never moves): " << factors
     << " → **" << (r.carry_alive() ? "alive" : "dead in every layer") << "**.\n";
  if (u1) {
    const ttt::PositionBins& b = u1->by_position;
    md << "- Loss by position under uniform-1 (" << (r.position_docs > 0 ? "documents from their start" : "streams")
       << "): positions 16–63 " << fmt("%.4f", mean_between(b, 16, 64))
       << " nats, 64 and beyond " << fmt("%.4f", mean_between(b, 64, INT64_MAX)) << " → **"
       << (r.loss_falls() ? "falls beyond the first mini-batches" : "does not fall") << "**";
    if (u0)
      md << " (uniform-0, no inner learning: " << fmt("%.4f", mean_between(u0->by_position, 16, 64)) << " → "
         << fmt("%.4f", mean_between(u0->by_position, 64, INT64_MAX)) << ": what the text does at those positions, "
         << "whatever the model reads)";
    md << ".\n";
  }
  if (u0 && u1)
    md << "- What inner learning buys (uniform-0 − uniform-1, same tokens): positions 16–63 "
       << fmt("%.4f", r.benefit(16, 64)) << " nats, 64 and beyond " << fmt("%.4f", r.benefit(64, INT64_MAX)) << " → **"
       << (r.benefit_grows() ? "grows with context" : "does not grow with context") << "** (a state that gathers "
       << "context across units helps more the more it has read; a benefit flat in position comes from within-unit "
       << "updates).\n";
  if (u0 && u1)
    md << "- TTT (uniform-1) " << fmt("%.4f", u1->bpb) << " vs uniform-0 (no inner learning) " << fmt("%.4f", u0->bpb)
       << " bits/byte → **" << (r.ttt_helps() ? "TTT helps" : "TTT does not help") << "** ("
       << fmt("%+.4f", u1->bpb - u0->bpb) << ").\n";
  if (u1 && !r.ngram_bpb.empty())
    md << "- Best count n-gram " << fmt("%.4f", r.best_ngram()) << " bits/byte on the same tokens → the TTT model is **"
       << (u1->bpb < r.best_ngram() ? "better" : "worse") << "** (" << fmt("%+.4f", u1->bpb - r.best_ngram()) << ").\n";
  if (r.attention && u1)
    md << "- Attention-only model (" << r.attention_layers << " blocks"
       << (r.attention_layers == r.model_layers ? " like the TTT model" : ", the TTT model has " + std::to_string(r.model_layers))
       << ", " << (r.attention_window > 0 ? "window of " + std::to_string(r.attention_window) + " tokens" : "full causal")
       << ") " << fmt("%.4f", r.attention->bpb)
       << " bits/byte → TTT is " << (u1->bpb < r.attention->bpb ? "better" : "worse") << " ("
       << fmt("%+.4f", u1->bpb - r.attention->bpb) << ").\n";
  for (const auto& [k, res] : r.reset) md << reset_bullet(r, k, res);
  md << "\n| model | bits/byte | FLOPs/token read | inner TTT share |\n|---|---|---|---|\n";
  const auto row = [&md](const std::string& name, const ttt::StreamEvalResult& res) {
    md << "| " << name << " | " << fmt("%.4f", res.bpb) << " | " << fmt("%.4g", res.flops_per_token) << " | "
       << fmt("%.1f %%", 100 * res.inner_flops_per_token / res.flops_per_token) << " |\n";
  };
  for (const auto& [k, res] : r.uniform) row("TTT uniform-" + std::to_string(k), res);
  for (const auto& [k, res] : r.reset) row("TTT uniform-" + std::to_string(k) + ", reset at every document", res);
  if (r.attention)
    md << "| attention-only | " << fmt("%.4f", r.attention->bpb) << " | " << fmt("%.4g", r.attention->flops_per_token)
       << " | – |\n";
  for (const auto& [n, bpb] : r.ngram_bpb) md << "| " << n << "-gram (interpolated Kneser–Ney) | " << fmt("%.4f", bpb) << " | – | – |\n";
  md << "\nThe inner share bounds what any allocation can save: skipping every inner step saves at most that share "
        "of the FLOPs.\n\nLoss by position (mean nats per token; `loss_by_position.png`), "
     << position_source(r) << ":\n\n| positions |";
  for (const auto& [k, res] : r.uniform) md << " uniform-" << k << " |";
  md << (r.attention ? " attention |" : "") << " tokens |\n|---|";
  for (size_t i = 0; i < r.uniform.size() + (r.attention ? 1 : 0) + 1; ++i) md << "---|";
  md << "\n";
  const ttt::PositionBins& ref = r.uniform.front().second.by_position;
  for (size_t i = 0; i < ref.lo.size(); ++i) {
    if (ref.count[i] == 0) continue;
    md << "| " << ref.lo[i] << "–" << ref.hi[i] - 1 << " |";
    for (const auto& [k, res] : r.uniform) md << " " << fmt("%.4f", res.by_position.mean(i)) << " |";
    if (r.attention) md << " " << fmt("%.4f", r.attention->by_position.mean(i)) << " |";
    md << " " << ref.count[i] << " |\n";
  }
  return md.str();
}

void write_position_plot(const RegimeResult& r, const std::string& dir) {
  const std::string dat = dir + "/loss_by_position.dat", gp = dir + "/loss_by_position.gp";
  std::vector<std::pair<std::string, const ttt::PositionBins*>> lines;
  for (const auto& [k, res] : r.uniform) lines.push_back({"TTT uniform-" + std::to_string(k), &res.by_position});
  if (r.attention) lines.push_back({"attention-only", &r.attention->by_position});
  {
    std::ofstream f(dat);
    if (!f) throw std::runtime_error("cannot write " + dat);
    for (const auto& [name, bins] : lines) {
      f << "# " << name << "\n";
      for (size_t i = 0; i < bins->lo.size(); ++i)
        if (bins->count[i] > 0)
          f << std::sqrt(double(bins->lo[i]) * double(bins->hi[i] - 1)) << ' ' << bins->mean(i) / std::numbers::ln2 << '\n';
      f << "\n\n";
    }
  }
  std::ofstream g(gp);
  g << "set terminal pngcairo size 900,560 font 'sans,11'\nset output '" << dir << "/loss_by_position.png'\n"
    << "set title 'Loss by position " << (r.position_docs > 0 ? "in held-out documents read from their start"
                                                              : "in the held-out streams") << "'\n"
    << "set xlabel 'position of the predicted token (log scale)'\n"
    << "set ylabel 'bits per byte'\nset logscale x 2\nset grid\nset key outside right top\nplot ";
  for (size_t i = 0; i < lines.size(); ++i)
    g << (i ? ", " : "") << "'" << dat << "' index " << i << " using 1:2 with linespoints lw 2 title '" << lines[i].first
      << "'";
  g << "\n";
  g.close();
  run_gnuplot(gp);
}

}  // namespace ponder::cli
