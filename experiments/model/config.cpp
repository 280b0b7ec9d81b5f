#include "experiments/model/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

#include "data/corpus_table.h"
#include "util/files.h"

#ifndef PONDER_SOURCE_ROOT
#error "PONDER_SOURCE_ROOT must be defined by the build (experiments/meson.build)"
#endif

namespace ponder::cli {
namespace {

constexpr int64_t kMaxSteps = ttt::kMaxInnerSteps;  // the most inner steps any schedule may ask for

template <class T> struct TypeName;
template <> struct TypeName<int64_t> { static constexpr const char* name = "an integer"; };
template <> struct TypeName<double> { static constexpr const char* name = "a number"; };
template <> struct TypeName<bool> { static constexpr const char* name = "true or false"; };
template <> struct TypeName<std::string> { static constexpr const char* name = "a string"; };

// One top-level section: reads the keys it is asked for and, at the end, rejects any it was not.
class Section {
 public:
  Section(const YAML::Node& root, std::string name, const std::string& source)
      : name_(std::move(name)), source_(source) {
    if (root && root[name_]) node_ = root[name_];
    if (node_ && !node_.IsMap() && !node_.IsNull()) fail(node_, name_, "must be a mapping of keys to values");
  }

  template <class T> void get(const std::string& key, T& out) {
    known_.push_back(key);
    if (!node_ || !node_.IsMap() || !node_[key]) return;
    const YAML::Node v = node_[key];
    if (!v.IsScalar()) fail(v, key, std::string("expected ") + TypeName<T>::name);
    try {
      out = v.as<T>();
    } catch (const YAML::Exception&) {
      fail(v, key, std::string("expected ") + TypeName<T>::name + ", got '" + v.Scalar() + "'");
    }
  }
  void get(const std::string& key, uint64_t& out) {
    int64_t v = int64_t(out);
    get(key, v);
    if (v < 0) fail(node_[key], key, "must be >= 0, got " + std::to_string(v));
    out = uint64_t(v);
  }
  template <class T> void get(const std::string& key, std::vector<T>& out) {
    known_.push_back(key);
    if (!node_ || !node_.IsMap() || !node_[key]) return;
    const YAML::Node v = node_[key];
    if (!v.IsSequence()) fail(v, key, std::string("expected a list of ") + TypeName<T>::name + " values");
    out.clear();
    for (const YAML::Node& item : v) {
      if (!item.IsScalar()) fail(item, key, std::string("expected a list of ") + TypeName<T>::name + " values");
      try {
        out.push_back(item.as<T>());
      } catch (const YAML::Exception&) {
        fail(item, key, std::string("expected ") + TypeName<T>::name + ", got '" + item.Scalar() + "'");
      }
    }
  }
  // A list of step counts, each in [0, kMaxSteps]: a larger count is a typo or an overflow, not a schedule. An empty
  // list written out (`key: []`) is an error unless `may_be_empty`, not the default in disguise.
  void get_steps(const std::string& key, std::vector<int>& out, bool may_be_empty = false) {
    std::vector<int64_t> v;
    get(key, v);
    if (v.empty()) {
      const bool written = node_ && node_.IsMap() && node_[key];
      if (written && may_be_empty) out.clear();
      if (written && !may_be_empty) fail(node_[key], key, "must list at least one step count, got []");
      return;
    }
    for (int64_t k : v)
      if (k < 0 || k > kMaxSteps)
        fail(node_[key], key, "step counts must lie in 0.." + std::to_string(kMaxSteps) + ", got " + std::to_string(k));
    out.assign(v.begin(), v.end());
  }
  // One step count in [0, kMaxSteps].
  void get_step(const std::string& key, int64_t& out) {
    get(key, out);
    if (out < 0 || out > kMaxSteps)
      fail(node_[key], key, "must lie in 0.." + std::to_string(kMaxSteps) + ", got " + std::to_string(out));
  }
  // A list of comparison methods, each parsed by the registry (methods/registry.h).
  void get_methods(const std::string& key, std::vector<methods::MethodSpec>& out) {
    std::vector<std::string> names;
    get(key, names);
    if (!node_ || !node_.IsMap() || !node_[key]) return;
    if (names.empty()) fail(node_[key], key, "must list at least one method, got []");
    try {
      out = methods::parse_methods(names);
    } catch (const std::invalid_argument& e) {
      fail(node_[key], key, e.what());
    }
  }
  // A string key turned into a value by `convert`, whose std::invalid_argument becomes a keyed error.
  template <class T> void get(const std::string& key, T& out, const std::function<T(const std::string&)>& convert) {
    std::string text;
    get(key, text);
    if (!node_ || !node_.IsMap() || !node_[key]) return;
    try {
      out = convert(text);
    } catch (const std::invalid_argument& e) {
      fail(node_[key], key, e.what());
    }
  }
  void done() const {
    if (!node_ || !node_.IsMap()) return;
    std::vector<std::string> seen;
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        fail(kv.first, key, "duplicate key (a YAML mapping names each key once)");
      seen.push_back(key);
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string list;
      for (const std::string& k : known_) list += (list.empty() ? "" : ", ") + k;
      fail(kv.first, key, "unknown key (" + name_ + " takes: " + list + ")");
    }
  }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& msg) const {
    const std::string where = at.Mark().is_null() ? source_ : source_ + ":" + std::to_string(at.Mark().line + 1);
    throw std::invalid_argument(where + ": " + (key == name_ ? key : name_ + "." + key) + ": " + msg);
  }

