#include "autograd/node.h"

#include <atomic>
#include <stdexcept>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "tensor/kernels.h"
#include "tensor/side_by_side.h"

namespace ponder {
namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_seq{0};

AutogradMeta& meta(const Tensor& t) {
  if (!t.impl()->autograd) t.impl()->autograd = std::make_shared<AutogradMeta>();
  return *t.impl()->autograd;
}
}  // namespace

bool GradMode::enabled() { return t_grad_enabled; }
void GradMode::set(bool on) { t_grad_enabled = on; }

namespace {
// Work run side by side on other threads takes the calling thread's grad mode (tensor/side_by_side.h): a worker's
// own is on, and a stream read under NoGradGuard would otherwise keep every chunk's graph through its carried state.
const bool g_grad_mode_inherited = (inherit_on_workers({&GradMode::enabled, &GradMode::set}), true);
}  // namespace

const char* op_name(Op op) {
#define PONDER_OP_NAME(id, name) name,
  static const char* names[] = {PONDER_OPS(PONDER_OP_NAME)};
#undef PONDER_OP_NAME
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(Op::Count), "one name per Op");
  return names[size_t(op)];
}

// ---- tensor autograd state

bool requires_grad(const Tensor& t) { return t.defined() && t.impl()->autograd && t.impl()->autograd->requires_grad; }

Tensor& set_requires_grad(Tensor& t, bool on) {
  if (!is_leaf(t)) throw std::invalid_argument("set_requires_grad: only leaf tensors can be marked (use detach())");
  if (on && !is_float(t.dtype()))
    throw std::invalid_argument(std::string("set_requires_grad: only floating tensors can require grad, got ") +
                                dtype_name(t.dtype()));
  meta(t).requires_grad = on;
  return t;
}

Tensor grad_of(const Tensor& t) { return t.impl()->autograd ? t.impl()->autograd->grad : Tensor(); }
void zero_grad(const Tensor& t) {
  if (t.impl()->autograd) t.impl()->autograd->grad = Tensor();
}
void set_grad(const Tensor& t, const Tensor& g) { meta(t).grad = g; }

std::shared_ptr<Node> grad_fn(const Tensor& t) { return t.impl()->autograd ? t.impl()->autograd->grad_fn : nullptr; }
bool is_leaf(const Tensor& t) { return grad_fn(t) == nullptr; }
void set_name(const Tensor& t, const std::string& name) { meta(t).name = name; }
Tensor detach(const Tensor& t) { return t.alias(); }

Edge gradient_edge(const Tensor& t) {
  if (auto fn = grad_fn(t)) return {fn, t.impl()->autograd->output_nr};
  if (!requires_grad(t)) return {};
  AutogradMeta& m = meta(t);
  if (!m.grad_acc) m.grad_acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
  if (m.grad_acc->outputs.empty()) m.grad_acc->outputs.push_back({t.shape(), t.dtype(), t.device()});
  return {m.grad_acc, 0};
}

// ---- saved tensors

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t.defined()) return;
  version_ = t.version();
  if (is_output) {
    data_ = t.alias();  // no grad_fn link: that would be a cycle node → saved → tensor → node
    output_nr_ = t.impl()->autograd ? t.impl()->autograd->output_nr : 0;
  } else {
    data_ = t;
  }
}

Tensor SavedTensor::unpack(const std::shared_ptr<Node>& self, const std::string& op) const {
  if (!data_.defined()) return data_;
  if (data_.version() != version_)
    throw std::runtime_error("a tensor saved for the backward of '" + op + "' was modified in place (version " +
                             std::to_string(version_) + ", now " + std::to_string(data_.version()) +
                             "); clone it before modifying it");
  if (!is_output_) return data_;
  Tensor t = data_.alias();
  auto m = std::make_shared<AutogradMeta>();
  m->requires_grad = true;
  m->grad_fn = self;
  m->output_nr = output_nr_;
  t.impl()->autograd = std::move(m);
  return t;
}

// ---- destruction without recursion

namespace {
thread_local std::vector<std::shared_ptr<Node>>* t_pending = nullptr;

// The outermost node destructor owns the queue and drains it; nested ones only enqueue.
class ReleaseScope {
 public:
  ReleaseScope() : owner_(t_pending == nullptr) {
    if (owner_) t_pending = &queue_;
  }
  ~ReleaseScope() {
    if (!owner_) return;
    while (!queue_.empty()) {
      std::shared_ptr<Node> n = std::move(queue_.back());
      queue_.pop_back();
      n.reset();  // its destructor enqueues what it alone kept alive
    }
    t_pending = nullptr;
  }
 private:
  bool owner_;
  std::vector<std::shared_ptr<Node>> queue_;
};

void defer(std::shared_ptr<Node>& n) {
  if (n && n.use_count() == 1) t_pending->push_back(std::move(n));
}
}  // namespace

void release_deferred(Tensor&& t) {
  ReleaseScope scope;  // declared first, so it drains after `held` is gone
  Tensor held = std::move(t);
  if (!held.defined() || held.impl_ptr().use_count() != 1) return;
  auto& m = held.impl()->autograd;
  if (m && m.use_count() == 1) defer(m->grad_fn);
}

