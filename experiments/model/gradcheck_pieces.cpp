// `ponder gradcheck --model CONFIG --piece P`: float64 finite differences on one piece of the model a config
// builds, first and second order, through the pass the config runs (its eval schedule, mode and path). The
// pieces are too large for a full Jacobian, so the checks go along random directions (autograd/gradcheck.h).
#include "experiments/model/gradcheck_pieces.h"

#include <cstdio>
#include <stdexcept>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "policy/policy_net.h"
#include "tensor/rng.h"
#include "ttt/eval.h"

namespace ponder::cli {
namespace gradcheck_pieces {
namespace {

// The labels (Model::parameter_labels) of the first block whose mixer matches, or of every parameter.
std::vector<std::string> piece_labels(const ttt::Model& model, const std::string& piece) {
  const std::vector<std::string> labels = model.parameter_labels();
  std::string block;  // "block3." for the first block holding the piece
  for (const std::string& l : labels) {
    const size_t dot = l.find('.');
    if (l.rfind("block", 0) != 0 || dot == std::string::npos) continue;
    const std::string rest = l.substr(dot + 1);
    const bool match = piece == "block" || (piece == "ttt" && rest.rfind("ttt.", 0) == 0) ||
                       (piece == "attention" && rest.rfind("attn.", 0) == 0);
    if (match) { block = l.substr(0, dot + 1); break; }
  }
  std::vector<std::string> out;
  for (const std::string& l : labels) {
    if (piece == "model") { out.push_back(l); continue; }
    if (block.empty() || l.rfind(block, 0) != 0) continue;
    const std::string rest = l.substr(block.size());
    const std::string prefix = piece == "attention" ? "attn." : piece + ".";
    if (piece == "block" || rest.rfind(prefix, 0) == 0) out.push_back(l);
  }
  if (out.empty()) throw std::invalid_argument("gradcheck --piece " + piece + ": the model has no such piece");
  return out;
}

// Random host ids (1, n) in [0, vocab).
Tensor random_ids(Generator& gen, int64_t n, int64_t vocab) {
  std::vector<int64_t> v;
  for (double u : gen.uniform({1, n}, 0, 1, DType::F64).to_vector())
    v.push_back(std::min(vocab - 1, int64_t(u * double(vocab))));
  return Tensor::from_ints(v, {1, n});
}

// f(parameters of the piece) = Σ token_loss ⊙ r over two mini-batches of random tokens.
PieceCheck check_model_piece(const RunConfig& cfg, const std::string& piece, int directions) {
  const ttt::Model model(cfg.model, uint64_t(cfg.train.seed), DType::F64);
  const std::vector<std::string> labels = piece_labels(model, piece);
  std::vector<Tensor> inputs;
  const auto named = model.named_parameters();
  const auto all = model.parameter_labels();
  for (const std::string& l : labels)
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == l) inputs.push_back(named[i].second);
  Generator gen(uint64_t(cfg.train.seed) + 1);
  const int64_t n = 2 * cfg.model.mini_batch;
  const Tensor ids = random_ids(gen, n, cfg.model.vocab), targets = random_ids(gen, n, cfg.model.vocab);
  const Tensor r = gen.normal({1, n}, 0, 1, DType::F64);
  const ttt::InnerRun inner = cfg.eval.inner;
  auto f = [&](const std::vector<Tensor>& xs) {
    std::vector<std::pair<std::string, Tensor>> replace;
    for (size_t i = 0; i < xs.size(); ++i) replace.push_back({labels[i], xs[i]});
    const std::unique_ptr<ttt::StepSchedule> sched = ttt::make_schedule(inner.schedule);
    const ttt::TTTRun run = ttt::make_run(inner, sched.get(), 1.0, nullptr);
    return sum(mul(model.with_parameters(replace).token_losses(ids, targets, run), r));
  };
  int64_t count = 0;
  for (const Tensor& t : inputs) count += t.numel();
  const std::vector<bool> diff(inputs.size(), true);
  return {piece, labels.size(), count, directional_gradcheck(f, inputs, diff, directions),
          directional_gradgradcheck(f, inputs, diff, directions)};
}

// f(parameters, features) = Σ net(x) ⊙ r over 6 units of random features, for the policy network of `kind`.
PieceCheck check_policy_piece(const RunConfig& cfg, const std::string& kind, int directions) {
  const int64_t units = 6, outputs = int64_t(cfg.compare.learn.options.size());
  const auto net = policy::make_policy_net(kind, policy::feature_count(), cfg.compare.learn.hidden, outputs,
                                           uint64_t(cfg.train.seed), DType::F64);
  Generator gen(uint64_t(cfg.train.seed) + 2);
  const Tensor x = gen.normal({1, units, policy::feature_count()}, 0, 1, DType::F64);
  const Tensor r = gen.normal({1, units, outputs}, 0, 1, DType::F64);
  std::vector<Tensor> inputs = net->parameters();
  inputs.push_back(x);
  auto f = [&](const std::vector<Tensor>& xs) {
    const std::vector<Tensor> params(xs.begin(), xs.end() - 1);
    return sum(mul(net->with_parameters(params)->forward(xs.back()), r));
  };
  int64_t count = 0;
  for (const Tensor& t : inputs) count += t.numel();
  const std::vector<bool> diff(inputs.size(), true);
  return {kind == "mlp" ? "policy" : kind, inputs.size(), count, directional_gradcheck(f, inputs, diff, directions),
          directional_gradgradcheck(f, inputs, diff, directions)};
}

}  // namespace
}  // namespace gradcheck_pieces

const std::vector<std::string>& piece_names() {
  using namespace gradcheck_pieces;
  static const std::vector<std::string> names{"ttt", "attention", "block", "model", "policy", "lstm"};
  return names;
}

PieceCheck check_piece(const RunConfig& cfg, const std::string& piece, int directions) {
  using namespace gradcheck_pieces;
  if (piece == "policy") return check_policy_piece(cfg, "mlp", directions);
  if (piece == "lstm") return check_policy_piece(cfg, "lstm", directions);
  for (const std::string& p : piece_names())
    if (p == piece) return check_model_piece(cfg, piece, directions);
  std::string all;
  for (const std::string& p : piece_names()) all += (all.empty() ? "" : ", ") + p;
  throw std::invalid_argument("gradcheck --piece: expected one of " + all + ", got '" + piece + "'");
}

}  // namespace ponder::cli
