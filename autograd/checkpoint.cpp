// Checkpointing as one multi-output node: the forward runs the region without recording, the node
// keeps only the region's inputs, and its backward re-runs the region and differentiates it.
//
// Contract: every tensor the region needs gradients for must be passed in `inputs` (tensors it
// captures by closure are constants to the checkpoint), and the region must be deterministic, since
// it runs again during backward and must reproduce its forward outputs. The forward runs under
// NoGradGuard, so a region that calls grad() itself must switch grad mode on inside.
#include "autograd/checkpoint.h"

#include <optional>
#include <stdexcept>
#include <string>

#include "autograd/engine.h"

namespace ponder {
namespace {

class CheckpointNode final : public Node {
 public:
  CheckpointNode(RegionFn fn, const std::vector<Tensor>& inputs) : fn_(std::move(fn)) {
    for (const Tensor& x : inputs) saved_.emplace_back(x, false);
  }
  ~CheckpointNode() override {
    for (SavedTensor& s : saved_) release_deferred(s.take());
  }

  std::vector<Tensor> apply(const std::vector<Tensor>& grads, const std::vector<bool>& needs) override {
    if (released_)
      throw std::runtime_error(
          "backward through a checkpoint a second time: its saved inputs were freed after the first backward; pass "
          "retain_graph=true to the first call if you need to backward twice");
    std::vector<Tensor> xs;
    xs.reserve(saved_.size());
    auto self = shared_from_this();
    for (const SavedTensor& s : saved_) xs.push_back(s.unpack(self, name()));

    std::vector<Shape> shapes;
    for (const auto& o : outputs) shapes.push_back(o.shape);
    return recompute_vjp(fn_, std::move(xs), grads, needs, shapes, "checkpoint");
  }

  void release() override {
    saved_.clear();
    fn_ = nullptr;  // the closure may hold large captures too
    released_ = true;
  }

  std::string name() const override { return op_name(Op::Checkpoint); }

 private:
  RegionFn fn_;
  std::vector<SavedTensor> saved_;
  bool released_ = false;
};

}  // namespace

std::vector<Tensor> recompute_vjp(const RegionFn& fn, std::vector<Tensor> xs, const std::vector<Tensor>& grads,
                                  const std::vector<bool>& needs, const std::vector<Shape>& shapes, const char* who,
                                  bool count_forward) {
  // Under create_graph the recomputation must hang off the original inputs so the returned gradients
  // stay differentiable with respect to them. Each needed input is first passed through a fresh
  // identity node: grad() then stops at that node, so it returns the partial derivative for that input
  // only, not also paths through other inputs derived from it, which the outer engine adds itself.
  // Without create_graph, detached leaves cut the recomputation off from the outer graph entirely.
  const bool create_graph = GradMode::enabled();
  std::vector<Tensor> wrt;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!needs[i]) continue;
    if (create_graph) {
      xs[i] = reshape(xs[i], xs[i].shape());
    } else {
      xs[i] = detach(xs[i]);
      set_requires_grad(xs[i]);
    }
    wrt.push_back(xs[i]);
  }
  std::vector<Tensor> outs;
  {
    SetGradGuard on(true);
    std::optional<FlopIsolate> uncounted;
    if (!count_forward) uncounted.emplace();
    outs = fn(xs);
  }
  if (outs.size() != shapes.size())
    throw std::runtime_error(std::string(who) + ": the region returned " + std::to_string(outs.size()) +
                             " outputs when recomputed, " + std::to_string(shapes.size()) + " in the forward");

  // Only recomputed outputs with a graph can pass gradient on; the rest are constants of the inputs.
  std::vector<Tensor> roots, root_grads;
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!requires_grad(outs[i])) continue;
    if (outs[i].shape() != shapes[i])
      throw std::runtime_error(std::string(who) + ": recomputed output " + std::to_string(i) + " has shape " +
                               shape_str(outs[i].shape()) + ", the forward gave " + shape_str(shapes[i]));
    roots.push_back(outs[i]);
    root_grads.push_back(grads[i]);
  }
  std::vector<Tensor> result(xs.size());
  if (roots.empty() || wrt.empty()) return result;
  GradOptions opt;
  opt.create_graph = create_graph;
  opt.allow_unused = true;
  std::vector<Tensor> g = grad(roots, wrt, root_grads, opt);
  for (size_t i = 0, k = 0; i < xs.size(); ++i)
    if (needs[i]) result[i] = g[k++];
  return result;
}

std::vector<Tensor> checkpoint(const RegionFn& fn, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) throw std::invalid_argument("checkpoint: input " + std::to_string(i) + " is undefined");
  bool record = false;
  if (GradMode::enabled())
    for (const Tensor& x : inputs) record = record || requires_grad(x);

  FlopScope scope;
  std::vector<Tensor> outs;
  {
    NoGradGuard ng;
    outs = fn(inputs);
  }
  for (size_t i = 0; i < outs.size(); ++i)
    if (!outs[i].defined())
      throw std::invalid_argument("checkpoint: region output " + std::to_string(i) + " is undefined");
  if (!record) return outs;

  auto node = std::make_shared<CheckpointNode>(fn, inputs);
  for (const Tensor& x : inputs) node->next.push_back(gradient_edge(x));
  for (const Tensor& y : outs) node->outputs.push_back({y.shape(), y.dtype(), y.device()});
  node->seq = next_node_seq();
  node->forward_flops = scope.counts().total();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!is_float(outs[i].dtype())) continue;  // integer results (indices) carry no gradient
    // A fresh impl: the region may have returned an input itself, whose autograd state must stay as is.
    outs[i] = outs[i].alias();
    auto m = std::make_shared<AutogradMeta>();
    m->requires_grad = true;
    m->grad_fn = node;
    m->output_nr = uint32_t(i);
    outs[i].impl()->autograd = std::move(m);
  }
  return outs;
}

}  // namespace ponder
