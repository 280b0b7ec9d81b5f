#include "policy/adapt_rollout.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ponder::policy {
namespace {

// A sequence cut into units of `b` tokens (a chunk each).
struct Chunks {
  Tensor input, target;  // (1, N)
  int64_t b = 0, n = 0;
  Tensor ids(int64_t u) const { return raw::slice(input, 1, u * b, (u + 1) * b); }
  Tensor tgt(int64_t u) const { return raw::slice(target, 1, u * b, (u + 1) * b); }
};

Chunks cut(const ttt::Model& base, const Tensor& input, const Tensor& target, const RolloutOptions& opt) {
  if (opt.unit_batches < 1) throw std::invalid_argument("adapt: unit_batches must be >= 1");
  Chunks c{input, target, base.config().mini_batch * opt.unit_batches, 0};
  if (input.dim() != 2 || input.shape()[0] != 1 || input.shape() != target.shape() || input.shape()[1] % c.b != 0)
    throw std::invalid_argument("adapt: input and target must be (1, N) with N a multiple of the chunk, " +
                                std::to_string(c.b) + " tokens; got " + shape_str(input.shape()) + " and " +
                                shape_str(target.shape()));
  c.n = input.shape()[1] / c.b;
  return c;
}

// Step 1 of the protocol for chunk u: score it (base FLOPs) and record its losses (measurement).
Tensor read_chunk(ttt::FastWeights& fw, const Chunks& c, int64_t u, ttt::ModelState& state, UnitRecord& rec,
                  Episode& ep) {
  rec.unit = u;
  FlopScope read;
  Tensor logits = fw.read(c.ids(u), state, c.tgt(u));
  rec.base_flops = read.counts().total();
  FlopScope measure;  // the evaluation's own loss, charged to no method
  const std::vector<double> losses = unit_losses(logits, c.tgt(u));
  rec.measure_flops = measure.counts().total();
  rec.loss = mean_of(losses);
  ep.token_loss.insert(ep.token_loss.end(), losses.begin(), losses.end());
  return logits;
}

void add_unit(Episode& ep, UnitRecord rec) {
  ep.base += rec.base_flops;
  ep.inner += rec.inner_flops;
  ep.overhead += rec.overhead_flops;
  ep.units.push_back(std::move(rec));
}

// Mean loss of the `lookahead` chunks after u, from the state after u: read with the fast weights as they are
// (steps_each 0), or with `steps_each` updates on each before the next is read (a rollout of uniform-steps_each),
// after which the weights, the optimiser and the last chunk read are put back as they were.
double lookahead_loss(ttt::FastWeights& fw, ttt::FastOptimizer& optim, const Chunks& c, int64_t u, int lookahead,
                      int steps_each, const ttt::ModelState& after_u) {
  ttt::ModelState s = after_u;
  std::vector<double> losses;
  const int64_t last = std::min<int64_t>(u + lookahead, c.n - 1);
  if (steps_each == 0) {
    for (int64_t a = u + 1; a <= last; ++a) {
      const std::vector<double> more = unit_losses(fw.peek(c.ids(a), s), c.tgt(a));
      losses.insert(losses.end(), more.begin(), more.end());
    }
    return mean_of(losses);
  }
  const ttt::FastOptimizer::State weights = optim.save();
  const ttt::FastWeights::LastRead read = fw.last_read();
  for (int64_t a = u + 1; a <= last; ++a) {
    const std::vector<double> more = unit_losses(fw.read(c.ids(a), s, c.tgt(a)), c.tgt(a));
    losses.insert(losses.end(), more.begin(), more.end());
    if (a < last)
      for (int i = 0; i < steps_each; ++i) fw.update(c.tgt(a), c.b, optim);
  }
  optim.restore(weights);
  fw.set_last_read(read);
  return mean_of(losses);
}

// PonderNet's counterfactual trials (RolloutOptions::trial_ks) at chunk u, read and not yet updated: for each K, the
// mean loss of the next trial_lookahead chunks after K steps on u, each of those updated once before the next is read
// (as K = 1 runs them). Chunk u itself was scored before any step, so K moves only what follows it. Every trial
// starts from the weights as they are, and they are put back after it.
std::vector<double> trial_losses(ttt::FastWeights& fw, ttt::FastOptimizer& optim, const Chunks& c, int64_t u,
                                 const RolloutOptions& opt, const ttt::ModelState& after_u) {
  const ttt::FastOptimizer::State weights = optim.save();
  const ttt::FastWeights::LastRead read = fw.last_read();
  std::vector<double> out;
  for (int k : opt.trial_ks) {
    for (int i = 0; i < k; ++i) fw.update(c.tgt(u), c.b, optim);
    out.push_back(lookahead_loss(fw, optim, c, u, opt.trial_lookahead, 1, after_u));
    optim.restore(weights);
    fw.set_last_read(read);
  }
  return out;
}

}  // namespace

