// The kernels a device must provide, and the fused ones it may. Callers never use a backend directly:
// tensor/kernels.h allocates outputs, checks shapes, counts FLOPs (fused ops: autograd/fused.h) and dispatches
// here by the tensors' device. Every kernel is declared once, in tensor/kernels.def; a new backend (tensor/cuda/)
// plugs in by defining those functions in a namespace of its own, filling a Kernels table from them (null: a fused
// kernel it does not have), saying how to time a call, and registering itself.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "tensor/profile.h"
#include "tensor/tensor.h"

namespace ponder {

// Element-wise maps y = f(x; p0, p1), in one list: X(id, name, lo, p0, p1). `name` is what errors and kernel
// profiles print; every device test draws x from [lo, 3) and passes p0, p1, so a new map is one line here and a
// case in each backend's kernel (tensor/cpu/elementwise.cpp is the reference). Pow is x^p0, Affine p0·x + p1,
// Clamp min(max(x, p0), p1), Step 1 where x > 0, InRange 1 where p0 < x < p1, *Grad the derivative of the map.
#define PONDER_UNARY_OPS(X)                                                                                    \
  X(Neg, "neg", -3, 0, 0) X(Exp, "exp", -3, 0, 0) X(Log, "log", 0.1, 0, 0) X(Sqrt, "sqrt", 0.1, 0, 0)          \
  X(Rsqrt, "rsqrt", 0.1, 0, 0) X(Tanh, "tanh", -3, 0, 0) X(Sigmoid, "sigmoid", -3, 0, 0)                       \
  X(Relu, "relu", -3, 0, 0) X(GeluTanh, "gelu_tanh", -3, 0, 0) X(Silu, "silu", -3, 0, 0)                       \
  X(Abs, "abs", -3, 0, 0) X(Sign, "sign", -3, 0, 0) X(Pow, "pow", 0.1, -1.5, 0) X(Affine, "affine", -3, 2.5, -1) \
  X(Clamp, "clamp", -3, -0.5, 0.7) X(Step, "step", -3, 0, 0) X(InRange, "in_range", -3, -0.5, 0.7)             \
  X(GeluTanhGrad, "gelu_tanh_grad", -3, 0, 0) X(SiluGrad, "silu_grad", -3, 0, 0)
// Binary maps with NumPy broadcasting; comparisons return 1/0 in the inputs' dtype. X(id, name).
#define PONDER_BINARY_OPS(X)                                                                                   \
  X(Add, "add") X(Sub, "sub") X(Mul, "mul") X(Div, "div") X(Maximum, "maximum") X(Minimum, "minimum")         \
  X(Eq, "eq") X(Gt, "gt") X(Ge, "ge") X(Lt, "lt") X(Le, "le")

#define PONDER_ENUM_ID(id, ...) id,
enum class UnaryOp : uint8_t { PONDER_UNARY_OPS(PONDER_ENUM_ID) Count };
enum class BinaryOp : uint8_t { PONDER_BINARY_OPS(PONDER_ENUM_ID) Count };
#undef PONDER_ENUM_ID
enum class ReduceOp : uint8_t { Sum, Max, Min, Count };
// The activation of a gated product act(a)⊙b (SwiGLU's silu, the TTT output gate's gelu_tanh).
enum class GateAct : uint8_t { Silu, GeluTanh };

// Scalars of one AdamW step: m ← b1·m + (1−b1)·g; v ← b2·v + (1−b2)·g²;
// p ← (1 − lr·wd)·p − (lr/bc1)·m / (sqrt(v/bc2) + eps), each factor rounded to the tensor's dtype.
struct AdamWCoeffs {
  double lr, beta1, beta2, eps, weight_decay, bc1, bc2;
};

// The fused ops: one FusedOp per PONDER_FUSED_KERNEL of tensor/kernels.def, named (fused_op_name) as its kernel.
// Each is a hot composition of the kernels above run as one pass; its composition is its definition
// (autograd/compose.cpp), a backend's kernel is an optimisation of it that supports() declares. How to add one:
// docs/adding_an_op.md.
enum class FusedOp : uint8_t {
#define PONDER_KERNEL(...)
#define PONDER_FUSED_KERNEL(op, ...) op,
#define PONDER_SCAN_KERNEL(...)
#include "tensor/kernels.def"
  Count
};

// Where each row of a row kernel's x (its last axis, D) finds its γ and β: row r reads γ[goff[r] … + D). sizes and
// strides are x's leading axes and γ's strides along them when broadcast to x, so that goff[r] is r's index over
// sizes (row-major) dotted with strides: a device backend computes the offsets from them, and goff is left empty
// for a backend whose row_offset_table() is false (one entry per row is host work on every call).
struct RowOffsets {
  std::vector<int64_t> goff, sizes, strides;
};

// Which keys each query of a causal attention sees. Query i stands at position t0 + i and key j at first + j;
// key j is seen when 0 ≤ (t0 + i) − (first + j) < window (window 0: no bound). Scores are scale·q·k.
struct AttnGeometry {
  double scale;
  int64_t t0, first, window;
};

// The operands of TTT-Linear's dual form on one mini-batch, per head g of G (the map: autograd/compose.h):
// W (G, f, f), bias (G, 1, f), xq, xk, xv (G, b, f), eta (G, b, b) as head views, with no copy where the operand
// allows: each a (n0, n1, r, c) view with G = n0·n1 heads (head g = g0·n1 + g1), unit stride along c, rows c apart
// but for xq, xk, xv, whose rows may be further apart (raw::dual_head_view). So a mini-batch's slice of the
// (B, H, N, f) projections, the previous unit's W' and bias' inside its packed output and η's slice reach the
// kernel as they lie. γ and β of the inner layer norm as the row kernels take them (rows: RowOffsets over the G·b
// rows of xq).
struct DualOperands {
  Tensor W, bias, xq, xk, xv, eta, gamma, beta;
  RowOffsets rows;
  double eps;
  // Optional (G, kDualSaved(b, f)): the forward's intermediates per head, Z, G and zb (b × f each) and S = xq·xkᵀ
  // (b × b), written by the forward kernel and read by the backward's instead of recomputing them.
  Tensor saved;
};
constexpr int64_t kDualSaved(int64_t b, int64_t f) { return 3 * b * f + b * b; }

// The operands of TTT-Linear's dual form over n mini-batches (units) of every head, the state carried from each
// unit to the next: what n calls of the one-unit kernel would take, in one call. `first` is unit 0's operands (W and
// bias the learned start). Unit u's xq, xk, xv and η are unit 0's head views moved by u·step_q … u·step_eta elements
// (the units are slices of one (…, n·b, f) sequence and one (…, n, b, b) η); its W and bias are rows b … b + f of
// unit u − 1's part of the packed output. Saved intermediates are written for every unit.
struct ScanOperands {
  DualOperands first;
  int64_t units = 0;
  int64_t step_q = 0, step_k = 0, step_v = 0, step_eta = 0;
};

// The operands of prefix mode's K closed-form inner steps on one unit (the map: compose::ttt_prefix_steps), per
// head g of G, contiguous: z0 and t (G, b, f) (Z0 = XK·W + bias and the targets), neg_m (G, b, b) = −(XK·XKᵀ + 1),
// w (G, P) η at the P = b(b + 1)/2 causal pairs (j ≤ i, j-major); γ and β of the inner layer norm as the row
// kernels take them (rows: RowOffsets over the G·b rows of z0; a pair reads the row of its j).
struct PrefixOperands {
  Tensor z0, t, neg_m, w, gamma, beta;
  RowOffsets rows;
  int steps;
  double eps;
};
constexpr int64_t kPrefixPairs(int64_t b) { return b * (b + 1) / 2; }
// Per head: the first step's gradients (b × f), then for each later step the A it started from, its Z and its
// gradients before the η weights (P × f each).
constexpr int64_t kPrefixSaved(int64_t b, int64_t f, int steps) {
  return b * f + 3 * int64_t(steps - 1) * kPrefixPairs(b) * f;
}

// The operands of TTT-MLP's dual form on one mini-batch (the map: compose::ttt_mlp_dual), per head g of G,
// contiguous: W1 (G, f, h), b1 (G, 1, h), W2 (G, h, f), b2 (G, 1, f), xq, xk, xv (G, b, f), eta (G, b, b); γ and β
// of the inner layer norm as the row kernels take them (rows: RowOffsets over the G·b rows of xq).
struct MlpDualOperands {
  Tensor W1, b1, W2, b2, xq, xk, xv, eta, gamma, beta;
  RowOffsets rows;
  double eps;
};
// Per head: Z1, gelu(Z1), gelu'(Z1), G2·W2ᵀ, G1, Zb1, gelu(Zb1), gelu'(Zb1) (b × h each); Z2, G2, Zb2 (b × f); S1,
// S2 (b × b).
constexpr int64_t kMlpDualSaved(int64_t b, int64_t f, int64_t h) { return 8 * b * h + 3 * b * f + 2 * b * b; }
// TTT-MLP's dual form over the n units of a sequence (the map: n compose::ttt_mlp_dual, the weights carried):
// unit 0's operands, whose q, k, v and η are the first parts of units-first (n, G, b, f) and (n, G, b, b)
// contiguous buffers, so unit u's are u parts on; its weights are what unit u − 1 wrote.
struct MlpScanOperands {
  MlpDualOperands first;
  int64_t units = 0;
};

const char* unary_name(UnaryOp op);
const char* fused_op_name(FusedOp op);
const char* binary_name(BinaryOp op);
// Profile labels (tensor/profile.h) every backend gives its GEMMs and reductions.
const char* matmul_label(const Tensor& out);  // "matmul", or "matmul (batched)"
const char* reduce_label(ReduceOp op, const Tensor& out, const Tensor& x);  // "max", "min", "sum (last axis)", …

// A backend's kernels: one function pointer per entry of tensor/kernels.def, null where the backend has no such
// fused or scan kernel (every backend has each PONDER_KERNEL). A backend fills it in its own file from its
// namespace's functions (tensor/cpu/backend.cpp, tensor/cuda/backend.cu).
struct Kernels {
#define PONDER_KERNEL(ret, name, kind, label, params, args) ret(*name) params = nullptr;
#include "tensor/kernels.def"
};

// How a backend times one kernel call for `--profile`, when profiling is on: start() just before the call returns
// a token that stop() gets just after it (also when the kernel throws), with the call's kind and label
// (tensor/kernels.def). The CPU reads the wall clock; CUDA records events on its stream and adds their times later
// (tensor/cuda/timing.h), since a launch returns before its kernel runs.
struct KernelClock {
  uint64_t (*start)();
  void (*stop)(uint64_t token, prof::Kind kind, const char* label);
};

// A device: its memory (per backend, virtual) and its kernels (a Kernels table and a KernelClock, given at
// construction). Each kernel method is expanded from tensor/kernels.def and defined in tensor/kernels.cpp: it times
// the call under the kernel's kind and label when profiling is on and runs the backend's function; a fused or scan
// kernel the backend lacks throws std::logic_error naming the op.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual void* alloc(size_t nbytes) = 0;
  virtual void free(void* p, size_t nbytes) = 0;
  // Host <-> this device, contiguous bytes.
  virtual void to_host(void* host, const void* dev, size_t nbytes) = 0;
  virtual void from_host(void* dev, const void* host, size_t nbytes) = 0;

#define PONDER_KERNEL(ret, name, kind, label, params, args) ret name params;
#include "tensor/kernels.def"

