#include "experiments/study/compare.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>

#include "data/windows.h"
#include "experiments/study/method_build.h"
#include "experiments/study/replay.h"
#include "experiments/study/result_json.h"
#include "policy/episodes.h"
#include "tensor/cpu/runtime.h"

namespace ponder::cli {
namespace {

using policy::Episode;
using policy::Window;

std::vector<Window> to_windows(const data::TokenStream& tokens, const std::vector<data::Window>& ws, int64_t T) {
  std::vector<Window> out;
  for (const data::Window& w : ws) {
    data::Batch b = data::gather_windows(tokens, {w}, T);
    out.push_back({b.input, b.target});
  }
  return out;
}

// `count` windows of `tokens` drawn without replacement by `seed` from all non-overlapping windows, or all of them in
// order when count is 0; `picked` (when given) receives the indices of the windows drawn.
std::vector<Window> sample_windows(const data::TokenStream& tokens, int64_t T, int64_t count, uint64_t seed,
                                   std::vector<int64_t>* picked = nullptr) {
  data::EvalWindows all(tokens, T);
  if (all.size() < count)
    throw std::invalid_argument("compare: the split has " + std::to_string(all.size()) + " windows of " +
                                std::to_string(T) + " tokens, fewer than the " + std::to_string(count) + " asked for");
  std::vector<int64_t> ids(size_t(all.size()));
  std::iota(ids.begin(), ids.end(), 0);
  if (count > 0) {
    Generator gen(seed);
    ids = gen.permutation(all.size());
    ids.resize(size_t(count));
  }
  std::vector<data::Window> pick;
  for (int64_t i : ids) pick.push_back(all.windows()[size_t(i)]);
  if (picked) *picked = ids;
  return to_windows(tokens, pick, T);
}

// What is evaluated: windows (every prediction scored) or streams (predictions [from, to) of each scored).
struct EvalSet {
  std::vector<Window> windows;
  std::vector<std::pair<int64_t, int64_t>> scored;  // per window: the scored prediction range
  std::vector<size_t> doc;  // per window: the document it belongs to (a stream may be read as several segments)
  std::vector<std::string> names;  // per document
};

EvalSet whole(std::vector<Window> ws) {
  EvalSet e;
  for (const Window& w : ws) {
    e.doc.push_back(e.scored.size());
    e.scored.push_back({0, w.first.shape()[1]});
  }
  e.windows = std::move(ws);
  return e;
}

// Each stream as one (1, N) window, N rounded up to a multiple of `pad_to` with token 0 (after every scored position,
// so causality keeps it from changing any scored loss); prediction t (of token t + 1) is scored for t + 1 ≥
// first_scored.
// `doc[i]` names the document (of `names`) stream i belongs to.
EvalSet stream_set(const std::vector<data::StreamTokens>& streams, const std::vector<size_t>& doc,
                   std::vector<std::string> names, int64_t pad_to) {
  EvalSet e;
  e.doc = doc;
  e.names = std::move(names);
  for (const data::StreamTokens& s : streams) {
    const int64_t n = int64_t(s.tokens.size()) - 1, padded = (n + pad_to - 1) / pad_to * pad_to;
    std::vector<int64_t> in(size_t(padded), 0), tgt(size_t(padded), 0);
    for (int64_t t = 0; t < n; ++t) {
      in[size_t(t)] = s.tokens[size_t(t)];
      tgt[size_t(t)] = s.tokens[size_t(t + 1)];
    }
    e.windows.push_back({Tensor::from_ints(in, {1, padded}), Tensor::from_ints(tgt, {1, padded})});
    e.scored.push_back({s.first_scored - 1, n});
  }
  return e;
}

// Losses over the scored predictions; FLOPs per prediction read (the scored ones and the adaptation part alike).
// window_bpb holds one value per document: the segments of a stream are pooled, so the stream (repository) stays
// the unit the paired statistics resample.
SeedResult summarise(int seed, const std::vector<Episode>& eps, const EvalSet& set, double seconds) {
  SeedResult s;
  s.seed = seed;
  double read = 0, units = 0, ksum = 0;
  const size_t docs = set.doc.empty() ? 0 : *std::max_element(set.doc.begin(), set.doc.end()) + 1;
  std::vector<double> doc_sum(docs, 0), doc_n(docs, 0);
  for (size_t i = 0; i < eps.size(); ++i) {
    const Episode& ep = eps[i];
    const auto [from, to] = set.scored[i];
    double sum = 0;
    for (int64_t t = from; t < to; ++t) sum += ep.token_loss[size_t(t)];
    s.loss += sum;
    s.scored_tokens += double(to - from);
    doc_sum[set.doc[i]] += sum;
    doc_n[set.doc[i]] += double(to - from);
    read += double(to);
    s.base_per_token += double(ep.base);
    s.inner_per_token += double(ep.inner);
    s.overhead_per_token += double(ep.overhead);
    for (const policy::UnitRecord& r : ep.units) ksum += r.k;
    units += double(ep.units.size());
  }
  for (size_t d = 0; d < docs; ++d) s.window_bpb.push_back(doc_sum[d] / doc_n[d] / std::log(2.0));
  s.loss /= s.scored_tokens;
  s.bpb = s.loss / std::log(2.0);
  s.base_per_token /= read;
  s.inner_per_token /= read;
  s.overhead_per_token /= read;
  s.mean_k = ksum / units;
  s.seconds_per_token = seconds / read;
  return s;
}

// Every step count in `options` or used by any method, sorted; then each method's count of units per value.
// (A method may use counts outside the step options: PonderNet halts after any n ≤ N.)
void count_ks(const std::vector<int>& options, CompareResult& res) {
  std::set<int> all(options.begin(), options.end());
  for (const MethodResult& m : res.methods) all.insert(m.unit_k.begin(), m.unit_k.end());
  res.k_options.assign(all.begin(), all.end());
  for (MethodResult& m : res.methods) {
    m.k_hist.assign(res.k_options.size(), 0);
    for (int k : m.unit_k) m.k_hist[size_t(std::lower_bound(res.k_options.begin(), res.k_options.end(), k) - res.k_options.begin())]++;
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string run_key(const std::string& method, int seed) { return "run " + method + " seed " + std::to_string(seed); }
std::string frontier_key(double mu) { return "frontier mu " + nlohmann::json(mu).dump(); }
std::string method_key(const std::string& method) { return "method " + method; }

const methods::MethodSpec* first_oracle(const CompareOptions& opt) {
  for (const methods::MethodSpec& m : opt.methods)
    if (m.family == methods::MethodFamily::Oracle) return &m;
  return nullptr;
}

// The cell a frontier point belongs to: μ = compare.oracle_mu (0, the greedy oracle, by default) is the oracle's
// seed-0 run when the oracle is compared.
std::string frontier_cell(const CompareOptions& opt, double mu) {
  const methods::MethodSpec* oracle = first_oracle(opt);
  return mu == opt.oracle_mu && oracle ? run_key(oracle->name, 0) : frontier_key(mu);
}

// Whether this process computes `cell` (compare_cells names it).
bool owns(const CompareOptions& opt, const CellShare& share, const std::string& cell) {
  if (share.whole()) return true;
  const std::vector<std::string> cells = compare_cells(opt);
  const auto it = std::find(cells.begin(), cells.end(), cell);
  if (it == cells.end()) throw std::logic_error("compare: '" + cell + "' is not a cell of this comparison");
  return share.owns(it - cells.begin());
}

// The cell a method's run on seed `s` belongs to.
std::string seed_cell(const CompareOptions& opt, const std::string& method, bool oracle, int s) {
  return oracle ? run_key(method, opt.streams ? 0 : s) : method_key(method);
}

// Whether this process computes any seed of method `m`, so that it must calibrate or train it.
bool owns_method(const CompareOptions& opt, const CellShare& share, const methods::MethodSpec& m) {
  for (int s = 0; s < opt.seeds; ++s)
    if (owns(opt, share, seed_cell(opt, m.name, m.family == methods::MethodFamily::Oracle, s))) return true;
  return false;
}

nlohmann::json oracle_units_json(const OracleUnits& u, size_t from) {
  auto tail = [from](const std::vector<double>& v) { return std::vector<double>(v.begin() + long(from), v.end()); };
  return {{"k", tail(u.k)}, {"loss", tail(u.loss)}, {"entropy", tail(u.entropy)}, {"ttt_loss", tail(u.ttt_loss)},
          {"grad_norm", tail(u.grad_norm)}, {"tied", tail(u.tied)}, {"first_token", tail(u.first_token)}};
}

void append_oracle_units(const nlohmann::json& j, OracleUnits& u) {
  auto add = [&j](const char* key, std::vector<double>& v) {
    for (const auto& x : j.at(key)) v.push_back(number_or_nan(x));  // NaN: no completed unit before it
  };
  add("k", u.k);
  add("loss", u.loss);
  add("entropy", u.entropy);
  add("ttt_loss", u.ttt_loss);
  add("grad_norm", u.grad_norm);
  add("tied", u.tied);
  if (j.contains("first_token")) add("first_token", u.first_token);  // journals written before it was recorded
}

using Report = std::function<void(const std::string&, double, double)>;

// The oracle at `mu` on every window of the set, side by side (policy/episodes.h).
std::vector<Episode> oracle_episodes(const policy::Rollouts& ro, const EvalSet& set, const CompareOptions& opt, double mu,
                                     const policy::WindowProgress& progress) {
  const int jobs = policy::episode_jobs(ro.model(), opt.rollout, set.windows.size());
  return policy::run_episodes(set.windows, opt.rollout, progress, jobs,
                              [&](size_t i, const policy::RolloutOptions& o, int) {
                                const Window& w = set.windows[i];
                                return ro.oracle(w.first, w.second, opt.step_options, mu, opt.oracle_lookahead, o);
                              });
}

FrontierPoint frontier_point(const policy::Rollouts& ro, const EvalSet& set, const CompareOptions& opt, double mu,
                             const SeedResult* greedy, Journal& jr) {
  const std::string key = frontier_key(mu);
  if (const nlohmann::json* rec = jr.find(key))
    return read_record(jr, key, *rec, [](const nlohmann::json& r) { return r.get<FrontierPoint>(); });
  FrontierPoint p;
  if (mu == opt.oracle_mu && greedy) {  // the oracle itself, already run on these windows as a method
    p = {mu, greedy->bpb, greedy->inner_per_token, greedy->base_per_token, greedy->mean_k, greedy->window_bpb};
  } else {
    const std::vector<Episode> eps = oracle_episodes(ro, set, opt, mu, {});
    const SeedResult s = summarise(0, eps, set, 0);
    p = {mu, s.bpb, s.inner_per_token, s.base_per_token, s.mean_k, s.window_bpb};
  }
  jr.add(key, p);
  return p;
}

// The next μ to try so that the frontier gets a point closer to `budget` total FLOPs per token from below: the
// geometric mean of the largest μ whose point spends more than the budget and the smallest larger μ whose point
// fits (a quarter of it when the former is 0). NaN when the sweep does not straddle the budget or a point already
// lies within 0.5 % of it.
double next_mu(const std::vector<FrontierPoint>& f, double budget) {
  double over = -1, under = INFINITY, best_fit = 0;
  for (const FrontierPoint& p : f) {
    const double t = p.base_per_token + p.inner_per_token;
    if (t > budget * (1 + 1e-9)) over = std::max(over, p.mu);
    else best_fit = std::max(best_fit, t);
  }
  for (const FrontierPoint& p : f)
    if (p.mu > over && p.base_per_token + p.inner_per_token <= budget * (1 + 1e-9)) under = std::min(under, p.mu);
  if (over < 0 || !std::isfinite(under) || best_fit >= budget * 0.995) return NAN;
  return over > 0 ? std::sqrt(over * under) : under / 4;
}

// The oracle frontier: per unit minimise loss + μ·cost for each μ of the sweep, then compare.oracle_bisect more μ
// chosen by next_mu, so the oracle's headroom at the budget is read from a point that spends (nearly) the budget
// rather than from whichever sweep point happens to fall below it. Points sorted by μ.
std::vector<FrontierPoint> oracle_frontier(const policy::Rollouts& ro, const EvalSet& set, const CompareOptions& opt,
                                           const SeedResult* greedy, double budget, Journal& jr, const Report& report) {
  std::vector<FrontierPoint> f;
  const double n = double(opt.frontier_mus.size() + size_t(opt.oracle_bisect));
  for (double mu : opt.frontier_mus) {
    report("oracle frontier", double(f.size()), n);
    f.push_back(frontier_point(ro, set, opt, mu, greedy, jr));
  }
  for (int64_t i = 0; i < opt.oracle_bisect && std::isfinite(budget); ++i) {
    const double mu = next_mu(f, budget);
    if (!std::isfinite(mu)) break;
    report("oracle frontier (bisecting toward the budget)", double(f.size()), n);
    f.push_back(frontier_point(ro, set, opt, mu, greedy, jr));
  }
  std::stable_sort(f.begin(), f.end(), [](const FrontierPoint& a, const FrontierPoint& b) { return a.mu < b.mu; });
  return f;
}

struct Entry {
  MethodResult result;
  std::unique_ptr<policy::Policy> policy;  // null for the oracle and for methods whose seeds are all journaled
  policy::RolloutOptions rollout;
};

// The cost multiple of each step option and the budget's inner FLOPs, on the calibration windows; the learned
// methods' training windows are drawn here too (once, whichever method needs them first).
// `draw(count, seed)` gives the windows (calibration_windows).
MethodBudget measure_budget(const policy::Rollouts& ro, const std::function<std::vector<Window>(int64_t, uint64_t)>& draw,
                            const CompareOptions& opt, CompareResult& res) {
  MethodBudget b;
  b.cal = draw(opt.calib_windows, 12345);
  res.calibration_windows = int64_t(b.cal.size());
  for (const Window& w : b.cal) res.calibration_tokens += w.first.shape()[1];
  std::vector<double> inner_of_k;
  for (int k : opt.step_options) {
    policy::UniformPolicy p(k);
    const policy::CostSummary c = policy::run_windows(ro, b.cal, p, opt.rollout, 0);
    inner_of_k.push_back(c.inner_per_token);
    b.base_per_token = c.base_per_token;
  }
  for (double in : inner_of_k) res.k_cost_multiple.push_back((b.base_per_token + in) / b.base_per_token);
  policy::UniformPolicy p(int(opt.budget_k));
  b.budget_inner_per_token = res.budget_inner_per_token = policy::run_windows(ro, b.cal, p, opt.rollout, 0).inner_per_token;
  for (const methods::MethodSpec& m : opt.methods)
    if (m.family == methods::MethodFamily::Learned && b.learn.empty())
      b.learn = draw(opt.learn.train_windows, 777);
  return b;
}

// A method built (calibrated, trained), or restored from the journal when every seed of it is there already, so a
// resumed comparison does not calibrate or train again what it will not evaluate.
Entry prepare(const methods::MethodSpec& m, const policy::Rollouts& ro, const CompareOptions& opt, const MethodBudget& b,
              Journal& jr, const CompareProgress& progress) {
  Entry e;
  bool evaluated = true;
  for (int s = 0; s < opt.seeds; ++s) evaluated = evaluated && jr.find(run_key(m.name, s));
  e.rollout = opt.rollout;
  if (const nlohmann::json* built = jr.find("method " + m.name); evaluated && built) {
    read_record(jr, "method " + m.name, *built, [&](const nlohmann::json& r) {
      e.result.name = m.name;
      e.result.kind = methods::parse_kind(r.at("kind").get<std::string>());
      e.result.detail = r.at("detail").get<std::string>();
      e.result.curve = r.at("curve").get<std::vector<rl::IterationStats>>();
      e.result.train_seconds = r.at("train_seconds").get<double>();
      e.rollout.unit_batches = r.at("unit_batches").get<int64_t>();
      e.result.calib_target = r.value("calib_target", 0.0);  // absent in journals of older builds
      e.result.calib_achieved = r.value("calib_achieved", 0.0);
    });
  } else {
    BuiltMethod bm = build_method(m, ro, opt, b, progress);
    e.result = std::move(bm.result);
    e.policy = std::move(bm.policy);
    e.rollout = bm.rollout;
    jr.add("method " + m.name, {{"kind", methods::kind_name(e.result.kind)}, {"detail", e.result.detail}, {"curve", e.result.curve},
                                {"train_seconds", e.result.train_seconds}, {"unit_batches", e.rollout.unit_batches},
                                {"calib_target", e.result.calib_target}, {"calib_achieved", e.result.calib_achieved}});
  }
  e.result.unit_tokens = ro.model().config().mini_batch * e.rollout.unit_batches;
  return e;
}

// A method this process does not compute (a shard of the cells): its name, kind and decision unit only, which is what
// the streams' padding needs, so that every shard reads the streams as the whole comparison does.
Entry placeholder(const methods::MethodSpec& m, const policy::Rollouts& ro, const CompareOptions& opt) {
  Entry e;
  e.result.name = m.name;
  e.result.kind = m.kind();
  e.rollout = opt.rollout;
  if (m.family == methods::MethodFamily::Learned)
    e.rollout.unit_batches = methods::learned_unit_batches(m, opt.learn, ro.model().config().mini_batch, opt.rollout,
                                                  ro.layer_steps());
  e.result.unit_tokens = ro.model().config().mini_batch * e.rollout.unit_batches;
  return e;
}

// Every held-out stream, cut into segments and capped as configured (data::segment_stream), each padded to the
// smallest length every method's decision unit divides: padded positions cost FLOPs that are charged to the tokens
// read, so padding to more than that (e.g. the window length) would inflate every cost.
EvalSet prepare_streams(const std::vector<data::StreamTokens>* test_streams, const CompareOptions& opt,
                        const std::vector<Entry>& entries, int64_t mini_batch, CompareResult& res) {
  if (!test_streams || test_streams->empty()) throw std::invalid_argument("compare: streams mode needs held-out streams");
  std::vector<data::StreamTokens> capped;
  std::vector<size_t> doc;
  std::vector<std::string> names;
  for (const data::StreamTokens& st : *test_streams) {
    res.split_tokens += st.scored();
    bool kept = false;
    for (data::StreamTokens& c : stream_reads(st, opt))
      if (c.scored() > 0) {
        res.context_tokens += std::max<int64_t>(0, c.first_scored - 1);
        capped.push_back(std::move(c));
        doc.push_back(names.size());
        kept = true;
      }
    if (kept) names.push_back(st.name);
  }
  res.eval_tokens = data::scored_tokens(capped);
  res.segments = int64_t(capped.size());
  res.stream_reset = opt.stream_reset;
  int64_t pad_to = mini_batch;
  for (const Entry& e : entries) pad_to = std::lcm(pad_to, std::max<int64_t>(1, e.result.unit_tokens));
  EvalSet streams = stream_set(capped, doc, std::move(names), pad_to);
  res.stream_names = streams.names;
  return streams;
}

// Every replay's segments against the streams this comparison reads, before anything is calibrated or run.
void check_replays(const policy::Rollouts& ro, const std::vector<data::StreamTokens>* test_streams, const CompareOptions& opt) {
  std::vector<Entry> shapes;
  for (const methods::MethodSpec& m : opt.methods) shapes.push_back(placeholder(m, ro, opt));
  const int64_t unit = ro.model().config().mini_batch * opt.rollout.unit_batches;
  CompareResult scratch;
  std::vector<std::vector<int64_t>> inputs;
  for (const methods::MethodSpec& m : opt.methods) {
    if (m.family != methods::MethodFamily::Replay) continue;
    if (inputs.empty())
      for (const Window& w : prepare_streams(test_streams, opt, shapes, ro.model().config().mini_batch, scratch).windows)
        inputs.push_back(w.first.to_ints());
    check_replay_text(load_replay(m, unit, opt.step_options), inputs, unit);
  }
}

// Appends a copy of v's first n elements (copied out first: a vector's insert may not read from the vector itself).
template <class T>
void append_first(std::vector<T>& v, size_t n) {
  const std::vector<T> first(v.begin(), v.begin() + long(n));
  v.insert(v.end(), first.begin(), first.end());
}

// Streams mode: every seed reads the same streams and the oracle draws nothing, so its later seeds repeat seed 0
// exactly; copy it instead of rerunning the most expensive method.
void repeat_oracle_seed(MethodResult& o, int s, OracleUnits& u) {
  SeedResult again = o.seeds.front();
  again.seed = s;
  o.seeds.push_back(again);
  const size_t per_seed = o.unit_k.size() / size_t(s), units = u.k.size() / size_t(s);
  append_first(o.unit_k, per_seed);
  if (o.unit_loss.size() == per_seed * size_t(s)) append_first(o.unit_loss, per_seed);
  for (std::vector<double>* v : {&u.k, &u.loss, &u.entropy, &u.ttt_loss, &u.grad_norm, &u.tied, &u.first_token})
    if (v->size() >= units) append_first(*v, units);
  u.copies = s + 1;
}

// The oracle on every window, with its K and the difficulty scores it saw per unit (for the oracle analysis).
std::vector<Episode> run_oracle_set(const policy::Rollouts& ro, const EvalSet& set, const CompareOptions& opt,
                                    OracleUnits& units, const policy::WindowProgress& progress) {
  std::vector<Episode> eps = oracle_episodes(ro, set, opt, opt.oracle_mu, progress);
  const int64_t unit = ro.model().config().mini_batch * opt.rollout.unit_batches;
  for (size_t i = 0; i < eps.size(); ++i) {
    const std::vector<int64_t> ids = set.windows[i].first.to_ints();
    for (const policy::UnitRecord& r : eps[i].units) {
      units.first_token.push_back(double(ids[size_t(r.unit * unit)]));
      units.k.push_back(r.k);
      units.loss.push_back(r.features.prev_loss);
      units.entropy.push_back(r.features.prev_entropy);
      units.ttt_loss.push_back(r.features.ttt_loss);
      units.grad_norm.push_back(r.features.grad_norm);
      units.tied.push_back(r.tied ? 1.0 : 0.0);
    }
  }
  return eps;
}

// One method × seed: restored from the journal, or run and journaled.
void run_cell(Entry& e, int s, const EvalSet& set, const policy::Rollouts& ro, const CompareOptions& opt,
              CompareResult& res, Journal& jr, const policy::WindowProgress& progress) {
  MethodResult& m = e.result;
  if (const nlohmann::json* rec = jr.find(run_key(m.name, s))) {
    read_record(jr, run_key(m.name, s), *rec, [&](const nlohmann::json& r) {
      m.seeds.push_back(r.at("result").get<SeedResult>());
      for (const auto& k : r.at("unit_k")) m.unit_k.push_back(k.get<int>());
      if (r.contains("unit_loss"))  // journals written before it was recorded have none
        for (const auto& l : r.at("unit_loss")) m.unit_loss.push_back(number_or_nan(l));
      if (s == 0) m.passage_k = r.at("passage_k").get<std::vector<int>>();
      if (s == 0 && r.contains("passage_loss"))  // journals written before it was recorded have none
        m.passage_loss = r.at("passage_loss").get<std::vector<double>>();
      if (m.kind == methods::MethodKind::Oracle) append_oracle_units(r.at("oracle_units"), res.oracle_units);
    });
    return;
  }
  if (opt.streams && s > 0 && m.kind == methods::MethodKind::Oracle) return repeat_oracle_seed(m, s, res.oracle_units);
  const size_t oracle_from = res.oracle_units.k.size();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Episode> eps;
  if (m.kind == methods::MethodKind::Oracle) eps = run_oracle_set(ro, set, opt, res.oracle_units, progress);
  else policy::run_windows(ro, set.windows, *e.policy, e.rollout, uint64_t(s) * 7919, &eps, progress);
  m.seeds.push_back(summarise(s, eps, set, seconds_since(t0)));
  std::vector<int> unit_k;
  std::vector<double> unit_loss;
  for (const Episode& ep : eps)
    for (const policy::UnitRecord& r : ep.units) {
      unit_k.push_back(r.k);
      unit_loss.push_back(r.loss);
    }
  m.unit_k.insert(m.unit_k.end(), unit_k.begin(), unit_k.end());
  m.unit_loss.insert(m.unit_loss.end(), unit_loss.begin(), unit_loss.end());
  nlohmann::json rec{{"result", m.seeds.back()}, {"unit_k", unit_k}, {"unit_loss", unit_loss}};
  if (s == 0) {
    for (const policy::UnitRecord& r : eps[0].units) m.passage_k.push_back(r.k);
    m.passage_loss = eps[0].token_loss;
    rec["passage_k"] = m.passage_k;
    rec["passage_loss"] = m.passage_loss;
  }
  if (m.kind == methods::MethodKind::Oracle) rec["oracle_units"] = oracle_units_json(res.oracle_units, oracle_from);
  jr.add(run_key(m.name, s), rec);
}

// The oracle frontier on seed 0's windows (or the streams), then bisected toward the budget; a share of the cells
// computes only its points of the sweep (the bisection needs them all).
std::vector<FrontierPoint> frontier_of(const policy::Rollouts& ro, const EvalSet& set, const CompareOptions& opt,
                                       const std::vector<Entry>& entries, Journal& jr, const Report& report,
                                       const CellShare& share) {
  const auto oracle = std::find_if(entries.begin(), entries.end(), [](const Entry& e) { return e.result.kind == methods::MethodKind::Oracle; });
  const SeedResult* greedy = oracle != entries.end() && !oracle->result.seeds.empty() &&
                                     oracle->result.seeds.front().seed == 0
                                 ? &oracle->result.seeds.front()
                                 : nullptr;
  if (!share.whole()) {
    std::vector<FrontierPoint> f;
    for (double mu : opt.frontier_mus)
      if (owns(opt, share, frontier_cell(opt, mu))) f.push_back(frontier_point(ro, set, opt, mu, greedy, jr));
    return f;
  }
  const auto budget = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) {
    return e.result.name == "uniform-" + std::to_string(opt.budget_k) && !e.result.seeds.empty();
  });
  const double budget_total = budget == entries.end() ? NAN : budget->result.seeds.front().total_per_token();
  return oracle_frontier(ro, set, opt, greedy, budget_total, jr, report);
}

}  // namespace

OracleUnits OracleUnits::distinct() const {
  OracleUnits d;
  auto first = [this](const std::vector<double>& v) {
    return std::vector<double>(v.begin(), v.begin() + long(v.size() / size_t(std::max<int64_t>(copies, 1))));
  };
  d.k = first(k);
  d.loss = first(loss);
  d.entropy = first(entropy);
  d.ttt_loss = first(ttt_loss);
  d.grad_norm = first(grad_norm);
  d.tied = first(tied);
  d.first_token = first(first_token);
  return d;
}

std::vector<data::StreamTokens> stream_reads(const data::StreamTokens& st, const CompareOptions& opt) {
  std::vector<data::StreamTokens> segments =
      data::segment_stream(st, opt.stream_max_adapt, opt.stream_max_scored, opt.stream_max_segments);
  if (!opt.stream_reset) return segments;
  std::vector<data::StreamTokens> out;
  for (const data::StreamTokens& c : segments)
    for (data::StreamTokens& d : data::split_at_documents(c)) out.push_back(std::move(d));
  return out;
}

std::vector<Window> calibration_windows(const data::TokenStream& calib, const std::vector<data::StreamTokens>* calib_streams,
                                        const std::vector<data::StreamTokens>* test_streams, const CompareOptions& opt,
                                        int64_t count, uint64_t seed, int64_t unit) {
  if (opt.calibrate_from != "streams") return sample_windows(calib, opt.seq_len, count, seed);
  if (!calib_streams || calib_streams->empty())
    throw std::invalid_argument("compare.calibrate_from: streams, but there are no validation streams to calibrate on");
  std::set<std::string> scored;
  if (test_streams)
    for (const data::StreamTokens& st : *test_streams) scored.insert(st.name);
  CompareOptions every = opt;
  every.stream_max_segments = 0;  // every segment is a candidate; `count` of them are drawn below
  std::vector<data::StreamTokens> reads;
  std::vector<int64_t> lengths;  // predictions of each read, in whole units
  for (const data::StreamTokens& st : *calib_streams) {
    if (scored.count(st.name))
      throw std::invalid_argument("compare.calibrate_from: streams would calibrate on stream '" + st.name +
                                  "', which is also scored");
    for (data::StreamTokens& c : stream_reads(st, every)) {
      lengths.push_back((int64_t(c.tokens.size()) - 1) / unit * unit);
      reads.push_back(std::move(c));
    }
  }
  // One length for all: the learners batch their episodes unit by unit. The longest that half the reads reach (the
  // full segments, when most are); shorter reads (a stream's tail) are left out, longer ones lose their oldest tokens.
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const int64_t n = sorted.empty() ? 0 : sorted[(sorted.size() - 1) / 2];
  if (n == 0)
    throw std::invalid_argument("compare.calibrate_from: streams, but no validation stream segment holds a whole unit of " +
                                std::to_string(unit) + " tokens");
  std::vector<Window> all;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (lengths[i] < n) continue;
    const std::vector<int32_t>& t = reads[i].tokens;
    const auto from = t.end() - (n + 1);
    std::vector<int64_t> in(from, t.end() - 1), tgt(from + 1, t.end());
    all.push_back({Tensor::from_ints(in, {1, n}), Tensor::from_ints(tgt, {1, n})});
  }
  if (count >= int64_t(all.size())) return all;
  const std::vector<int64_t> ids = Generator(seed).permutation(int64_t(all.size()));
  std::vector<Window> pick;
  for (int64_t j = 0; j < count; ++j) pick.push_back(all[size_t(ids[size_t(j)])]);
  return pick;
}

