// Learned allocation policies (docs/method.md §4.5–§4.7): small networks over the causal feature vector of
// policy/unit_features.h. A categorical policy picks one of the step options per unit; a halting
// policy (PonderNet) gives a conditional halting probability per inner step. Their forward FLOPs are
// counted by the engine while a rollout decides, so the overhead they report is measured.
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "autograd/nn.h"
#include "policy/policies.h"

namespace ponder::policy {

// Per-feature standardisation fitted once on feature vectors from rollouts, then frozen, so the
// networks see O(1) inputs whatever the scale of losses or inner-loss probes.
struct FeatureNorm {
  std::vector<double> mean, inv_std;  // (F) each; empty = identity
  void fit(const std::vector<std::vector<double>>& xs);
  std::vector<double> apply(const std::vector<double>& x) const;
};

// A network from feature vectors to `outputs` numbers per unit. forward() is causal along the unit
// axis: output t depends on inputs ≤ t only.
class PolicyNet : public Module {
 public:
  virtual std::string kind() const = 0;  // "mlp" | "lstm"
  virtual int64_t inputs() const = 0;
  virtual int64_t outputs() const = 0;
  // x (B, T, F) → (B, T, outputs)
  virtual Tensor forward(const Tensor& x) const = 0;
  // One unit of one sequence, keeping the recurrent state between calls: x (F) → (outputs).
  virtual void reset() {}
  virtual std::vector<double> step(const std::vector<double>& x) = 0;
  // A copy whose parameters are `p` (in parameters() order, same shapes): what a finite-difference check
  // differentiates through.
  virtual std::unique_ptr<PolicyNet> with_parameters(const std::vector<Tensor>& p) const = 0;
};

// Two tanh hidden layers; the output layer starts 100× smaller than the default init so the
// initial policy is near uniform (the cleanrl convention of gain 0.01 on the policy head).
class MlpNet final : public PolicyNet {
 public:
  MlpNet(int64_t in, int64_t hidden, int64_t out, Generator& gen, DType dtype = DType::F32);
  std::string kind() const override { return "mlp"; }
  int64_t inputs() const override { return l1_.weight.shape()[0]; }
  int64_t outputs() const override { return l3_.weight.shape()[1]; }
  Tensor forward(const Tensor& x) const override;
  std::vector<double> step(const std::vector<double>& x) override;
  std::vector<Tensor> parameters() const override;
  std::unique_ptr<PolicyNet> with_parameters(const std::vector<Tensor>& p) const override;

 private:
  Linear l1_, l2_, l3_;  // (F, H), (H, H), (H, out)
};

// A causal LSTM over the units of a sequence (never bidirectional: a unit's decision may not read
// later units) with a linear head on its hidden state.
class LstmNet final : public PolicyNet {
 public:
  LstmNet(int64_t in, int64_t hidden, int64_t out, Generator& gen, DType dtype = DType::F32);
  std::string kind() const override { return "lstm"; }
  int64_t inputs() const override { return cell_.w_ih.shape()[0]; }
  int64_t outputs() const override { return head_.weight.shape()[1]; }
  Tensor forward(const Tensor& x) const override;
  void reset() override;
  std::vector<double> step(const std::vector<double>& x) override;
  std::vector<Tensor> parameters() const override;
  std::unique_ptr<PolicyNet> with_parameters(const std::vector<Tensor>& p) const override;

