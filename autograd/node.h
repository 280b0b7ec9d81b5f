// Graph nodes. Ownership points backwards only (tensor → grad_fn → next edges → earlier nodes), so
// graphs are acyclic in ownership; a node keeps its own output through a SavedTensor that drops
// the grad_fn link and re-attaches it when unpacked.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/op_list.h"
#include "tensor/flops.h"
#include "tensor/tensor.h"

namespace ponder {

class Node;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;   // set on results of recorded ops
  uint32_t output_nr = 0;
  std::shared_ptr<Node> grad_acc;  // leaves: where backward() accumulates .grad
  Tensor grad;                     // leaves: accumulated gradient
  std::string name;                // optional, shown in graph dumps
};

struct OutputInfo {
  Shape shape;
  DType dtype;
  Device device;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  // Frees the nodes only this one keeps alive in a loop, not by recursion: dropping the last
  // reference to a long unroll would otherwise overflow the stack.
  virtual ~Node();
  // grads: one per output (zeros filled in for outputs that got none); needs: one per next edge.
  // Returns one gradient per next edge (undefined where not needed).
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grads, const std::vector<bool>& needs) = 0;
  virtual void release() {}
  virtual std::string name() const = 0;
  // What a trace shows beside the op name (a parameter's name for its accumulator).
  virtual std::string label() const { return {}; }

  std::vector<Edge> next;
  std::vector<OutputInfo> outputs;
  uint64_t seq = 0;           // creation order; the engine runs later nodes first
  uint64_t forward_flops = 0;  // work of the forward op that made this node (graph dumps)
};

class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t, bool is_output);
  // Checks the version counter; an output gets its grad_fn (`self`) back.
  Tensor unpack(const std::shared_ptr<Node>& self, const std::string& op) const;
  // Gives up the saved tensor (when its node is destroyed).
  Tensor take() { return std::move(data_); }
 private:
  Tensor data_;
  uint32_t version_ = 0;
  bool is_output_ = false;
  uint32_t output_nr_ = 0;
};

// Backward rule of a primitive op: grad of the output, the unpacked saved tensors, and which
// inputs need a gradient → one gradient per input.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad, const std::vector<Tensor>& saved,
                                                     const std::vector<bool>& needs)>;
// The same for an op with several outputs: one gradient per output (zeros where an output got none).
using MultiBackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads,
                                                          const std::vector<Tensor>& saved,
                                                          const std::vector<bool>& needs)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(Op op, std::vector<SavedTensor> saved, BackwardFn fn)
      : op_(op), saved_(std::move(saved)), fn_(std::move(fn)) {}
  FunctionNode(Op op, std::vector<SavedTensor> saved, MultiBackwardFn fn)
      : op_(op), saved_(std::move(saved)), multi_(std::move(fn)) {}
  ~FunctionNode() override;
  std::vector<Tensor> apply(const std::vector<Tensor>& grads, const std::vector<bool>& needs) override;
  void release() override;
  std::string name() const override { return op_name(op_); }
 private:
  Op op_;
  std::vector<SavedTensor> saved_;
  BackwardFn fn_;       // one output
  MultiBackwardFn multi_;  // several
  bool released_ = false;
};

// Writes incoming gradients into a leaf's .grad (backward() only; grad() captures instead).
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(const std::vector<Tensor>& grads, const std::vector<bool>& needs) override;
  std::string name() const override { return "accumulate_grad"; }
  std::string label() const override;
 private:
  std::weak_ptr<TensorImpl> leaf_;
};

// Hands the graph that only `t` keeps alive to the enclosing node destructor's loop (saved tensors
// reach earlier nodes too). Custom nodes call it on their saved tensors in their destructors.
void release_deferred(Tensor&& t);

// ---- autograd state of a tensor
bool requires_grad(const Tensor& t);
// Marks a leaf as a parameter (throws for a non-leaf).
Tensor& set_requires_grad(Tensor& t, bool on = true);
// A new trainable parameter: t itself, marked as needing gradients (for initialisers: trainable(randn(...))).
inline Tensor trainable(Tensor t) { return set_requires_grad(t); }
Tensor grad_of(const Tensor& t);      // a leaf's accumulated gradient (undefined if none)
void zero_grad(const Tensor& t);      // drops the accumulated gradient
void set_grad(const Tensor& t, const Tensor& g);
std::shared_ptr<Node> grad_fn(const Tensor& t);
bool is_leaf(const Tensor& t);
void set_name(const Tensor& t, const std::string& name);
Tensor detach(const Tensor& t);
// The node and slot where gradient for t enters the graph (creates a leaf's accumulator).
Edge gradient_edge(const Tensor& t);

// Makes outs[i] output i of node (each with an impl of its own, so a view keeps its base's graph) and records
// the outputs' shapes on the node: for nodes with several outputs (split, OpRecorder::done with a list).
void attach_outputs(const std::shared_ptr<Node>& node, std::vector<Tensor>& outs);

// A fresh creation-order number for a new node (the engine runs later nodes first).
uint64_t next_node_seq();
// The number the next node will get: nodes made between two reads belong to the code run between them.
uint64_t node_seq_now();

// Records a primitive op's result: if grad mode is on and an input requires grad, attaches a
// FunctionNode with edges to `inputs` (in order), `saved` (and the output, when save_output) kept
// for the backward rule. `flops` is the forward work, for graph dumps.
// The lists are initializer_lists, copied only when a node is made: without grad (evaluation, rollouts) an op then
// allocates nothing here, where two vectors per op were a fifth of the mallocs a comparison had left.
class OpRecorder {
 public:
  OpRecorder(Op op, std::initializer_list<Tensor> inputs) : OpRecorder(op, inputs.begin(), inputs.size()) {}
  OpRecorder(Op op, const std::vector<Tensor>& inputs) : OpRecorder(op, inputs.data(), inputs.size()) {}
  bool active() const { return active_; }
  Tensor done(Tensor out, std::initializer_list<Tensor> saved, BackwardFn fn, bool save_output = false);
  // An op with several results (each a tensor of its own, views of one buffer allowed): one node, output i of
  // which is outs[i]; its rule gets a gradient for each.
  std::vector<Tensor> done(std::vector<Tensor> outs, std::vector<Tensor> saved, MultiBackwardFn fn);
 private:
  OpRecorder(Op op, const Tensor* inputs, size_t n);
  Op op_;
  std::vector<Tensor> inputs_;
  bool active_;
  FlopScope scope_;
};

}  // namespace ponder
