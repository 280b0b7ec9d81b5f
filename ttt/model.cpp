#include "ttt/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "ttt/conv.h"
#include "ttt/rope.h"

namespace ponder::ttt {
namespace {

void need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument("model config: " + msg);
}

}  // namespace

TTTConfig ModelConfig::ttt_config() const {
  TTTConfig c;
  c.d = d;
  c.heads = heads;
  c.mini_batch = mini_batch;
  c.mlp = inner == "mlp";
  c.shared_qk = backbone == "mamba";
  c.gate = gate;
  c.conv_width = conv_width;
  c.base_lr = base_lr > 0 ? base_lr : (c.mlp ? 0.1 : 1.0);
  c.rope_theta = rope_theta;
  c.init_std = init_std;
  c.softplus_token_factor = token_factor == "softplus";
  return c;
}

void ModelConfig::validate() const {
  need(vocab > 0, "vocab must be positive, got " + std::to_string(vocab));
  need(d > 0 && heads > 0 && d % heads == 0 && (d / heads) % 2 == 0,
       "d = " + std::to_string(d) + " must split into " + std::to_string(heads) + " heads of even size");
  need(layers > 0, "layers must be positive, got " + std::to_string(layers));
  need(mini_batch > 0, "mini_batch must be positive, got " + std::to_string(mini_batch));
  need(inner == "linear" || inner == "mlp", "inner must be 'linear' or 'mlp', got '" + inner + "'");
  need(backbone == "mamba" || backbone == "transformer",
       "backbone must be 'mamba' or 'transformer', got '" + backbone + "'");
  need(mixers.empty() || int64_t(mixers.size()) == layers,
       "mixers lists " + std::to_string(mixers.size()) + " layers, the model has " + std::to_string(layers));
  for (const std::string& m : mixers) need(m == "ttt" || m == "attention", "mixer must be 'ttt' or 'attention', got '" + m + "'");
  need(conv_width > 0, "conv_width must be positive");
  need(swiglu_hidden >= 0, "swiglu_hidden must be >= 0 (0 = the default size), got " + std::to_string(swiglu_hidden));
  need(base_lr >= 0 && std::isfinite(base_lr), "base_lr must be >= 0 (0 = the default), got " + std::to_string(base_lr));
  need(init_std > 0 && std::isfinite(init_std), "init_std must be positive, got " + std::to_string(init_std));
  need(token_factor == "official" || token_factor == "softplus",
       "token_factor must be 'official' or 'softplus', got '" + token_factor + "'");
  need(attn_window >= 0, "attn_window must be >= 0, got " + std::to_string(attn_window));
}

// ---- attention

Attention::Attention(int64_t d, int64_t h, double theta, double sd, Generator& gen, DType dt, int64_t win)
    : heads(h), rope_theta(theta), window(win) {
  wq = trainable(gen.normal({d, d}, 0, sd, dt));
  wk = trainable(gen.normal({d, d}, 0, sd, dt));
  wv = trainable(gen.normal({d, d}, 0, sd, dt));
  wo = trainable(gen.normal({d, d}, 0, sd, dt));
}

Tensor Attention::forward(const Tensor& x) const {
  KVCache cache;
  return forward_chunk(x, cache);
}

Tensor Attention::forward_chunk(const Tensor& x, KVCache& cache) const {
  const int64_t B = x.shape()[0], n = x.shape()[1], d = x.shape()[2], f = d / heads, t0 = cache.len;
  auto split = [&](const Tensor& t) { return permute(reshape(t, {B, n, heads, f}), {0, 2, 1, 3}); };  // (B,H,n,f)
  Tensor q = rope(split(matmul(x, wq)), 0, rope_theta, t0);
  Tensor k = rope(split(matmul(x, wk)), 0, rope_theta, t0);
  Tensor v = split(matmul(x, wv));
  if (cache.k.defined()) {
    k = cat({cache.k, k}, 2);
    v = cat({cache.v, v}, 2);
  }
  const int64_t T = k.shape()[2], first = t0 + n - T;  // keys hold positions [first, t0 + n)
  // The cache keeps what later queries can still see: everything, or the last window − 1 positions.
  const int64_t keep = window == 0 ? T : std::min(T, window - 1);
  cache.k = keep == T ? k : slice(k, 2, T - keep, T);
  cache.v = keep == T ? v : slice(v, 2, T - keep, T);
  cache.len += n;
  const AttnGeometry geo{1.0 / std::sqrt(double(f)), t0, first, window};
  Tensor y = reshape(permute(attention(q, k, v, geo), {0, 2, 1, 3}), {B, n, d});  // (B, H, n, f) → (B, n, d)
  return matmul(y, wo);
}