AdaptRollouts::AdaptRollouts(const ttt::Model& base, const AdaptConfig& cfg) : base_(base), cfg_(cfg) {
  cfg.optim.validate();
  ttt::FastWeights check(base, cfg.fast, cfg.seed);  // targets that this model lacks are refused before any run
}

Episode AdaptRollouts::policy(const Tensor& input, const Tensor& target, Policy& p, const RolloutOptions& opt,
                              uint64_t seed) const {
  const Chunks c = cut(base_, input, target, opt);
  const FeatureNeeds needs = p.needs();
  if (needs.probe_loss || needs.probe_grad)
    throw std::invalid_argument("adapt: " + p.name() + " reads the TTT layers' inner loss, which the fast-weight "
                                "path does not have");
  NoGradGuard ng;
  ttt::FastWeights fw(base_, cfg_.fast, cfg_.seed);
  ttt::FastOptimizer optim(fw.parameters(), cfg_.optim);
  FeatureTracker tracker(c.n, needs, opt.step_budget);
  ttt::ModelState state;
  Episode ep;
  p.begin_window(opt.window);
  p.begin_sequence(seed);
  for (int64_t u = 0; u < c.n; ++u) {
    opt.report(u, c.n);
    UnitRecord rec;
    const Tensor logits = read_chunk(fw, c, u, state, rec, ep);
    FlopScope decide;  // the features of the chunk just read, then the decision
    tracker.observe_logits(logits, c.tgt(u));
    rec.features = tracker.next(u, base_, state);
    rec.k = p.decide(rec.features);
    tracker.record_k(rec.k);
    rec.overhead_flops = decide.counts().total();
    if (!opt.trial_ks.empty()) {
      FlopScope trials;  // measurement, charged to no method
      rec.trial_loss = trial_losses(fw, optim, c, u, opt, state);
      rec.measure_flops += trials.counts().total();
    }
    FlopScope steps;
    for (int i = 0; i < rec.k; ++i) fw.update(c.tgt(u), c.b, optim);
    rec.inner_flops = steps.counts().total();
    add_unit(ep, std::move(rec));
  }
  return ep;
}

Episode AdaptRollouts::oracle(const Tensor& input, const Tensor& target, const std::vector<int>& choices, double mu,
                              int lookahead, const RolloutOptions& opt) const {
  const Chunks c = cut(base_, input, target, opt);
  if (choices.empty()) throw std::invalid_argument("oracle: no step options");
  std::vector<int> options = choices;
  std::sort(options.begin(), options.end());  // so ties go to the cheaper K
  NoGradGuard ng;
  ttt::FastWeights fw(base_, cfg_.fast, cfg_.seed);
  ttt::FastOptimizer optim(fw.parameters(), cfg_.optim);
  FeatureTracker tracker(c.n, FeatureNeeds{true, true, false, false});  // the scores, for the oracle analysis
  ttt::ModelState state;
  Episode ep;
  for (int64_t u = 0; u < c.n; ++u) {
    opt.report(u, c.n);
    UnitRecord rec;
    const Tensor logits = read_chunk(fw, c, u, state, rec, ep);
    tracker.observe_logits(logits, c.tgt(u));
    rec.features = tracker.next(u, base_, state);
    if (u + 1 >= c.n || lookahead < 1) {  // nothing after this chunk is scored: every K ties, the smallest is taken
      rec.k = options.front();
      rec.tied = options.size() > 1;
      FlopScope steps;
      for (int i = 0; i < rec.k; ++i) fw.update(c.tgt(u), c.b, optim);
      rec.inner_flops = steps.counts().total();
      tracker.record_k(rec.k);
      add_unit(ep, std::move(rec));
      continue;
    }
    // Every K from the same weights, in increasing order, each continuing the steps of the one before (a K-step
    // update is the first K steps of a longer one); the weights after each are kept to go back to the chosen one.
    std::vector<ttt::FastOptimizer::State> after;
    std::vector<uint64_t> cost;
    std::vector<double> objective;
    uint64_t spent = 0;
    for (int k : options) {
      FlopScope steps;
      for (int done = after.empty() ? 0 : options[after.size() - 1]; done < k; ++done) fw.update(c.tgt(u), c.b, optim);
      spent += steps.counts().total();
      cost.push_back(spent);
      after.push_back(optim.save());
      FlopScope look;  // measurement, charged to no method
      const double later = lookahead_loss(fw, optim, c, u, lookahead, opt.oracle_lookahead_k, state);
      rec.measure_flops += look.counts().total();
      objective.push_back(later + mu * double(cost.back()) / double(std::max<uint64_t>(rec.base_flops, 1)));
    }
    size_t best = 0;
    for (size_t i = 1; i < options.size(); ++i)
      if (objective[i] < objective[best] - 1e-12) best = i;
    int at_best = 0;
    for (double o : objective) at_best += std::abs(o - objective[best]) <= 1e-12;
    rec.tied = at_best > 1;
    rec.k = options[best];
    optim.restore(after[best]);
    rec.inner_flops = cost[best];
    tracker.record_k(rec.k);
    add_unit(ep, std::move(rec));
  }
  return ep;
}

}  // namespace ponder::policy
