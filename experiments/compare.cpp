#include "experiments/compare.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <cmath>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>

#include "data/windows.h"
#include "experiments/result_json.h"
#include "tensor/cpu/cpu_kernels.h"

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

// `count` windows of `tokens` drawn without replacement by `seed` from all non-overlapping windows.
std::vector<Window> sample_windows(const data::TokenStream& tokens, int64_t T, int64_t count, uint64_t seed) {
  data::EvalWindows all(tokens, T);
  if (all.size() < count)
    throw std::invalid_argument("compare: the split has " + std::to_string(all.size()) + " windows of " +
                                std::to_string(T) + " tokens, fewer than the " + std::to_string(count) + " asked for");
  Generator gen(seed);
  std::vector<int64_t> perm = gen.permutation(all.size());
  std::vector<data::Window> pick;
  for (int64_t i = 0; i < count; ++i) pick.push_back(all.windows()[size_t(perm[size_t(i)])]);
  return to_windows(tokens, pick, T);
}

// What is evaluated: windows (every prediction scored) or streams (predictions [from, to) of each scored).
struct EvalSet {
  std::vector<Window> windows;
  std::vector<std::pair<int64_t, int64_t>> scored;  // per window: the scored prediction range
  std::vector<std::string> names;
};

EvalSet whole(std::vector<Window> ws) {
  EvalSet e;
  for (const Window& w : ws) e.scored.push_back({0, w.first.shape()[1]});
  e.windows = std::move(ws);
  return e;
}

// Each stream as one (1, N) window, N rounded up to a multiple of `pad_to` with token 0 (after every scored position,
// so causality keeps it from changing any scored loss); prediction t (of token t + 1) is scored for t + 1 ≥
// first_scored.
EvalSet stream_set(const std::vector<data::StreamTokens>& streams, int64_t pad_to) {
  EvalSet e;
  for (const data::StreamTokens& s : streams) {
    const int64_t n = int64_t(s.tokens.size()) - 1, padded = (n + pad_to - 1) / pad_to * pad_to;
    std::vector<int64_t> in(size_t(padded), 0), tgt(size_t(padded), 0);
    for (int64_t t = 0; t < n; ++t) {
      in[size_t(t)] = s.tokens[size_t(t)];
      tgt[size_t(t)] = s.tokens[size_t(t + 1)];
    }
    e.windows.push_back({Tensor::from_ints(in, {1, padded}), Tensor::from_ints(tgt, {1, padded})});
    e.scored.push_back({s.first_scored - 1, n});
    e.names.push_back(s.name);
  }
  return e;
}

