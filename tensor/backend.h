// The kernels a device must provide, and the fused ones it may. Callers never use a backend directly:
// tensor/kernels.h allocates outputs, checks shapes, counts FLOPs (fused ops: autograd/fused.h) and dispatches
// here by the tensors' device, so a new backend (tensor/cuda/) plugs in by implementing this interface,
// saying which fused kernels it has (supports) and registering itself.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

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

// The fused kernels a backend may have, in one list: X(id, name). Each is a hot composition of the kernels
// above run as one pass; its composition is its definition (autograd/compose.cpp), a backend's kernel is an
// optimisation of it that supports() declares. How to add one: docs/adding_an_op.md.
#define PONDER_FUSED_OPS(X)                                                                                    \
  X(LayerNormRows, "layer_norm_rows") X(LayerNormBackward, "layer_norm_backward")                             \
  X(LayerNormVjp, "layer_norm_vjp") X(RmsNormRows, "rms_norm_rows") X(RmsNormBackward, "rms_norm_backward")   \
  X(LayerNormAffine, "layer_norm_affine") X(LayerNormAffineBackward, "layer_norm_affine_backward")            \
  X(RmsNormAffine, "rms_norm_affine") X(RmsNormAffineBackward, "rms_norm_affine_backward")                    \
  X(LnL2Grad, "ln_l2_grad") X(LnL2GradVjp, "ln_l2_grad_vjp") X(ActMul, "act_mul")                              \
  X(ActMulBackward, "act_mul_backward") X(SumSquares, "sum_squares") X(AdamwStep, "adamw_step")              \
  X(Attention, "attention") X(AttentionBackward, "attention_backward")                                        \
  X(TttLinearDual, "ttt_linear_dual") X(TttLinearDualBackward, "ttt_linear_dual_backward") X(Rope, "rope")     \
  X(TttPrefixSteps, "ttt_prefix_steps") X(TttPrefixStepsBackward, "ttt_prefix_steps_backward")                \
  X(TttMlpDual, "ttt_mlp_dual") X(TttMlpDualBackward, "ttt_mlp_dual_backward")

