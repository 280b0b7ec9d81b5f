#include "autograd/engine.h"

#include <cmath>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"

namespace ponder {
namespace {

enum class Mode { Grad, Backward, Dump };

struct Target {
  Node* node;
  uint32_t slot;
};

struct ByLatest {
  bool operator()(const Node* a, const Node* b) const { return a->seq < b->seq; }
};

double norm_of(const Tensor& t) {
  NoGradGuard ng;
  double s = 0;
  for (double v : t.to_vector()) s += v * v;
  return std::sqrt(s);
}

// Gradients are summed out of place; under create_graph through the differentiable add.
Tensor accumulate(const Tensor& have, const Tensor& add_me) {
  if (!have.defined()) return add_me;
  return GradMode::enabled() ? add(have, add_me) : raw::binary(BinaryOp::Add, have, add_me);
}

// The roots of the backward (one edge per output) and the gradient entering each.
void collect_roots(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs, std::vector<Edge>& roots,
                   std::vector<Tensor>& root_grads) {
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size())
    throw std::invalid_argument("grad: " + std::to_string(grad_outputs.size()) + " grad_outputs for " +
                                std::to_string(outputs.size()) + " outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    Edge e = gradient_edge(outputs[i]);
    if (!e.valid())
      throw std::invalid_argument("grad: output " + std::to_string(i) + " does not require grad (no graph to differentiate)");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      if (outputs[i].numel() != 1)
        throw std::invalid_argument("grad: output " + std::to_string(i) + " has shape " +
                                    shape_str(outputs[i].shape()) + "; pass grad_outputs for non-scalar outputs");
      g = Tensor::full(outputs[i].shape(), 1.0, outputs[i].dtype(), outputs[i].device());
    } else if (g.shape() != outputs[i].shape()) {
      throw std::invalid_argument("grad: grad_output " + std::to_string(i) + " has shape " + shape_str(g.shape()) +
                                  ", output has " + shape_str(outputs[i].shape()));
    }
    roots.push_back(e);
    root_grads.push_back(g);
  }
}