 private:
  YAML::Node node_;
  std::string name_;
  const std::string& source_;
  std::vector<std::string> known_;
};

ttt::StepMode to_mode(const std::string& s) { return ttt::parse_mode(s); }
// A number strictly between 0 and 1 (an EMA factor).
double open_unit(const std::string& s) {
  size_t used = 0;
  double v = NAN;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
  }
  if (used != s.size() || !(v > 0 && v < 1)) throw std::invalid_argument("expected a number in (0, 1), got '" + s + "'");
  return v;
}
ttt::InnerPath to_path(const std::string& s) { return ttt::parse_path(s); }

std::string one_of(const std::string& s, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (s == a) return s;
    list += std::string(list.empty() ? "" : ", ") + a;
  }
  throw std::invalid_argument("expected one of " + list + ", got '" + s + "'");
}

void read_model(Section& s, ttt::ModelConfig& m) {
  s.get("vocab", m.vocab);
  s.get("d", m.d);
  s.get("layers", m.layers);
  s.get("heads", m.heads);
  s.get("mini_batch", m.mini_batch);
  s.get<std::string>("inner", m.inner, [](const std::string& v) { return one_of(v, {"linear", "mlp"}); });
  s.get<std::string>("backbone", m.backbone,
                     [](const std::string& v) { return one_of(v, {"transformer", "mamba"}); });
  s.get("gate", m.gate);
  s.get("pre_conv", m.pre_conv);
  s.get("mixers", m.mixers);
  s.get("swiglu_hidden", m.swiglu_hidden);
  s.get("conv_width", m.conv_width);
  s.get("rope_theta", m.rope_theta);
  s.get("rms_eps", m.rms_eps);
  s.get("init_std", m.init_std);
  s.get("base_lr", m.base_lr);
  s.get("tie_embeddings", m.tie_embeddings);
  s.get<std::string>("token_factor", m.token_factor, [](const std::string& v) { return one_of(v, {"official", "softplus"}); });
  s.get("attn_window", m.attn_window);
}