  // Which fused kernels (FusedOp) this backend has: those its Kernels table holds. Autograd runs a fused op
  // as its kernel only where this says so, and as the op's differentiable composition (autograd/compose.cpp, the
  // op's one definition) everywhere else; the FLOPs counted are the composition's either way (autograd/fused.h).
  bool supports(FusedOp op) const;
  // Whether the row kernels read RowOffsets::goff (else only its sizes and strides, and goff stays empty).
  bool row_offset_table() const { return row_offset_table_; }
  // Whether the backend has TTT-Linear's (TTT-MLP's) scan over every unit, forward and backward (tensor/kernels.def).
  bool dual_scan() const { return k_.ttt_linear_scan && k_.ttt_linear_scan_backward; }
  bool mlp_scan() const { return k_.ttt_mlp_scan && k_.ttt_mlp_scan_backward; }

 protected:
  constexpr Backend(const Kernels& k, KernelClock clock, bool row_offset_table)
      : k_(k), clock_(clock), row_offset_table_(row_offset_table) {}

 private:
  // Throws std::logic_error naming the fused op: a caller ran a kernel that supports() denies.
  [[noreturn]] void unsupported(FusedOp op) const;
  Kernels k_;
  KernelClock clock_;
  bool row_offset_table_;
};

Backend& backend(Device d);
bool backend_available(Device d);
void register_backend(Device d, Backend* b);

}  // namespace ponder