Node::~Node() {
  ReleaseScope scope;
  for (Edge& e : next) defer(e.fn);
}

FunctionNode::~FunctionNode() {
  ReleaseScope scope;
  for (SavedTensor& s : saved_) release_deferred(s.take());
}

// ---- nodes

std::vector<Tensor> FunctionNode::apply(const std::vector<Tensor>& grads, const std::vector<bool>& needs) {
  if (released_)
    throw std::runtime_error(std::string("backward through the graph a second time (op '") + op_name(op_) +
                             "'): its saved tensors were freed after the first backward; pass retain_graph=true "
                             "to the first call if you need to backward twice");
  std::vector<Tensor> saved;
  saved.reserve(saved_.size());
  auto self = shared_from_this();
  for (const SavedTensor& s : saved_) saved.push_back(s.unpack(self, op_name(op_)));
  return multi_ ? multi_(grads, saved, needs) : fn_(grads[0], saved, needs);
}

void FunctionNode::release() {
  saved_.clear();
  released_ = true;
}

std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& grads, const std::vector<bool>&) {
  auto impl = leaf_.lock();
  if (!impl) return {};
  Tensor leaf(impl);
  AutogradMeta& m = meta(leaf);
  const Tensor& g = grads[0];
  if (g.device() != leaf.device())  // move_to_device_ moved the leaf after this graph was recorded
    throw std::runtime_error("backward: the gradient of a leaf " + shape_str(leaf.shape()) + " arrives on " +
                             device_name(g.device()) + " but the leaf is now on " + device_name(leaf.device()) +
                             "; run the forward pass again after moving it");
  if (!m.grad.defined()) m.grad = GradMode::enabled() ? g : raw::clone(g);
  else m.grad = GradMode::enabled() ? add(m.grad, g) : raw::binary(BinaryOp::Add, m.grad, g);
  return {};
}

// ---- recording

uint64_t next_node_seq() { return g_seq.fetch_add(1); }
uint64_t node_seq_now() { return g_seq.load(); }

std::string AccumulateGrad::label() const {
  auto impl = leaf_.lock();
  return impl && impl->autograd ? impl->autograd->name : std::string();
}

OpRecorder::OpRecorder(Op op, const Tensor* inputs, size_t n) : op_(op) {
  active_ = false;
  if (GradMode::enabled())
    for (size_t i = 0; i < n; ++i) active_ = active_ || requires_grad(inputs[i]);
  if (active_) inputs_.assign(inputs, inputs + n);
}

Tensor OpRecorder::done(Tensor out, std::initializer_list<Tensor> saved, BackwardFn fn, bool save_output) {
  if (!active_) return out;
  // A result may be a view sharing the input's impl data; give it its own impl before attaching.
  if (out.impl()->autograd) out = out.alias();
  auto m = std::make_shared<AutogradMeta>();
  m->requires_grad = true;
  out.impl()->autograd = m;
  std::vector<SavedTensor> st;
  st.reserve(saved.size() + 1);
  // A saved input that is the result itself (max with keepdim returns the tensor it saves) would hold
  // its own node alive through the result's metadata: keep a detached alias instead.
  for (const Tensor& s : saved) st.emplace_back(s.defined() && s.impl() == out.impl() ? s.alias() : s, false);
  if (save_output) st.emplace_back(out, true);
  auto node = std::make_shared<FunctionNode>(op_, std::move(st), std::move(fn));
  for (const Tensor& t : inputs_) node->next.push_back(gradient_edge(t));
  node->outputs.push_back({out.shape(), out.dtype(), out.device()});
  node->seq = next_node_seq();
  node->forward_flops = scope_.counts().total();
  m->grad_fn = std::move(node);
  return out;
}

std::vector<Tensor> OpRecorder::done(std::vector<Tensor> outs, std::vector<Tensor> saved, MultiBackwardFn fn) {
  if (!active_) return outs;
  std::vector<SavedTensor> st;
  st.reserve(saved.size());
  for (const Tensor& s : saved) {
    bool is_out = false;  // as above: a saved result would keep its own node alive
    for (const Tensor& o : outs) is_out = is_out || (s.defined() && s.impl() == o.impl());
    st.emplace_back(is_out ? s.alias() : s, false);
  }
  auto node = std::make_shared<FunctionNode>(op_, std::move(st), std::move(fn));
  for (const Tensor& t : inputs_) node->next.push_back(gradient_edge(t));
  node->seq = next_node_seq();
  node->forward_flops = scope_.counts().total();
  attach_outputs(node, outs);
  return outs;
}

void attach_outputs(const std::shared_ptr<Node>& node, std::vector<Tensor>& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    Tensor& out = outs[i];
    if (out.impl()->autograd) out = out.alias();
    node->outputs.push_back({out.shape(), out.dtype(), out.device()});
    auto m = std::make_shared<AutogradMeta>();
    m->requires_grad = true;
    m->grad_fn = node;
    m->output_nr = uint32_t(i);
    out.impl()->autograd = std::move(m);
  }
}

}  // namespace ponder