void read_train(Section& s, ttt::TrainConfig& t) {
  s.get("steps", t.steps);
  s.get("batch_size", t.batch_size);
  s.get("seq_len", t.seq_len);
  s.get("grad_accum", t.grad_accum);
  s.get("carry_state", t.carry_state);
  s.get("lr", t.lr);
  s.get("min_lr", t.min_lr);
  s.get("warmup", t.warmup);
  s.get("beta1", t.beta1);
  s.get("beta2", t.beta2);
  s.get("eps", t.eps);
  s.get("weight_decay", t.weight_decay);
  s.get("grad_clip", t.grad_clip);
  s.get("seed", t.seed);
  s.get_steps("step_options", t.step_options);
  s.get<ttt::StepMode>("mode", t.mode, to_mode);
  s.get<ttt::InnerPath>("path", t.path, to_path);
  s.get("remat_group", t.remat_group);
  s.get("ttt_lr_mult_init", t.ttt_lr_mult_init);
  s.get("ttt_lr_warmup", t.ttt_lr_warmup);
  s.get("log_every", t.log_every);
  s.get("eval_every", t.eval_every);
  s.get("checkpoint_every", t.checkpoint_every);
  s.get("init_from", t.init_from);
  s.get("freeze_loaded", t.freeze_loaded);
}

void read_data(Section& s, DataConfig& d) {
  s.get<std::string>("corpus", d.corpus, [](const std::string& v) {
    if (data::find_named_corpus(v)) return v;
    if (v.find('/') == std::string::npos)
      throw std::invalid_argument("'" + v + "' is not a built-in corpus (" + data::named_corpus_list() +
                                  "); a path must contain a '/' (e.g. ./my_text.txt)");
    return v;
  });
  s.get("valid_frac", d.valid_frac);
  s.get("test_frac", d.test_frac);
  s.get("test_from", d.test_from);
  s.get("adapt_frac", d.adapt_frac);
  s.get("train_across_files", d.train_across_files);
  s.get("extensions", d.extensions);
  s.get("max_file_bytes", d.max_file_bytes);
  s.get<std::string>("layout", d.layout, [](const std::string& v) { return one_of(v, {"auto", "documents", "repositories"}); });
}

void read_eval(Section& s, EvalConfig& e) {
  s.get<ttt::ScheduleSpec>("schedule", e.inner.schedule, ttt::parse_schedule);
  s.get<ttt::StepMode>("mode", e.inner.mode, to_mode);
  s.get<ttt::InnerPath>("path", e.inner.path, to_path);
  s.get("batch_size", e.batch_size);
  s.get("max_windows", e.max_windows);
  s.get("stream_tokens", e.stream_tokens);
  s.get<std::string>("split", e.split, [](const std::string& v) { return one_of(v, {"valid", "test"}); });
}

void read_compare(Section& s, CompareOptions& c) {
  s.get_methods("methods", c.methods);
  s.get("seeds", c.seeds);
  s.get("windows_per_seed", c.windows_per_seed);
  s.get("seq_len", c.seq_len);
  s.get_steps("step_options", c.step_options);
  s.get_step("budget_k", c.budget_k);
  s.get_step("low", c.low);
  s.get_step("high", c.high);
  s.get("calib_windows", c.calib_windows);
  s.get("oracle_lookahead", c.oracle_lookahead);
  s.get("oracle_mu", c.oracle_mu);
  int64_t lookahead_k = c.rollout.oracle_lookahead_k;
  s.get_step("oracle_lookahead_k", lookahead_k);
  c.rollout.oracle_lookahead_k = int(lookahead_k);
  s.get<std::string>("calibrate_on", c.calibrate_on, [](const std::string& v) { return one_of(v, {"inner", "total"}); });
  s.get<std::string>("calibrate_from", c.calibrate_from, [](const std::string& v) { return one_of(v, {"windows", "streams"}); });
  s.get("unit_tokens", c.unit_tokens);
  s.get<double>("gate_alpha", c.gate_alpha, [](const std::string& v) { return open_unit(v); });
  s.get("frontier_mus", c.frontier_mus);
  s.get("oracle_bisect", c.oracle_bisect);
  s.get("streams", c.streams);
  s.get("hard_budget", c.hard_budget);
  s.get("criteria_quality", c.criteria.quality);
  s.get("criteria_flops", c.criteria.flops);
  s.get("criteria_alpha", c.criteria.alpha);
  s.get("criteria_difficulty_corr", c.criteria.difficulty_corr);
  s.get("criteria_policy_rho", c.criteria.policy_rho);
  s.get("criteria_max_tie_share", c.criteria.max_tie_share);
  s.get("criteria_control_headroom", c.criteria.control_headroom);
  s.get<ttt::StepMode>("mode", c.rollout.mode, to_mode);
  s.get<ttt::InnerPath>("path", c.rollout.path, to_path);
  s.get("two_stage", c.rollout.two_stage);
}