#define PONDER_ENUM_ID(id, ...) id,
enum class FusedOp : uint8_t { PONDER_FUSED_OPS(PONDER_ENUM_ID) Count };
#undef PONDER_ENUM_ID

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

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void* alloc(size_t nbytes) = 0;
  virtual void free(void* p, size_t nbytes) = 0;
  // Host <-> this device, contiguous bytes.
  virtual void to_host(void* host, const void* dev, size_t nbytes) = 0;
  virtual void from_host(void* dev, const void* host, size_t nbytes) = 0;

  // dst[i] = src[i] with src broadcast to dst's shape and converted to dst's dtype.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void fill(const Tensor& dst, double value) = 0;
  virtual void unary(UnaryOp op, double p0, double p1, const Tensor& out, const Tensor& x) = 0;
  // a and b are broadcast to out's shape.
  virtual void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  virtual void where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) = 0;
  // Reduces x into out, which has x's rank with size 1 on every reduced axis.
  virtual void reduce(ReduceOp op, const Tensor& out, const Tensor& x) = 0;
  virtual void cumsum(const Tensor& out, const Tensor& x, int axis, bool reverse) = 0;
  // Keeps x[..., i, j] where j - i <= k (lower) or j - i >= k (upper), zero elsewhere.
  virtual void tri(const Tensor& out, const Tensor& x, int64_t k, bool upper) = 0;
  // out (..., m, n) = a (..., m, k) · b (..., k, n); batch dims already broadcast to out's.
  virtual void matmul(const Tensor& out, const Tensor& a, const Tensor& b) = 0;
  // Index kernels take contiguous tensors and int64 indices.
  virtual void index_select(const Tensor& out, const Tensor& x, int axis, const Tensor& idx) = 0;
  virtual void index_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src) = 0;
  virtual void gather(const Tensor& out, const Tensor& x, int axis, const Tensor& idx) = 0;
  virtual void scatter_add(const Tensor& out, int axis, const Tensor& idx, const Tensor& src) = 0;
  virtual void one_hot(const Tensor& out, const Tensor& idx) = 0;
  // Counter-based draws into a contiguous tensor (see tensor/rng.h).
  virtual void rng_uniform(const Tensor& out, uint64_t seed, uint64_t counter, double lo, double hi) = 0;
  virtual void rng_normal(const Tensor& out, uint64_t seed, uint64_t counter, double mean, double std) = 0;

  // Which fused kernels (PONDER_FUSED_OPS) this backend has. Autograd runs a fused op as its kernel only where
  // this says so, and as the op's differentiable composition (autograd/compose.cpp, the op's one definition)
  // everywhere else; the FLOPs counted are the composition's either way (autograd/fused.h).
  virtual bool supports(FusedOp) const { return false; }
  // Whether the row kernels read RowOffsets::goff (else only its sizes and strides, and goff stays empty).
  virtual bool row_offset_table() const { return true; }

  // The fused kernels, run only where supports() says so (the defaults throw). Inputs are contiguous and of
  // one shape unless said; each map is stated once, in autograd/compose.cpp. Rows are the last axis (D).
  //   layer_norm_rows(out, x):          x̂ = (x − mean x)·s, s = 1/sqrt(var x + eps) (biased variance)
  //   layer_norm_backward(out, x, v):   s·(v − mean v − x̂·mean(v⊙x̂))   (the VJP of x ↦ x̂ for upstream v)
  //   layer_norm_vjp(dx, dv, x, v, dz): the VJP of (x, v) ↦ layer_norm_backward(x, v) for upstream dz
  //   rms_norm_rows(out, x):            y = x·r, r = 1/sqrt(mean(x²) + eps)
  //   rms_norm_backward(out, x, g):     r·(g − y·mean(g⊙y))              (the VJP of x ↦ y for upstream g)
  // With per-element γ, β (contiguous, shape P; row r of x uses γ[goff[r] .. goff[r] + D), RowOffsets):
  //   layer_norm_affine:          out = γ⊙x̂ + β
  //   layer_norm_affine_backward: dx = layer_norm_backward(x, g⊙γ), dγ = Σ_rows g⊙x̂, dβ = Σ_rows g
  //   rms_norm_affine:            out = w⊙y;  rms_norm_affine_backward: dx = rms_norm_backward(x, g⊙w), dw = Σ_rows g⊙y
  //   ln_l2_grad:                 out = layer_norm_backward(z, (γ⊙x̂ + β − t)⊙γ)   (docs/ttt.md §1.6)
  //   ln_l2_grad_vjp:             dz, dt, dγ, dβ of ln_l2_grad for upstream w      (docs/ttt.md §2.2)
  // dγ and dβ (shape P) sum over rows in fixed blocks of rows, so they do not depend on the thread count.
  virtual void layer_norm_rows(const Tensor&, const Tensor&, double) { unsupported(FusedOp::LayerNormRows); }
  virtual void layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, double) {
    unsupported(FusedOp::LayerNormBackward);
  }
  virtual void layer_norm_vjp(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double) {
    unsupported(FusedOp::LayerNormVjp);
  }
  virtual void rms_norm_rows(const Tensor&, const Tensor&, double) { unsupported(FusedOp::RmsNormRows); }
  virtual void rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, double) {
    unsupported(FusedOp::RmsNormBackward);
  }
  virtual void layer_norm_affine(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const RowOffsets&, double) {
    unsupported(FusedOp::LayerNormAffine);
  }
  virtual void layer_norm_affine_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                          const Tensor&, const RowOffsets&, double) {
    unsupported(FusedOp::LayerNormAffineBackward);
  }
  virtual void rms_norm_affine(const Tensor&, const Tensor&, const Tensor&, const RowOffsets&, double) {
    unsupported(FusedOp::RmsNormAffine);
  }
  virtual void rms_norm_affine_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                        const RowOffsets&, double) {
    unsupported(FusedOp::RmsNormAffineBackward);
  }
  virtual void ln_l2_grad(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const RowOffsets&,
                          double) {
    unsupported(FusedOp::LnL2Grad);
  }
  virtual void ln_l2_grad_vjp(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const Tensor&, const RowOffsets&, double) {
    unsupported(FusedOp::LnL2GradVjp);
  }
  // Gated products on contiguous tensors of one shape: out = act(a)⊙b, and for upstream g
  // da = (g⊙b)⊙act'(a), db = g⊙act(a).
  virtual void act_mul(GateAct, const Tensor&, const Tensor&, const Tensor&) { unsupported(FusedOp::ActMul); }
  virtual void act_mul_backward(GateAct, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
    unsupported(FusedOp::ActMulBackward);
  }
  // Rotary position embedding on contiguous x (…, N, f) with cos, sin (N, f/2): pair i of row t,
  // (x₂ᵢ, x₂ᵢ₊₁) → (x₂ᵢ·c − x₂ᵢ₊₁·s, x₂ᵢ·s + x₂ᵢ₊₁·c) with c, s = cos[t, i], sin[t, i].
  virtual void rope(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { unsupported(FusedOp::Rope); }
  // Σ x² of a contiguous floating tensor in float64, as the sum of all elements of x converted to float64
  // and squared would give it (gradient clipping).
  virtual double sum_squares(const Tensor&) { unsupported(FusedOp::SumSquares); }
  // One AdamW update in place on contiguous tensors of one shape (AdamWCoeffs above states the rule).
  virtual void adamw_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AdamWCoeffs&) {
    unsupported(FusedOp::AdamwStep);
  }
  // Causal softmax attention per head, q (G, n, f) against k, v (G, T, f), contiguous, keys seen as AttnGeometry
  // says: y = softmax(scale·q·kᵀ over the keys seen)·v (G, n, f), lse (G, n) the log of each row's softmax
  // normaliser (with its max); attention_backward: dq, dk, dv of y for upstream dy, from the saved y and lse.
  virtual void attention(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                         const AttnGeometry&) {
    unsupported(FusedOp::Attention);
  }
  virtual void attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AttnGeometry&) {
    unsupported(FusedOp::AttentionBackward);
  }
  // TTT-Linear's dual form on one mini-batch, each head on its own (DualOperands): y (G, b + f + 1, f) packs the
  // outputs (rows 0 … b−1), the next W (rows b … b+f−1) and the next bias (row b+f). The backward, for the
  // upstream of those three pieces as head views dy = {dout (·, ·, b, f), dW' (·, ·, f, f), dbias' (·, ·, 1, f)}
  // (dout's rows may be further apart than f), writes {dW, dbias, dxq, dxk, dxv, deta, dγ, dβ} (dγ, dβ shaped like
  // γ, summed over heads in a fixed order).
  virtual void ttt_linear_dual(const Tensor&, const DualOperands&) { unsupported(FusedOp::TttLinearDual); }
  virtual void ttt_linear_dual_backward(const std::array<Tensor, 8>&, const DualOperands&,
                                        const std::array<Tensor, 3>&) {
    unsupported(FusedOp::TttLinearDualBackward);
  }
  // TTT-Linear's dual form over every unit of a sequence (ScanOperands), where dual_scan() says the backend has it
  // (else the caller runs the one-unit kernels above unit by unit): Y (n, G, b + f + 1, f) holds each unit's packed
  // output as ttt_linear_dual writes it, S (n, G, kDualSaved(b, f)) each unit's intermediates. The backward, for the
  // upstream {dout, dW_n, dbias_n} (dout unit 0's head view of the sequence's gradient, unit u's moved by u·step_dout
  // elements), walks the units in reverse, each unit's dW, dbias the upstream of the unit before, and writes {dW,
  // dbias of the start (G, f, f), (G, 1, f); dxq, dxk, dxv (n, G, b, f); deta (n, G, b, b); dγ, dβ}. Every result
  // has the bits of the one-unit kernels run unit by unit, dγ and dβ included: each unit's summed over heads as the
  // one-unit backward sums them, rounded to T, and added up from the last unit to the first.
  virtual bool dual_scan() const { return false; }
  virtual void ttt_linear_scan(const Tensor&, const Tensor&, const ScanOperands&) {
    unsupported(FusedOp::TttLinearDual);
  }
  virtual void ttt_linear_scan_backward(const std::array<Tensor, 8>&, const ScanOperands&, const Tensor&,
                                        const Tensor&, const std::array<Tensor, 3>&, int64_t) {
    unsupported(FusedOp::TttLinearDualBackward);
  }
  // Prefix mode's K closed-form steps, each head on its own (PrefixOperands): a (G, P, f) the accumulated weighted
  // gradients, saved (G, kPrefixSaved(b, f, K)) what the backward reads. The backward, for upstream da (G, P, f),
  // writes {dz0, dt, dneg_m, dw, dγ, dβ} (dγ, dβ shaped like γ, summed over heads in a fixed order).
  virtual void ttt_prefix_steps(const Tensor&, const Tensor&, const PrefixOperands&) {
    unsupported(FusedOp::TttPrefixSteps);
  }
  virtual void ttt_prefix_steps_backward(const std::array<Tensor, 6>&, const PrefixOperands&, const Tensor&,
                                         const Tensor&) {
    unsupported(FusedOp::TttPrefixStepsBackward);
  }
  // TTT-MLP's dual form, each head on its own (MlpDualOperands): y {out (G, b, f), W1', b1', W2', b2'} shaped like
  // their inputs, saved (G, kMlpDualSaved(b, f, h)) what the backward reads. The backward, for upstream dy (the five
  // outputs' gradients, contiguous), writes {dW1, db1, dW2, db2, dxq, dxk, dxv, deta, dγ, dβ}.
  virtual void ttt_mlp_dual(const std::array<Tensor, 5>&, const Tensor&, const MlpDualOperands&) {
    unsupported(FusedOp::TttMlpDual);
  }
  virtual void ttt_mlp_dual_backward(const std::array<Tensor, 10>&, const MlpDualOperands&, const Tensor&,
                                     const std::array<Tensor, 5>&) {
    unsupported(FusedOp::TttMlpDualBackward);
  }
  // TTT-MLP's dual form over every unit (MlpScanOperands), where mlp_scan() says the backend has it (else the
  // caller runs the one-unit kernels above unit by unit): Y = {out (n, G, b, f), W1 … b2 (n, G, …)} each unit's
  // results, S (n, G, kMlpDualSaved(b, f, h)) its intermediates. The backward, for dy = {dout (n, G, b, f), the
  // last unit's weights' upstream (G, …)}, writes g = {dW1 … db2 (G, …) of the start, dxq, dxk, dxv (n, G, b, f),
  // deta (n, G, b, b), dγ, dβ}: exactly what the one-unit backward unit by unit writes, dγ and dβ each unit's added
  // from the last unit to the first.
  virtual bool mlp_scan() const { return false; }
  virtual void ttt_mlp_scan(const std::array<Tensor, 5>&, const Tensor&, const MlpScanOperands&) {
    unsupported(FusedOp::TttMlpDual);
  }
  virtual void ttt_mlp_scan_backward(const std::array<Tensor, 10>&, const MlpScanOperands&, const std::array<Tensor, 5>&,
                                     const Tensor&, const std::array<Tensor, 5>&) {
    unsupported(FusedOp::TttMlpDualBackward);
  }

 protected:
  // Throws std::logic_error naming the fused op: a caller ran a kernel that supports() denies.
  [[noreturn]] void unsupported(FusedOp op) const;
};

Backend& backend(Device d);
bool backend_available(Device d);
void register_backend(Device d, Backend* b);

}  // namespace ponder