 private:
  LSTMCell cell_;
  Linear head_;             // (H, out)
  Tensor h_, c_;            // (1, H) recurrent state of step(); undefined before the first unit
};

std::unique_ptr<PolicyNet> make_policy_net(const std::string& kind, int64_t in, int64_t hidden, int64_t out,
                                           uint64_t seed, DType dtype = DType::F32);

// Feature vector length (UnitFeatures::vector()).
int64_t feature_count();

// A policy that can also decide from a bare feature vector (environments without a language model,
// such as rl/synthetic.h, call act() directly).
class VectorActor {
 public:
  virtual ~VectorActor() = default;
  virtual int act(const std::vector<double>& x) = 0;  // returns K
};

// Which decision rule turns network outputs into a step count.
enum class ActMode { Sample, Greedy };

// π_θ(K | features): categorical over `options`. Sample draws from π (training; also a stochastic
// deployable policy), Greedy takes the most probable option.
class LearnedPolicy final : public Policy, public VectorActor {
 public:
  LearnedPolicy(std::string name, std::shared_ptr<PolicyNet> net, std::vector<int> options, FeatureNorm norm,
                FeatureNeeds needs);
  std::string name() const override { return name_; }
  FeatureNeeds needs() const override { return needs_; }
  void begin_sequence(uint64_t seed) override;
  // One decision a unit (its log-probability is what rl/ trains): at After when no option is 0, so it reads the unit's
  // own signals (Before only says "stepped"); otherwise at Before, the unit's K then fixed.
  int decide(const UnitFeatures& f) override {
    return f.stage == Stage::Before && posthoc() ? *std::min_element(options_.begin(), options_.end()) : act(f.vector());
  }
  bool posthoc() const override { return *std::min_element(options_.begin(), options_.end()) >= 1; }
  bool may_skip() const override { return !posthoc(); }
  std::unique_ptr<Policy> clone() const override;  // the same parameters, its own recurrent state and generator
  // Decides from a raw feature vector (synthetic environments call this directly); returns K.
  int act(const std::vector<double>& x) override;
  int last_action() const { return last_action_; }  // index into options() of the last decision
  void set_mode(ActMode m) { mode_ = m; }
  const std::vector<int>& options() const { return options_; }
  PolicyNet& net() { return *net_; }
  const FeatureNorm& norm() const { return norm_; }
  void set_norm(FeatureNorm n) { norm_ = std::move(n); }
  int action_index(int k) const;  // index of step count k in options(); throws when absent

 private:
  std::string name_;
  std::shared_ptr<PolicyNet> net_;
  std::vector<int> options_;
  FeatureNorm norm_;
  FeatureNeeds needs_;
  ActMode mode_ = ActMode::Sample;
  Generator gen_{0};
  int last_action_ = -1;
};

// PonderNet halting (docs/rl_stats.md §5): the network gives N logits z_n; λ_n = σ(z_n) is the
// conditional probability of halting after inner step n, λ_N := 1. All N are computed before the
// unit runs (they depend on the causal features only). Sample halts at the first n with u_n < λ_n
// (the conditional probability, docs/rl_stats.md P14); Greedy halts at the mode of p_n.
class HaltingPolicy final : public Policy, public VectorActor {
 public:
  HaltingPolicy(std::string name, std::shared_ptr<PolicyNet> net, FeatureNorm norm, FeatureNeeds needs);
  std::string name() const override { return name_; }
  FeatureNeeds needs() const override { return needs_; }
  void begin_sequence(uint64_t seed) override;
  // Every n is at least 1, so it decides at After, from the unit's own signals (Before only says "stepped").
  int decide(const UnitFeatures& f) override { return f.stage == Stage::Before ? 1 : act(f.vector()); }
  bool may_skip() const override { return false; }
  int act(const std::vector<double>& x) override;  // returns the number of steps n ∈ 1..N
  std::unique_ptr<Policy> clone() const override;  // the same parameters, its own recurrent state and generator
  int64_t max_steps() const { return net_->outputs(); }
  void set_mode(ActMode m) { mode_ = m; }
  PolicyNet& net() { return *net_; }
  const FeatureNorm& norm() const { return norm_; }
  void set_norm(FeatureNorm n) { norm_ = std::move(n); }

 private:
  std::string name_;
  std::shared_ptr<PolicyNet> net_;
  FeatureNorm norm_;
  FeatureNeeds needs_;
  ActMode mode_ = ActMode::Sample;
  Generator gen_{0};
};

// Differentiable PonderNet pieces over a batch of units: logits z (U, N) → log p (U, N) with
// p_n = λ_n·Π_{j<n}(1−λ_j), λ = σ(z), λ_N = 1, computed in log space (log λ = −softplus(−z),
// log(1−λ) = −softplus(z)) so long products do not underflow.
Tensor halting_log_probs(const Tensor& logits);

}  // namespace ponder::policy