// learn: settings of the learned methods (learned-reinforce, learned-ppo-pid, pondernet).
void read_learn(Section& s, methods::LearnOptions& l) {
  s.get<std::string>("net", l.net, [](const std::string& v) { return one_of(v, {"mlp", "lstm"}); });
  s.get("hidden", l.hidden);
  s.get("train_windows", l.train_windows);
  s.get_steps("options", l.options);
  s.get<std::string>("act", l.act, [](const std::string& v) { return one_of(v, {"sample", "greedy"}); });
  s.get("unit", l.unit_tokens);
  s.get("probe", l.probe);
  uint64_t seed = l.reinforce.seed;
  s.get("seed", seed);
  l.reinforce.seed = l.ppo.seed = l.pondernet.seed = seed;
  rl::ReinforceConfig& r = l.reinforce;
  s.get("reinforce_gamma", r.gamma);
  s.get("reinforce_lambda", r.penalty);
  s.get<std::string>("reinforce_penalty", r.penalty_kind, [](const std::string& v) { return one_of(v, {"abs-mean", "square"}); });
  s.get<std::string>("reinforce_baseline", r.baseline, [](const std::string& v) { return one_of(v, {"loo", "batch", "ema"}); });
  s.get("reinforce_samples", r.samples);
  s.get("reinforce_windows", r.contexts_per_iter);
  s.get("reinforce_iterations", r.iterations);
  s.get("reinforce_lr", r.lr);
  s.get("reinforce_entropy", r.entropy_coef);
  rl::PpoPidConfig& p = l.ppo;
  s.get("ppo_gamma", p.gamma);
  s.get("ppo_gae_lambda", p.gae_lambda);
  s.get("ppo_clip", p.clip);
  s.get("ppo_epochs", p.epochs);
  s.get("ppo_minibatches", p.minibatches);
  s.get("ppo_windows", p.contexts_per_iter);
  s.get("ppo_iterations", p.iterations);
  s.get("ppo_lr", p.lr);
  s.get("ppo_entropy", p.ent_coef);
  s.get("ppo_kp", p.pid.kp);
  s.get("ppo_ki", p.pid.ki);
  s.get("ppo_kd", p.pid.kd);
  rl::PonderNetConfig& n = l.pondernet;
  s.get("pondernet_beta", n.beta);
  s.get("pondernet_steps", l.pondernet_steps);
  s.get("pondernet_windows", n.contexts_per_iter);
  s.get("pondernet_iterations", n.iterations);
  s.get("pondernet_lr", n.lr);
}

void read_streams(Section& s, StreamsConfig& c) {
  s.get("chunk", c.chunk);
  s.get("max_adapt", c.max_adapt);
  s.get("max_scored", c.max_scored);
  s.get("max_segments", c.max_segments);
  s.get("max_ngram", c.max_ngram);
  s.get("attention_baseline", c.attention_baseline);
  s.get("position_docs", c.position_docs);
  s.get("position_len", c.position_len);
  s.get_steps("reset_ks", c.reset_ks, true);
  s.get("reset_at_documents", c.reset_at_documents);
}

void read_adapt(Section& s, AdaptSection& a) {
  ttt::FastWeightsConfig& f = a.rollouts.fast;
  ttt::FastOptimConfig& o = a.rollouts.optim;
  s.get<std::string>("fast", f.kind, [](const std::string& v) { return one_of(v, {"lora", "head"}); });
  s.get("rank", f.rank);
  s.get("targets", f.targets);
  s.get("last_blocks", f.last_blocks);
  s.get("head_hidden", f.head_hidden);
  s.get("replay", f.replay);
  s.get("init_std", f.init_std);
  s.get<std::string>("optimizer", o.optimizer, [](const std::string& v) { return one_of(v, {"sgd", "momentum", "adam"}); });
  s.get("lr", o.lr);
  s.get("momentum", o.momentum);
  s.get("beta1", o.beta1);
  s.get("beta2", o.beta2);
  s.get("clip", o.clip);
  s.get("normalize", o.normalize);
  s.get("seed", a.rollouts.seed);
  s.get("chunk", a.chunk);
  s.get_methods("methods", a.methods);
  s.get_steps("step_options", a.step_options);
  s.get_step("budget_k", a.budget_k);
  s.get_step("low", a.low);
  s.get_step("high", a.high);
  s.get("hard_budget", a.hard_budget);
  s.get("calib_len", a.calib_len);
  s.get("seeds", a.seeds);
  s.get<std::string>("split", a.split, [](const std::string& v) { return one_of(v, {"test", "valid"}); });
}