// Losses over the scored predictions; FLOPs per prediction read (the scored ones and the adaptation part alike).
SeedResult summarise(int seed, const std::vector<Episode>& eps, const EvalSet& set, double seconds) {
  SeedResult s;
  s.seed = seed;
  double read = 0, units = 0, ksum = 0;
  for (size_t i = 0; i < eps.size(); ++i) {
    const Episode& ep = eps[i];
    const auto [from, to] = set.scored[i];
    double sum = 0;
    for (int64_t t = from; t < to; ++t) sum += ep.token_loss[size_t(t)];
    s.loss += sum;
    s.scored_tokens += double(to - from);
    s.window_bpb.push_back(sum / double(to - from) / std::log(2.0));
    read += double(to);
    s.base_per_token += double(ep.base);
    s.inner_per_token += double(ep.inner);
    s.overhead_per_token += double(ep.overhead);
    for (const policy::UnitRecord& r : ep.units) ksum += r.k;
    units += double(ep.units.size());
  }
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

int parse_k(const std::string& s, const std::string& method) {
  try {
    size_t used = 0;
    int k = std::stoi(s, &used);
    if (used == s.size() && k >= 0) return k;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("compare: bad step count in method '" + method + "'");
}

std::string run_key(const std::string& method, int seed) { return "run " + method + " seed " + std::to_string(seed); }

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

FrontierPoint frontier_point(const ttt::Model& model, const EvalSet& set, const CompareOptions& opt, double mu,
                             const SeedResult* greedy, Journal& jr) {
  const std::string key = "frontier mu " + nlohmann::json(mu).dump();
  if (const nlohmann::json* rec = jr.find(key)) return rec->get<FrontierPoint>();
  FrontierPoint p;
  if (mu == 0 && greedy) {  // μ = 0 is the greedy oracle itself, already run on these windows as a method
    p = {0.0, greedy->bpb, greedy->inner_per_token, greedy->base_per_token, greedy->mean_k, greedy->window_bpb};
  } else {
    std::vector<Episode> eps;
    for (const Window& w : set.windows)
      eps.push_back(policy::run_oracle(model, w.first, w.second, opt.step_options, mu, opt.oracle_lookahead, opt.rollout));
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
std::vector<FrontierPoint> oracle_frontier(const ttt::Model& model, const EvalSet& set, const CompareOptions& opt,
                                           const SeedResult* greedy, double budget, Journal& jr, const Report& report) {
  std::vector<FrontierPoint> f;
  const double n = double(opt.frontier_mus.size() + size_t(opt.oracle_bisect));
  for (double mu : opt.frontier_mus) {
    report("oracle frontier", double(f.size()), n);
    f.push_back(frontier_point(model, set, opt, mu, greedy, jr));
  }
  for (int64_t i = 0; i < opt.oracle_bisect && std::isfinite(budget); ++i) {
    const double mu = next_mu(f, budget);
    if (!std::isfinite(mu)) break;
    report("oracle frontier (bisecting toward the budget)", double(f.size()), n);
    f.push_back(frontier_point(model, set, opt, mu, greedy, jr));
  }
  std::stable_sort(f.begin(), f.end(), [](const FrontierPoint& a, const FrontierPoint& b) { return a.mu < b.mu; });
  return f;
}

}  // namespace

CompareResult run_compare(const ttt::Model& model, const data::TokenStream& calib, const data::TokenStream& test,
                          const CompareOptions& opt, const CompareProgress& progress, Journal* journal,
                          const std::vector<data::StreamTokens>* test_streams) {
  if (model.num_ttt_layers() == 0)
    throw std::invalid_argument("compare: the model has no TTT layer (model.mixers are all attention), so there are no "
                                "inner steps to allocate");
  Journal off;
  Journal& jr = journal ? *journal : off;
  const auto t_start = std::chrono::steady_clock::now();
  // One sequence at a time, unit by unit: every op is tiny, and threads cost more than they save
  // (measured: 0.43 s on 1 thread vs 0.66 s on 2 for the same episodes).
  const int threads = cpu::num_threads();
  cpu::set_num_threads(1);
  struct Restore {
    int n;
    ~Restore() { cpu::set_num_threads(n); }
  } restore{threads};
  auto report = [&](const std::string& what, double done, double total) {
    if (progress) progress(what, done, total);
  };
  CompareResult res;
  res.mini_batch = model.config().mini_batch;
  res.carry_token_factor = model.carry_factors();
  const std::vector<Window> cal = sample_windows(calib, opt.seq_len, opt.calib_windows, 12345);

  // Budget and measured cost multiples of each step option (calibration split).
  report("measuring costs", 0, 1);
  std::vector<double> inner_of_k;
  double base = 0;
  for (int k : opt.step_options) {
    policy::UniformPolicy p(k);
    policy::CostSummary c = policy::run_windows(model, cal, p, opt.rollout, 0);
    inner_of_k.push_back(c.inner_per_token);
    base = c.base_per_token;
  }
  for (double in : inner_of_k) res.k_cost_multiple.push_back((base + in) / base);
  {
    policy::UniformPolicy p(opt.budget_k);
    res.budget_inner_per_token = policy::run_windows(model, cal, p, opt.rollout, 0).inner_per_token;
  }

  // Build every method's policy once (calibrations happen here).
  struct Entry {
    MethodResult result;
    std::unique_ptr<policy::Policy> policy;  // null for oracles and for methods whose seeds are all journaled
    policy::RolloutOptions rollout;
  };
  const double base_per_token = base;
  std::vector<Window> learn_windows;  // validation windows the learned methods train on (drawn once)
  std::vector<Entry> entries;
  for (const std::string& m : opt.methods) {
    Entry e;
    e.result.name = m;
    e.rollout = opt.rollout;
    bool evaluated = true;  // every seed of this method is in the journal
    for (int s = 0; s < opt.seeds; ++s) evaluated = evaluated && jr.find(run_key(m, s));
    const nlohmann::json* built = jr.find("method " + m);
    if (evaluated && built) {  // nothing left to run: skip the calibration or training, keep what it reported
      e.result.kind = built->at("kind").get<std::string>();
      e.result.detail = built->at("detail").get<std::string>();
      e.result.curve = built->at("curve").get<std::vector<rl::IterationStats>>();
      e.result.train_seconds = built->at("train_seconds").get<double>();
      e.rollout.unit_batches = built->at("unit_batches").get<int64_t>();
    } else if (is_learned(m)) {
      if (learn_windows.empty())
        learn_windows = sample_windows(calib, opt.seq_len, opt.learn.train_windows, 777);
      LearnedMethod lm = build_learned(m, model, learn_windows, opt.learn,
                                       {int(opt.budget_k), res.budget_inner_per_token / base_per_token}, opt.rollout,
                                       [&](double d, double t) { report("training " + m, d, t); });
      e.result.kind = lm.kind;
      e.result.detail = lm.detail;
      e.result.curve = std::move(lm.curve);
      e.result.train_seconds = lm.train_seconds;
      e.rollout = lm.rollout;
      e.policy = std::move(lm.policy);
    } else if (m.rfind("uniform-", 0) == 0) {
      e.result.kind = "uniform";
      e.policy = std::make_unique<policy::UniformPolicy>(parse_k(m.substr(8), m));
    } else if (m.rfind("fixed-", 0) == 0) {  // fixed-K/N
      auto slash = m.find('/');
      if (slash == std::string::npos) throw std::invalid_argument("compare: fixed method must be fixed-K/N, got " + m);
      e.result.kind = "fixed";
      e.policy = std::make_unique<policy::FixedPolicy>(parse_k(m.substr(6, slash - 6), m), parse_k(m.substr(slash + 1), m));
    } else if (m == "random") {
      policy::UniformPolicy lo(opt.low), hi(opt.high);
      const double c_lo = policy::run_windows(model, cal, lo, opt.rollout, 0).inner_per_token;
      const double c_hi = policy::run_windows(model, cal, hi, opt.rollout, 0).inner_per_token;
      const double q = std::clamp((res.budget_inner_per_token - c_lo) / (c_hi - c_lo), 0.0, 1.0);
      e.result.kind = "random";
      e.result.detail = "K=" + std::to_string(opt.high) + " with p=" + std::to_string(q) + ", else K=" + std::to_string(opt.low);
      e.policy = std::make_unique<policy::RandomPolicy>(opt.low, opt.high, q);
    } else if (m == "entropy" || m == "loss" || m == "gradnorm" || m == "ttt-loss") {
      report("calibrating " + m, 0, 1);
      policy::Score sc = policy::parse_score(m);
      double target = res.budget_inner_per_token;
      if (opt.calibrate_on == "total") {  // the score is computed for every unit, so its cost does not depend on K
        policy::ThresholdPolicy all_low(sc, {INFINITY}, {int(opt.low), int(opt.high)}, int(opt.low));
        const double overhead = policy::run_windows(model, cal, all_low, opt.rollout, 0).overhead_per_token;
        target -= overhead;
        if (target < 0)
          throw std::invalid_argument("compare: " + m + "'s overhead (" + std::to_string(overhead) + " FLOPs/token) "
                                      "exceeds uniform-" + std::to_string(opt.budget_k) + "'s inner FLOPs; with "
                                      "compare.calibrate_on: total it cannot match the budget");
      }
      policy::Calibration c = policy::calibrate_budget(model, cal, sc, opt.low, opt.high, opt.low, target, opt.rollout);
      e.result.kind = "heuristic";
      e.result.detail = "threshold " + std::to_string(c.threshold) + ", calibration cost " + std::to_string(c.achieved) +
                        " vs target " + std::to_string(c.target) + " FLOPs/token";
      e.policy = std::make_unique<policy::ThresholdPolicy>(sc, std::vector<double>{c.threshold},
                                                           std::vector<int>{int(opt.low), int(opt.high)}, int(opt.low));
    } else if (m == "oracle") {
      e.result.kind = "oracle";
      e.result.detail = "greedy, lookahead " + std::to_string(opt.oracle_lookahead) + " unit(s)";
    } else {
      throw std::invalid_argument("compare: unknown method '" + m +
                                  "' (uniform-K, fixed-K/N, random, entropy, loss, gradnorm, ttt-loss, oracle, "
                                  "learned-reinforce, learned-ppo-pid, pondernet)");
    }
    if (!(evaluated && built))
      jr.add("method " + m, {{"kind", e.result.kind}, {"detail", e.result.detail}, {"curve", e.result.curve},
                             {"train_seconds", e.result.train_seconds}, {"unit_batches", e.rollout.unit_batches}});
    e.result.unit_tokens = model.config().mini_batch * e.rollout.unit_batches;
    entries.push_back(std::move(e));
  }

  // What is scored: sampled windows per seed, or every held-out stream (the same for every seed).
  EvalSet streams;
  if (opt.streams) {
    if (!test_streams || test_streams->empty()) throw std::invalid_argument("compare: streams mode needs held-out streams");
    std::vector<data::StreamTokens> capped;
    for (const data::StreamTokens& st : *test_streams) {
      res.split_tokens += st.scored();
      data::StreamTokens c = data::cap_stream(st, opt.stream_max_adapt, opt.stream_max_scored);
      if (c.scored() > 0) capped.push_back(std::move(c));
    }
    res.eval_tokens = data::scored_tokens(capped);
    // Pad to the smallest length every method's decision unit divides: padded positions cost FLOPs that are
    // charged to the tokens read, so padding to more than that (e.g. the window length) would inflate every cost.
    int64_t pad_to = model.config().mini_batch;
    for (const Entry& e : entries) pad_to = std::lcm(pad_to, std::max<int64_t>(1, e.result.unit_tokens));
    streams = stream_set(capped, pad_to);
    res.stream_names = streams.names;
  }
  auto eval_set = [&](int s) {
    return opt.streams ? streams : whole(sample_windows(test, opt.seq_len, opt.windows_per_seed, 1000 + uint64_t(s)));
  };

  // Methods × seeds.
  const double total = double(entries.size()) * opt.seeds;
  double done = 0;
  for (int s = 0; s < opt.seeds; ++s) {
    const EvalSet set = eval_set(s);
    const std::vector<Window>& ws = set.windows;
    if (s == 0) {
      std::vector<int64_t> ids = ws[0].first.to_ints();
      res.passage_tokens.assign(ids.begin(), ids.end());
    }
    for (Entry& e : entries) {
      report(e.result.name + " (seed " + std::to_string(s) + ")", done++, total);
      const std::string key = run_key(e.result.name, s);
      if (const nlohmann::json* rec = jr.find(key)) {
        e.result.seeds.push_back(rec->at("result").get<SeedResult>());
        for (const auto& k : rec->at("unit_k")) e.result.unit_k.push_back(k.get<int>());
        if (s == 0) e.result.passage_k = rec->at("passage_k").get<std::vector<int>>();
        if (s == 0 && rec->contains("passage_loss"))  // journals written before it was recorded have none
          e.result.passage_loss = rec->at("passage_loss").get<std::vector<double>>();
        if (e.result.kind == "oracle") append_oracle_units(rec->at("oracle_units"), res.oracle_units);
        continue;
      }
      // Streams mode: every seed reads the same streams and the oracle draws nothing, so its later seeds repeat
      // seed 0 exactly; copy it instead of rerunning the most expensive method.
      if (opt.streams && s > 0 && e.result.kind == "oracle") {
        SeedResult again = e.result.seeds.front();
        again.seed = s;
        e.result.seeds.push_back(again);
        const size_t per_seed = e.result.unit_k.size() / size_t(s), units = res.oracle_units.k.size() / size_t(s);
        e.result.unit_k.insert(e.result.unit_k.end(), e.result.unit_k.begin(), e.result.unit_k.begin() + long(per_seed));
        OracleUnits& u = res.oracle_units;
        for (std::vector<double>* v : {&u.k, &u.loss, &u.entropy, &u.ttt_loss, &u.grad_norm, &u.tied, &u.first_token})
          if (v->size() >= units) v->insert(v->end(), v->begin(), v->begin() + long(units));
        continue;
      }
      std::vector<Episode> eps;
      const size_t oracle_from = res.oracle_units.k.size();
      const auto t0 = std::chrono::steady_clock::now();
      if (e.result.kind != "oracle") {
        policy::run_windows(model, ws, *e.policy, e.rollout, uint64_t(s) * 7919, &eps);
      } else {
        for (const Window& w : ws)
          eps.push_back(policy::run_oracle(model, w.first, w.second, opt.step_options, 0.0, opt.oracle_lookahead,
                                           opt.rollout));
        const int64_t unit = model.config().mini_batch * opt.rollout.unit_batches;
        for (size_t i = 0; i < eps.size(); ++i) {
          const std::vector<int64_t> ids = ws[i].first.to_ints();
          for (const policy::UnitRecord& r : eps[i].units) {
            res.oracle_units.first_token.push_back(double(ids[size_t(r.unit * unit)]));
            res.oracle_units.k.push_back(r.k);
            res.oracle_units.loss.push_back(r.features.prev_loss);
            res.oracle_units.entropy.push_back(r.features.prev_entropy);
            res.oracle_units.ttt_loss.push_back(r.features.ttt_loss);
            res.oracle_units.grad_norm.push_back(r.features.grad_norm);
            res.oracle_units.tied.push_back(r.tied ? 1.0 : 0.0);
          }
        }
      }
      e.result.seeds.push_back(summarise(s, eps, set, seconds_since(t0)));
      std::vector<int> unit_k;
      for (const Episode& ep : eps)
        for (const policy::UnitRecord& r : ep.units) unit_k.push_back(r.k);
      e.result.unit_k.insert(e.result.unit_k.end(), unit_k.begin(), unit_k.end());
      if (s == 0) {
        for (const policy::UnitRecord& r : eps[0].units) e.result.passage_k.push_back(r.k);
        e.result.passage_loss = eps[0].token_loss;
      }
      nlohmann::json rec{{"result", e.result.seeds.back()}, {"unit_k", unit_k}};
      if (s == 0) {
        rec["passage_k"] = e.result.passage_k;
        rec["passage_loss"] = e.result.passage_loss;
      }
      if (e.result.kind == "oracle") rec["oracle_units"] = oracle_units_json(res.oracle_units, oracle_from);
      jr.add(key, rec);
    }
  }

  // The oracle frontier on seed 0's windows (or the streams), then bisected toward the budget.
  const auto oracle = std::find_if(entries.begin(), entries.end(), [](const Entry& e) { return e.result.kind == "oracle"; });
  const SeedResult* greedy = oracle != entries.end() && !oracle->result.seeds.empty() ? &oracle->result.seeds.front() : nullptr;
  const auto budget = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) {
    return e.result.name == "uniform-" + std::to_string(opt.budget_k) && !e.result.seeds.empty();
  });
  const double budget_total = budget == entries.end() ? NAN : budget->result.seeds.front().total_per_token();
  res.frontier = oracle_frontier(model, eval_set(0), opt, greedy, budget_total, jr, report);
  for (Entry& e : entries) res.methods.push_back(std::move(e.result));
  count_ks(opt.step_options, res);
  res.seconds = seconds_since(t_start);
  return res;
}

}  // namespace ponder::cli
