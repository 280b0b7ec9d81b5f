// The backward engine: reverse topological execution with an explicit ready queue (no recursion,
// so graphs from long TTT unrolls cannot overflow the stack).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"

namespace ponder {

// One line per executed node, for debugging gradients (see graph_dump()).
struct TraceEntry {
  std::string op;
  std::string label;  // the leaf's name (set_name) for a parameter's gradient accumulator, else empty
  std::vector<Shape> output_shapes;
  uint64_t seq = 0;             // the node's creation number (node_seq_now() brackets a forward section)
  uint64_t forward_flops = 0;   // the forward op's work
  uint64_t backward_flops = 0;  // this node's backward rule plus adding its results into its inputs' buffers
  double grad_norm = 0;         // L2 norm of the gradient flowing into the node
};
struct GraphTrace {
  std::vector<TraceEntry> entries;
  bool grad_norms = true;  // false: leave TraceEntry::grad_norm at 0 (the norms are host reads: no FLOPs either way)
  std::string str() const;
};

struct GradOptions {
  std::optional<bool> retain_graph;  // defaults to create_graph
  bool create_graph = false;         // record the backward itself, for higher-order gradients
  bool allow_unused = false;         // an input unreachable from the outputs gets an undefined grad
  GraphTrace* trace = nullptr;
};

// d(sum_i <outputs_i, grad_outputs_i>)/d(inputs), returned without touching any .grad.
// grad_outputs may be empty for single-element outputs (then 1).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, const GradOptions& opt = {});

// Accumulates d(output)/d(leaf) into the .grad of every leaf that requires grad.
void backward(const Tensor& output, const Tensor& grad_output = {}, const GradOptions& opt = {});

// Runs backward on a copy of the graph's accumulation and returns the trace text.
std::string graph_dump(const Tensor& loss);

}  // namespace ponder