void check_adapt(const RunConfig& c) {
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  const AdaptSection& a = c.adapt;
  try {
    a.rollouts.fast.validate(c.model.layers);
    a.rollouts.optim.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("adapt: ") + e.what());
  }
  need(a.chunk > 0 && a.chunk % c.model.mini_batch == 0,
       "adapt.chunk must be a positive multiple of model.mini_batch, got " + std::to_string(a.chunk));
  need(a.calib_len > 0 && a.calib_len % a.chunk == 0,
       "adapt.calib_len must be a positive multiple of adapt.chunk, got " + std::to_string(a.calib_len));
  need(a.seeds >= 1, "adapt.seeds must be positive, got " + std::to_string(a.seeds));
  const ttt::FastWeightsConfig& f = a.rollouts.fast;
  need(f.kind != "lora" || f.rank <= c.model.d,
       "adapt.rank " + std::to_string(f.rank) + " exceeds model.d = " + std::to_string(c.model.d) +
           ", the smaller side of every projection LoRA adapts (a rank above it adds nothing a full update lacks)");
  need(!a.step_options.empty(), "adapt.step_options must not be empty");
  need(a.high > a.low, "adapt.high must exceed adapt.low");
  for (const methods::MethodSpec& m : a.methods) {
    std::string why = methods::fast_weight_refusal(m);
    if (why.empty() && m.family == methods::MethodFamily::Learned)
      why = methods::fast_weight_learned_refusal(m, c.compare.learn, a.chunk);
    need(why.empty(), "adapt.methods: " + why);
  }
}

// The learn: section's keys, and how they fit compare: and model:.
void check_learn(const RunConfig& c) {
  const CompareOptions& k = c.compare;
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  const methods::LearnOptions& l = k.learn;
  need(l.hidden >= 1 && l.hidden <= 4096, "learn.hidden (the policy network's width) must lie in 1..4096, got " +
                                              std::to_string(l.hidden));
  need(l.train_windows >= 1, "learn.train_windows must be positive, got " + std::to_string(l.train_windows));
  for (const auto& [name, v] : {std::pair{"reinforce_lambda", l.reinforce.penalty}, {"reinforce_entropy", l.reinforce.entropy_coef},
                                {"reinforce_gamma", l.reinforce.gamma}, {"ppo_gamma", l.ppo.gamma}, {"ppo_gae_lambda", l.ppo.gae_lambda},
                                {"ppo_clip", l.ppo.clip}, {"ppo_entropy", l.ppo.ent_coef}, {"ppo_kp", l.ppo.pid.kp},
                                {"ppo_ki", l.ppo.pid.ki}, {"ppo_kd", l.ppo.pid.kd}, {"pondernet_beta", l.pondernet.beta}})
    need(std::isfinite(v), std::string("learn.") + name + " must be a finite number, got " + std::to_string(v));
  for (const auto& [name, lr] : {std::pair{"reinforce_lr", l.reinforce.lr}, {"ppo_lr", l.ppo.lr}, {"pondernet_lr", l.pondernet.lr}})
    need(std::isfinite(lr) && lr > 0, std::string("learn.") + name + " must be a positive finite number, got " +
                                          std::to_string(lr));
  need(l.options.size() >= 2, "learn.options needs at least two step counts");
  for (const methods::MethodSpec& m : k.methods)
    if (m.family == methods::MethodFamily::Learned) methods::learned_options(m, l);  // its overrides fit the learn: settings
  for (int o : l.options) need(o >= 0, "learn.options must be >= 0, got " + std::to_string(o));
  need(l.unit_tokens == 0 || (l.unit_tokens > 0 && l.unit_tokens % c.model.mini_batch == 0 && k.seq_len % l.unit_tokens == 0),
       "learn.unit must be 0 or a multiple of model.mini_batch that divides compare.seq_len");
  need(l.reinforce.gamma >= 0 && l.reinforce.gamma <= 1 && l.ppo.gamma >= 0 && l.ppo.gamma <= 1,
       "learn.reinforce_gamma and learn.ppo_gamma must lie in [0, 1]");
  need(l.reinforce.samples >= 1 && l.reinforce.contexts_per_iter >= 1 && l.reinforce.iterations >= 1,
       "learn.reinforce_samples, reinforce_windows and reinforce_iterations must be positive");
  need(l.reinforce.baseline != "loo" || l.reinforce.samples >= 2, "learn.reinforce_baseline loo needs reinforce_samples >= 2");
  need(l.ppo.epochs >= 1 && l.ppo.minibatches >= 1 && l.ppo.contexts_per_iter >= l.ppo.minibatches && l.ppo.iterations >= 1,
       "learn.ppo_epochs, ppo_iterations >= 1 and 1 <= ppo_minibatches <= ppo_windows");
  need(l.pondernet_steps >= 2 && l.pondernet.iterations >= 1 && l.pondernet.contexts_per_iter >= 1,
       "learn.pondernet_steps must be >= 2 and pondernet_iterations, pondernet_windows positive");
}