// Every node reachable from the roots, children before parents (an iterative DFS: long unrolls are deep).
std::vector<Node*> post_order(const std::vector<Edge>& roots) {
  std::vector<Node*> order;
  std::unordered_map<Node*, int> state;  // 1 = on stack, 2 = done
  for (const Edge& r : roots) {
    if (state.count(r.fn.get())) continue;
    std::vector<std::pair<Node*, size_t>> stack{{r.fn.get(), 0}};
    state[r.fn.get()] = 1;
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->next.size()) {
        Node* c = n->next[i++].fn.get();
        if (c && !state.count(c)) {
          state[c] = 1;
          stack.push_back({c, 0});
        }
      } else {
        state[n] = 2;
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

// The nodes whose backward must run: those leading to a target (Grad), to a leaf accumulator (Backward), or all
// (Dump). `order` is children before parents, so a node's children are decided before it.
std::unordered_set<Node*> needed_nodes(const std::vector<Node*>& order, Mode mode,
                                       const std::unordered_set<Node*>& target_nodes) {
  std::unordered_set<Node*> needed;
  for (Node* n : order) {
    bool leads = mode == Mode::Grad ? target_nodes.count(n) > 0 : dynamic_cast<AccumulateGrad*>(n) != nullptr;
    for (const Edge& e : n->next) leads = leads || (e.fn && needed.count(e.fn.get()));
    if (mode == Mode::Dump) leads = true;
    if (leads) needed.insert(n);
  }
  return needed;
}

// Runs the needed nodes latest first, each once every gradient flowing into it has arrived.
struct Executor {
  Mode mode;
  const GradOptions& opt;
  bool retain;
  const std::unordered_set<Node*>& needed;
  const std::unordered_set<Node*>& target_nodes;
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::vector<Tensor>> buffers, captured;
  std::priority_queue<Node*, std::vector<Node*>, ByLatest> ready;
  std::unordered_set<Node*> queued;

  void add_to(Node* n, uint32_t slot, const Tensor& g) {
    auto& buf = buffers[n];
    if (buf.empty()) buf.resize(n->outputs.size());
    buf[slot] = accumulate(buf[slot], g);
  }

  void count_deps(const std::vector<Node*>& order) {
    for (Node* n : order) {
      if (!needed.count(n)) continue;
      for (const Edge& e : n->next)
        if (e.fn && needed.count(e.fn.get())) deps[e.fn.get()]++;
    }
  }

  void start(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads) {
    for (size_t i = 0; i < roots.size(); ++i)
      if (needed.count(roots[i].fn.get())) add_to(roots[i].fn.get(), roots[i].input_nr, root_grads[i]);
    for (const Edge& r : roots)
      if (needed.count(r.fn.get()) && deps[r.fn.get()] == 0 && queued.insert(r.fn.get()).second) ready.push(r.fn.get());
  }

  // The gradients flowing into n (zeros for outputs that got none), traced when asked.
  std::vector<Tensor> take_grads(Node* n) {
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(n->outputs.size());
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = Tensor::zeros(n->outputs[i].shape, n->outputs[i].dtype, n->outputs[i].device);
    if (!opt.trace) return grads;
    TraceEntry te{n->name(), n->label(), {}, n->seq, n->forward_flops, 0, 0};
    for (auto& o : n->outputs) te.output_shapes.push_back(o.shape);
    if (opt.trace->grad_norms)
      for (auto& g : grads) te.grad_norm = std::hypot(te.grad_norm, norm_of(g));
    opt.trace->entries.push_back(std::move(te));
    return grads;
  }

  // n's backward rule, its results added into its inputs' buffers, and the inputs made ready.
  void apply(Node* n, const std::vector<Tensor>& grads, bool is_acc) {
    std::vector<bool> needs(n->next.size());
    bool any = is_acc;
    for (size_t i = 0; i < n->next.size(); ++i) {
      needs[i] = n->next[i].fn && needed.count(n->next[i].fn.get());
      any = any || needs[i];
    }
    if (!any) return;
    std::vector<Tensor> out = n->apply(grads, needs);
    for (size_t i = 0; i < n->next.size(); ++i) {
      if (!needs[i]) continue;
      Node* c = n->next[i].fn.get();
      if (i < out.size() && out[i].defined()) {
        if (out[i].shape() != c->outputs[n->next[i].input_nr].shape)
          throw std::logic_error("backward of '" + n->name() + "' returned a gradient of shape " +
                                 shape_str(out[i].shape()) + " for an input of shape " +
                                 shape_str(c->outputs[n->next[i].input_nr].shape));
        add_to(c, n->next[i].input_nr, out[i]);
      }
      if (--deps[c] == 0 && queued.insert(c).second) ready.push(c);
    }
  }

  void drain() {
    while (!ready.empty()) {
      Node* n = ready.top();
      ready.pop();
      const FlopScope node_work;
      std::vector<Tensor> grads = take_grads(n);
      if (target_nodes.count(n)) captured[n] = grads;
      const bool is_acc = dynamic_cast<AccumulateGrad*>(n) != nullptr;
      if (is_acc && mode != Mode::Backward) continue;
      apply(n, grads, is_acc);
      if (opt.trace) opt.trace->entries.back().backward_flops = node_work.counts().total();
      if (!retain) n->release();
    }
  }
};

std::vector<Tensor> run(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
                        const std::vector<Tensor>& inputs, Mode mode, const GradOptions& opt) {
  std::vector<Edge> roots;
  std::vector<Tensor> root_grads;
  collect_roots(outputs, grad_outputs, roots, root_grads);
  const std::vector<Node*> order = post_order(roots);

  std::vector<Target> targets;
  std::unordered_set<Node*> target_nodes;
  if (mode == Mode::Grad) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      Edge e = gradient_edge(inputs[i]);
      if (!e.valid()) throw std::invalid_argument("grad: input " + std::to_string(i) + " does not require grad");
      targets.push_back({e.fn.get(), e.input_nr});
      target_nodes.insert(e.fn.get());
    }
  }
  const std::unordered_set<Node*> needed = needed_nodes(order, mode, target_nodes);
  Executor ex{mode, opt, opt.retain_graph.value_or(opt.create_graph), needed, target_nodes, {}, {}, {}, {}, {}};
  ex.count_deps(order);

  SetGradGuard gm(opt.create_graph);
  flops::PhaseGuard phase(Phase::Backward);
  ex.start(roots, root_grads);
  ex.drain();

  std::vector<Tensor> result;
  for (size_t i = 0; i < targets.size(); ++i) {
    auto it = ex.captured.find(targets[i].node);
    Tensor g = it == ex.captured.end() ? Tensor() : it->second[targets[i].slot];
    if (!g.defined() && !opt.allow_unused)
      throw std::invalid_argument("grad: input " + std::to_string(i) +
                                  " is not reachable from the outputs (pass allow_unused to get an undefined grad)");
    result.push_back(g);
  }
  return result;
}

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, const GradOptions& opt) {
  return run(outputs, grad_outputs, inputs, Mode::Grad, opt);
}

void backward(const Tensor& output, const Tensor& grad_output, const GradOptions& opt) {
  run({output}, grad_output.defined() ? std::vector<Tensor>{grad_output} : std::vector<Tensor>{}, {}, Mode::Backward,
      opt);
}

std::string GraphTrace::str() const {
  std::ostringstream os;
  os << "#    op              output shape(s)        fwd FLOPs      |grad in|\n";
  char line[256];
  for (size_t i = 0; i < entries.size(); ++i) {
    const TraceEntry& e = entries[i];
    std::string shapes;
    for (auto& s : e.output_shapes) {  // appended piecewise: "" + string trips GCC 12's -Wrestrict
      if (!shapes.empty()) shapes += ' ';
      shapes += shape_str(s);
    }
    std::snprintf(line, sizeof line, "%-4zu %-15s %-22s %-14llu %.6g\n", i, e.op.c_str(), shapes.c_str(),
                  (unsigned long long)e.forward_flops, e.grad_norm);
    os << line;
  }
  return os.str();
}

std::string graph_dump(const Tensor& loss) {
  GraphTrace trace;
  GradOptions opt;
  opt.retain_graph = true;
  opt.trace = &trace;
  run({loss}, {}, {}, Mode::Dump, opt);
  return trace.str();
}

}  // namespace ponder