std::vector<std::string> compare_cells(const CompareOptions& opt) {
  std::vector<std::string> cells;
  for (const methods::MethodSpec& m : opt.methods) {
    const bool oracle = m.family == methods::MethodFamily::Oracle;
    if (!oracle) cells.push_back(method_key(m.name));
    for (int s = 0; oracle && s < (opt.streams ? 1 : opt.seeds); ++s) cells.push_back(run_key(m.name, s));
  }
  for (double mu : opt.frontier_mus)
    if (first_oracle(opt) && frontier_cell(opt, mu) == frontier_key(mu)) cells.push_back(frontier_key(mu));
  return cells;
}

CompareResult run_compare(const ttt::Model& model, const data::TokenStream& calib, const data::TokenStream& test,
                          const CompareOptions& opt, const CompareProgress& progress, Journal* journal,
                          const std::vector<data::StreamTokens>* test_streams, const CellShare& share,
                          const std::vector<data::StreamTokens>* calib_streams) {
  if (model.num_ttt_layers() == 0)
    throw std::invalid_argument("compare: the model has no TTT layer (model.mixers are all attention), so there are no "
                                "inner steps to allocate");
  return run_compare(policy::LayerRollouts(model), calib, test, opt, progress, journal, test_streams, share,
                     calib_streams);
}