// Checks that need more than one key; messages name the keys.
void check(const RunConfig& c) {
  c.model.validate();
  c.train.validate(c.model);
  auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw std::invalid_argument(msg);
  };
  need(c.model.vocab >= 256, "model.vocab must be at least 256 (the corpora are read as bytes), got " +
                                 std::to_string(c.model.vocab));
  need(c.train_seeds >= 1 && c.train_seeds <= 1000, "train.seeds must lie in [1, 1000], got " + std::to_string(c.train_seeds));
  need(c.data.valid_frac > 0 && c.data.valid_frac < 1, "data.valid_frac must lie in (0, 1)");
  need(c.data.test_frac > 0 && c.data.test_frac < 1, "data.test_frac must lie in (0, 1)");
  need(c.data.valid_frac + c.data.test_frac < 1, "data.valid_frac + data.test_frac must be below 1");
  need(c.data.adapt_frac >= 0 && c.data.adapt_frac < 1, "data.adapt_frac must lie in [0, 1)");
  need(c.data.max_file_bytes > 0, "data.max_file_bytes must be positive, got " + std::to_string(c.data.max_file_bytes));
  need(!c.data.corpus.empty(), "data.corpus must name a built-in corpus or a path");
  need(c.streams.chunk > 0 && c.streams.chunk % c.model.mini_batch == 0,
       "streams.chunk must be a positive multiple of model.mini_batch, got " + std::to_string(c.streams.chunk));
  need(c.streams.max_adapt >= 0 && c.streams.max_scored >= 0 && c.streams.max_segments >= 0,
       "streams.max_adapt, streams.max_scored and streams.max_segments must be >= 0");
  need(c.streams.position_docs >= 0 && c.streams.position_len >= 2 * c.model.mini_batch,
       "streams.position_docs must be >= 0 and streams.position_len at least two mini-batches, got " +
           std::to_string(c.streams.position_docs) + " and " + std::to_string(c.streams.position_len));
  need(c.streams.max_ngram >= 1 && c.streams.max_ngram <= 8, "streams.max_ngram must lie in 1..8, got " +
       std::to_string(c.streams.max_ngram));
  need(c.eval.batch_size > 0, "eval.batch_size must be positive, got " + std::to_string(c.eval.batch_size));
  need(c.eval.max_windows >= 0, "eval.max_windows must be >= 0, got " + std::to_string(c.eval.max_windows));
  need(c.eval.stream_tokens >= 0, "eval.stream_tokens must be >= 0 (0: no stream validation), got " +
       std::to_string(c.eval.stream_tokens));
  const CompareOptions& k = c.compare;
  for (const methods::MethodSpec& m : k.methods) {
    const std::string why = methods::posthoc_refusal(m, k.rollout);
    need(why.empty(), "compare.methods: " + why);
  }
  need(k.calibrate_from == "windows" || k.streams,
       "compare.calibrate_from: streams calibrates on validation streams cut as the scored ones are, so it needs "
       "compare.streams: true");
  need(k.seeds >= 1 && k.windows_per_seed >= 0 && k.calib_windows >= 1,
       "compare.seeds and compare.calib_windows must be positive, compare.windows_per_seed >= 0 (0: every window)");
  need(k.seq_len > 0 && k.seq_len % c.model.mini_batch == 0,
       "compare.seq_len must be a positive multiple of model.mini_batch, got " + std::to_string(k.seq_len));
  need(k.unit_tokens >= 0 && k.unit_tokens % c.model.mini_batch == 0 &&
           (k.unit_tokens == 0 || k.seq_len % k.unit_tokens == 0),
       "compare.unit_tokens must be 0 or a multiple of model.mini_batch that divides compare.seq_len, got " +
           std::to_string(k.unit_tokens));
  need(!k.step_options.empty(), "compare.step_options must not be empty");
  for (int o : k.step_options) need(o >= 0, "compare.step_options must be >= 0, got " + std::to_string(o));
  need(k.low >= 0 && k.high > k.low, "compare.high must exceed compare.low");
  need(k.oracle_lookahead >= 0, "compare.oracle_lookahead must be >= 0");
  need(std::isfinite(k.oracle_mu) && k.oracle_mu >= 0, "compare.oracle_mu must be finite and >= 0, got " +
       std::to_string(k.oracle_mu));
  need(k.oracle_bisect >= 0 && k.oracle_bisect <= 20, "compare.oracle_bisect must lie in 0..20, got " +
       std::to_string(k.oracle_bisect));
  need(std::isfinite(k.criteria.control_headroom) && k.criteria.control_headroom >= 0,
       "compare.criteria_control_headroom must be a finite number >= 0, got " + std::to_string(k.criteria.control_headroom));
  need(k.criteria.quality >= 0 && k.criteria.flops >= 0 && k.criteria.alpha > 0 && k.criteria.alpha < 1 &&
           k.criteria.max_tie_share >= 0 && k.criteria.max_tie_share <= 1,
       "compare.criteria_quality and criteria_flops must be >= 0, criteria_alpha in (0, 1), criteria_max_tie_share in [0, 1]");
  for (double mu : k.frontier_mus)
    need(std::isfinite(mu) && mu >= 0, "compare.frontier_mus must be finite and >= 0, got " + std::to_string(mu));
  check_learn(c);
}

}  // namespace