std::vector<Tensor> Attention::parameters() const { return {wq, wk, wv, wo}; }

// ---- SwiGLU

SwiGLU::SwiGLU(int64_t d, int64_t hidden, double sd, Generator& gen, DType dt) {
  w1 = trainable(gen.normal({d, hidden}, 0, sd, dt));
  w3 = trainable(gen.normal({d, hidden}, 0, sd, dt));
  w2 = trainable(gen.normal({hidden, d}, 0, sd, dt));
}

Tensor SwiGLU::forward(const Tensor& x) const { return matmul(silu_mul(matmul(x, w1), matmul(x, w3)), w2); }
std::vector<Tensor> SwiGLU::parameters() const { return {w1, w3, w2}; }

std::vector<std::pair<std::string, Tensor*>> Block::named_refs() {
  std::vector<std::pair<std::string, Tensor*>> r;
  if (conv_w.defined()) r.insert(r.end(), {{"conv_norm.weight", &conv_norm.weight}, {"conv_w", &conv_w}, {"conv_b", &conv_b}});
  r.push_back({"seq_norm.weight", &seq_norm.weight});
  if (is_ttt)
    for (const auto& [name, t] : ttt.named_refs()) r.push_back({"ttt." + name, t});
  else
    r.insert(r.end(), {{"attn.wq", &attn.wq}, {"attn.wk", &attn.wk}, {"attn.wv", &attn.wv}, {"attn.wo", &attn.wo}});
  r.insert(r.end(), {{"ffn_norm.weight", &ffn_norm.weight}, {"ffn.w1", &ffn.w1}, {"ffn.w3", &ffn.w3}, {"ffn.w2", &ffn.w2}});
  return r;
}

std::vector<Tensor> Block::parameters() const {
  std::vector<Tensor> p;
  for (const auto& [name, t] : const_cast<Block*>(this)->named_refs()) p.push_back(*t);
  return p;
}

std::vector<std::string> Block::parameter_names() const {
  std::vector<std::string> n;
  for (const auto& [name, t] : const_cast<Block*>(this)->named_refs()) n.push_back(name);
  return n;
}

// ---- model

Model::Model(const ModelConfig& cfg, uint64_t seed, DType dt) : cfg_(cfg), dtype_(dt) {
  cfg.validate();
  Generator gen(seed);
  emb_ = Embedding(cfg.vocab, cfg.d, gen, dt);
  if (!cfg.tie_embeddings) head_ = trainable(gen.normal({cfg.d, cfg.vocab}, 0, cfg.init_std, dt));
  for (int64_t l = 0; l < cfg.layers; ++l) {
    Block b;
    b.seq_norm = RMSNorm(cfg.d, cfg.rms_eps, dt);
    b.ffn_norm = RMSNorm(cfg.d, cfg.rms_eps, dt);
    if (cfg.pre_conv) {
      b.conv_norm = RMSNorm(cfg.d, cfg.rms_eps, dt);
      b.conv_w = trainable(gen.normal({cfg.d, cfg.conv_width}, 0, cfg.init_std, dt));
      b.conv_b = trainable(Tensor::zeros({cfg.d}, dt));
    }
    b.is_ttt = cfg.mixer(l) == "ttt";
    if (b.is_ttt) {
      b.ttt_index = n_ttt_++;
      b.ttt = TTTLayer(cfg.ttt_config(), b.ttt_index, gen, dt);
    } else {
      b.attn = Attention(cfg.d, cfg.heads, cfg.rope_theta, cfg.init_std, gen, dt, cfg.attn_window);
    }
    b.ffn = SwiGLU(cfg.d, cfg.ffn_hidden(), cfg.init_std, gen, dt);
    blocks_.push_back(std::move(b));
  }
  final_norm_ = RMSNorm(cfg.d, cfg.rms_eps, dt);
}