CompareResult run_compare(const policy::Rollouts& ro, const data::TokenStream& calib, const data::TokenStream& test,
                          const CompareOptions& given, const CompareProgress& progress, Journal* journal,
                          const std::vector<data::StreamTokens>* test_streams, const CellShare& share,
                          const std::vector<data::StreamTokens>* calib_streams) {
  Journal off;
  Journal& jr = journal ? *journal : off;
  const auto t_start = std::chrono::steady_clock::now();
  // A sequence runs unit by unit, and every op is tiny: threads inside an op cost more than they save (measured:
  // 0.43 s on 1 thread vs 0.66 s on 2 for the same episodes). So each op runs on one thread, and the threads run
  // whole episodes side by side instead (policy/episodes.h).
  const int threads = cpu::num_threads();
  CompareOptions opt = given;
  if (opt.rollout.jobs == 0) opt.rollout.jobs = threads;
  cpu::set_num_threads(1);
  struct Restore {
    int n;
    ~Restore() { cpu::set_num_threads(n); }
  } restore{threads};
  auto report = [&](const std::string& what, double done, double total) {
    if (progress) progress(what, done, total);
  };
  CompareResult res;
  res.mini_batch = ro.model().config().mini_batch;
  res.carry_token_factor = ro.model().carry_factors();
  report("measuring costs", 0, 1);
  int64_t unit = res.mini_batch;  // every method's decision unit divides a calibration stream segment
  for (const methods::MethodSpec& m : opt.methods) unit = std::lcm(unit, placeholder(m, ro, opt).result.unit_tokens);
  if (opt.streams) check_replays(ro, test_streams, opt);
  const MethodBudget fitting = measure_budget(
      ro, [&](int64_t n, uint64_t seed) { return calibration_windows(calib, calib_streams, test_streams, opt, n, seed, unit); },
      opt, res);
  std::vector<Entry> entries;
  for (const methods::MethodSpec& m : opt.methods)
    entries.push_back(owns_method(opt, share, m) ? prepare(m, ro, opt, fitting, jr, report) : placeholder(m, ro, opt));

  // What is scored: sampled windows per seed, every window of the split (windows_per_seed 0; the same for every
  // seed), or every held-out stream (the same for every seed). The share of the split scored is counted either way.
  const EvalSet streams = opt.streams ? prepare_streams(test_streams, opt, entries, res.mini_batch, res) : EvalSet{};
  std::set<int64_t> scored_windows;
  if (!opt.streams) res.split_tokens = data::EvalWindows(test, opt.seq_len).size() * opt.seq_len;
  auto eval_set = [&](int s) {
    if (opt.streams) return streams;
    std::vector<int64_t> ids;
    EvalSet set = whole(sample_windows(test, opt.seq_len, opt.windows_per_seed, 1000 + uint64_t(s), &ids));
    scored_windows.insert(ids.begin(), ids.end());
    res.eval_tokens = int64_t(scored_windows.size()) * opt.seq_len;
    res.windows_per_seed = int64_t(ids.size());
    return set;
  };
  const double total = double(entries.size()) * double(opt.seeds);
  double done = 0;
  for (int s = 0; s < opt.seeds; ++s) {
    const EvalSet set = eval_set(s);
    if (s == 0) {
      const std::vector<int64_t> ids = set.windows[0].first.to_ints();
      res.passage_tokens.assign(ids.begin(), ids.end());
    }
    for (Entry& e : entries) {
      const std::string what = e.result.name + " (seed " + std::to_string(s) + ")";
      const double at = done++;
      report(what, at, total);
      if (owns(opt, share, seed_cell(opt, e.result.name, e.result.kind == methods::MethodKind::Oracle, s)))
        run_cell(e, s, set, ro, opt, res, jr, [&](double f) { report(what, at + f, total); });
    }
  }
  // The oracle's frontier only when the oracle is compared: each point is an oracle pass (many uniform ones).
  if (first_oracle(opt)) res.frontier = frontier_of(ro, eval_set(0), opt, entries, jr, report, share);
  for (Entry& e : entries) res.methods.push_back(std::move(e.result));
  count_ks(opt.step_options, res);
  res.seconds = seconds_since(t_start);
  return res;
}

}  // namespace ponder::cli