CompareOptions adapt_compare_options(const AdaptSection& a, const CompareOptions& compare, int64_t mini_batch) {
  CompareOptions o = compare;
  o.methods = a.methods;
  o.step_options = a.step_options;
  o.budget_k = a.budget_k;
  o.low = a.low;
  o.high = a.high;
  o.hard_budget = a.hard_budget;
  o.seq_len = a.calib_len;
  o.seeds = a.seeds;
  o.streams = true;
  o.rollout.unit_batches = a.chunk / mini_batch;
  return o;
}

RunConfig parse_config(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument(source + ": invalid YAML: " + e.what());
  }
  if (root && !root.IsMap() && !root.IsNull()) throw std::invalid_argument(source + ": expected a mapping of sections");
  RunConfig c;
  c.text = text;
  c.source = source;
  const std::vector<std::string> sections = {"model", "train", "data", "eval", "compare", "learn", "streams", "adapt"};
  std::vector<std::string> seen;
  if (root && root.IsMap())
    for (const auto& kv : root) {
      if (std::find(seen.begin(), seen.end(), kv.first.Scalar()) != seen.end())
        throw std::invalid_argument(source + ":" + std::to_string(kv.first.Mark().line + 1) + ": section '" +
                                    kv.first.Scalar() + "' appears twice");
      seen.push_back(kv.first.Scalar());
      if (std::find(sections.begin(), sections.end(), kv.first.Scalar()) == sections.end())
        throw std::invalid_argument(source + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown section '" +
                                    kv.first.Scalar() + "' (expected model, train, data, eval, compare, learn, streams, adapt)");
    }
  Section model(root, "model", source), train(root, "train", source), data(root, "data", source),
      eval(root, "eval", source), compare(root, "compare", source), learn(root, "learn", source),
      streams(root, "streams", source), adapt(root, "adapt", source);
  read_model(model, c.model);
  model.get<std::string>("device", c.device, [](const std::string& v) { return one_of(v, {"cpu", "cuda"}); });
  model.get<MatmulPrecision>("precision", c.precision,
                             [](const std::string& v) { return parse_matmul_precision(v, ""); });
  read_train(train, c.train);
  train.get("seeds", c.train_seeds);
  read_data(data, c.data);
  read_eval(eval, c.eval);
  read_compare(compare, c.compare);
  read_learn(learn, c.compare.learn);
  read_streams(streams, c.streams);
  read_adapt(adapt, c.adapt);
  if (c.compare.unit_tokens > 0 && c.model.mini_batch > 0 && c.compare.unit_tokens % c.model.mini_batch == 0)
    c.compare.rollout.unit_batches = c.compare.unit_tokens / c.model.mini_batch;
  c.compare.stream_max_adapt = c.streams.max_adapt;  // compare.streams reads the streams as the regime checks do
  c.compare.stream_max_scored = c.streams.max_scored;
  c.compare.stream_max_segments = c.streams.max_segments;
  c.compare.stream_reset = c.streams.reset_at_documents;
  for (const Section* s : {&model, &train, &data, &eval, &compare, &learn, &streams, &adapt}) s->done();
  try {
    check(c);
    check_adapt(c);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
  return c;
}