Tensor Model::forward(const Tensor& ids, const TTTRun& run) const {
  ModelState state;
  return forward_chunk(ids, state, run);
}

Tensor Model::forward_chunk(const Tensor& ids, ModelState& st, const TTTRun& run) const {
  return logits(hidden_chunk(ids, st, run), run);
}

Tensor Model::hidden_chunk(const Tensor& ids, ModelState& st, const TTTRun& run) const {
  if (ids.dim() != 2 || is_float(ids.dtype()))
    throw std::invalid_argument("Model::forward: ids must be an integer (B, N) tensor, got " + shape_str(ids.shape()));
  if (st.ttt.empty()) {
    st.ttt.resize(blocks_.size());
    st.kv.resize(blocks_.size());
    st.pre_conv_hist.resize(blocks_.size());
  }
  Tensor h = emb_.forward(ids);  // (B, N, d)
  if (run.watch) run.watch("embedding", h);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    const Block& b = blocks_[l];
    const std::string where = "block" + std::to_string(l) + ".";
    auto seen = [&](const std::string& what, const Tensor& t) {
      if (run.watch) run.watch(where + what, t);
    };
    if (b.conv_w.defined()) h = add(h, causal_conv_chunk(b.conv_norm.forward(h), st.pre_conv_hist[l], b.conv_w, b.conv_b));
    Tensor x = b.seq_norm.forward(h);
    seen("seq_norm", x);
    Tensor mixed;
    if (b.is_ttt && run.watch) {
      TTTRun r = run;
      r.watch = [&](const std::string& what, const Tensor& t) { run.watch(where + "ttt." + what, t); };
      mixed = b.ttt.forward_chunk(x, st.ttt[l], r);
    } else {
      mixed = b.is_ttt ? b.ttt.forward_chunk(x, st.ttt[l], run) : b.attn.forward_chunk(x, st.kv[l]);
    }
    seen(b.is_ttt ? "ttt" : "attention", mixed);
    h = add(h, mixed);
    Tensor f = b.ffn.forward(b.ffn_norm.forward(h));
    seen("ffn", f);
    h = add(h, f);
  }
  st.tokens += ids.shape()[1];
  return h;
}

Tensor Model::logits(const Tensor& hidden, const TTTRun& run) const {
  Tensor h = final_norm_.forward(hidden);
  if (run.watch) run.watch("final_norm", h);
  return matmul(h, cfg_.tie_embeddings ? transpose(emb_.weight, 0, 1) : head_);  // (B, N, V)
}

Model Model::with_parameters(const std::vector<std::pair<std::string, Tensor>>& replace) const {
  Model m = *this;  // tensors are handles: the copy shares every parameter until one is replaced
  std::vector<std::pair<std::string, Tensor*>> refs{{"emb.weight", &m.emb_.weight}};
  if (m.head_.defined()) refs.push_back({"head", &m.head_});
  for (size_t l = 0; l < m.blocks_.size(); ++l)
    for (const auto& [name, t] : m.blocks_[l].named_refs()) refs.push_back({"block" + std::to_string(l) + "." + name, t});
  refs.push_back({"final_norm.weight", &m.final_norm_.weight});
  for (const auto& entry : replace) {
    const std::string& label = entry.first;  // a plain name, not a binding: clang 14 cannot capture bindings
    const Tensor& t = entry.second;
    auto it = std::find_if(refs.begin(), refs.end(), [&](const auto& r) { return r.first == label; });
    if (it == refs.end()) throw std::invalid_argument("Model::with_parameters: no parameter named '" + label + "'");
    if (t.shape() != it->second->shape())
      throw std::invalid_argument("Model::with_parameters: " + label + " is " + shape_str(it->second->shape()) +
                                  ", its replacement " + shape_str(t.shape()));
    *it->second = t;
  }
  return m;
}

Tensor Model::token_losses(const Tensor& inputs, const Tensor& targets, const TTTRun& run) const {
  ModelState state;
  return token_losses(inputs, targets, state, run);
}