RunConfig load_config(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw std::runtime_error("config '" + path + "' is a folder, not a YAML file");
  const std::optional<std::string> text = util::read_file(path);
  if (!text) throw std::runtime_error("cannot open config '" + path + "'");
  return parse_config(*text, path);
}

std::string resolve_config(const std::string& name_or_path) {
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.ends_with(".yaml"));
  return is_path ? name_or_path : std::string(PONDER_SOURCE_ROOT) + "/configs/" + name_or_path + ".yaml";
}

std::string with_overrides(const std::string& text, const std::vector<std::string>& sets) {
  YAML::Node root = YAML::Load(text);
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  for (const std::string& s : sets) {
    const size_t eq = s.find('='), dot = s.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq)
      throw std::invalid_argument("--set '" + s + "': expected section.key=value (e.g. model.base_lr=10)");
    const std::string section = s.substr(0, dot), key = s.substr(dot + 1, eq - dot - 1);
    YAML::Node value;
    try {
      value = YAML::Load(s.substr(eq + 1));  // "[0, 1]" is a list, "1e-3" a number, as in the file
    } catch (const YAML::Exception& e) {
      throw std::invalid_argument("--set '" + s + "': the value is not YAML: " + e.what());
    }
    root[section][key] = value;
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> sections_differing(const std::string& a, const std::string& b,
                                            const std::vector<std::string>& sections) {
  const YAML::Node ra = YAML::Load(a), rb = YAML::Load(b);
  auto text_of = [](const YAML::Node& root, const std::string& section) {
    if (!root || !root.IsMap() || !root[section]) return std::string();
    YAML::Emitter out;
    out << root[section];
    return std::string(out.c_str());
  };
  std::vector<std::string> differ;
  for (const std::string& s : sections)
    if (text_of(ra, s) != text_of(rb, s)) differ.push_back(s);
  return differ;
}

std::string with_train_steps(const std::string& text, int64_t steps) {
  return with_overrides(text, {"train.steps=" + std::to_string(steps)});
}

}  // namespace ponder::cli