Tensor Model::token_losses(const Tensor& inputs, const Tensor& targets, ModelState& state, const TTTRun& run) const {
  Tensor logits = forward_chunk(inputs, state, run);
  const int64_t B = inputs.shape()[0], N = inputs.shape()[1];
  return reshape(cross_entropy_per_token(reshape(logits, {B * N, cfg_.vocab}), raw::reshape(targets, {B * N})), {B, N});
}

ModelState detached(const ModelState& st) {
  auto cut = [](const Tensor& t) { return t.defined() ? detach(t) : t; };
  ModelState out = st;
  for (TTTLayerState& l : out.ttt) {
    for (Tensor* t : {&l.inner.W1, &l.inner.b1, &l.inner.W2, &l.inner.b2, &l.conv_hist, &l.last_xk, &l.last_xv})
      *t = cut(*t);
  }
  for (KVCache& c : out.kv) {
    c.k = cut(c.k);
    c.v = cut(c.v);
  }
  for (Tensor& t : out.pre_conv_hist) t = cut(t);
  return out;
}

std::vector<const TTTLayer*> Model::ttt_layers() const {
  std::vector<const TTTLayer*> out;
  for (const Block& b : blocks_)
    if (b.is_ttt) out.push_back(&b.ttt);
  return out;
}

std::vector<double> Model::carry_factors() const {
  std::vector<double> out;
  for (const TTTLayer* l : ttt_layers()) out.push_back(l->carry_factor());
  return out;
}

std::vector<Probe> Model::probe(const ModelState& st, bool with_grad) const {
  std::vector<Probe> out;
  for (size_t l = 0; l < blocks_.size(); ++l)
    if (blocks_[l].is_ttt && l < st.ttt.size()) out.push_back(blocks_[l].ttt.probe(st.ttt[l], with_grad));
  return out;
}

std::vector<Probe> Model::probe_chunk(const ModelState& weights, const ModelState& st, bool with_grad) const {
  std::vector<Probe> out;
  for (size_t l = 0; l < blocks_.size(); ++l)
    if (blocks_[l].is_ttt && l < st.ttt.size()) {
      // A chunk that is the sequence's first starts from the learned W0, which the state before it does not hold yet.
      const bool fresh = l >= weights.ttt.size() || !weights.ttt[l].inner.W1.defined();
      const TTTLayer& layer = blocks_[l].ttt;
      out.push_back(layer.probe_chunk(fresh ? layer.initial_state(st.ttt[l].chunk_xk.shape()[0]) : weights.ttt[l].inner,
                                      st.ttt[l], with_grad));
    }
  return out;
}

void Model::extra_steps(ModelState& st, int steps, const TTTRun& run, std::vector<UnitCost>* costs) const {
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (!blocks_[l].is_ttt || l >= st.ttt.size()) continue;
    UnitCost cost{blocks_[l].ttt_index, st.ttt[l].units - 1, 0, 0, 0, 0, 0};
    blocks_[l].ttt.extra_steps(st.ttt[l], steps, run, cost);
    if (costs) costs->push_back(cost);
  }
}

std::vector<Tensor> Model::parameters() const {
  std::vector<Tensor> p;
  for (auto& [name, t] : named_parameters()) p.push_back(t);
  return p;
}

std::vector<std::pair<std::string, Tensor>> Model::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> p;
  p.push_back({"emb", emb_.weight});
  if (head_.defined()) p.push_back({"head", head_});
  for (size_t l = 0; l < blocks_.size(); ++l) {
    auto ps = blocks_[l].parameters();
    for (size_t i = 0; i < ps.size(); ++i) p.push_back({"block" + std::to_string(l) + "." + std::to_string(i), ps[i]});
  }
  p.push_back({"final_norm", final_norm_.weight});
  return p;
}

std::vector<std::string> Model::parameter_labels() const {
  std::vector<std::string> n{"emb.weight"};
  if (head_.defined()) n.push_back("head");
  for (size_t l = 0; l < blocks_.size(); ++l)
    for (const std::string& p : blocks_[l].parameter_names()) n.push_back("block" + std::to_string(l) + "." + p);
  n.push_back("final_norm.weight");
  return n;
}

Model& Model::to(Device device) {
  for (const Tensor& p : parameters()) move_to_device_(p, device);
  return *this;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

}  // namespace ponder::ttt
