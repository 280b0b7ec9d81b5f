// Differentiable ops. Every backward rule is written with these same ops, so gradients recorded
// under create_graph are themselves differentiable to any order.
#pragma once
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/kernels.h"
#include "tensor/tensor.h"

namespace ponder {

using Axes = std::vector<int64_t>;

// ---- element-wise, one input
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor pow(const Tensor& x, double p);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
Tensor silu(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor affine(const Tensor& x, double scale, double shift);  // scale·x + shift
// Derivatives as ops of their own (one kernel; the backward rules of gelu_tanh and silu use them).
Tensor gelu_tanh_grad(const Tensor& x);  // d/dx gelu_tanh(x)
Tensor silu_grad(const Tensor& x);       // d/dx silu(x) = σ(x)·(1 + x·(1 − σ(x)))

// Gated products as one op (one kernel forward, one backward): silu(a)⊙b (SwiGLU) and gelu_tanh(a)⊙b
// (the TTT output gate). Operands of different shapes fall back to the two ops.
Tensor silu_mul(const Tensor& a, const Tensor& b);
Tensor gelu_tanh_mul(const Tensor& a, const Tensor& b);
// Rotary position embedding as one op: x (…, N, f), constant cos and sin tables cs, sn (N, f/2); pair i of row t,
// (x₂ᵢ, x₂ᵢ₊₁) → (x₂ᵢ·c − x₂ᵢ₊₁·s, x₂ᵢ·s + x₂ᵢ₊₁·c) with c, s = cs[t, i], sn[t, i].
Tensor rope_rotate(const Tensor& x, const Tensor& cs, const Tensor& sn);

// ---- element-wise, two inputs (NumPy broadcasting)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
// cond is a 0/1 tensor of the operands' dtype; it receives no gradient.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// Comparisons and masks: 0/1 results that carry no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor sign(const Tensor& x);

// ---- reductions
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdim = false);  // ties share the gradient
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Axes& axes = {}, int64_t correction = 0, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Axes& axes, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);
Tensor cumsum(const Tensor& x, int64_t axis, bool reverse = false);
Tensor sum_to(const Tensor& x, const Shape& shape);  // inverse of broadcasting

// ---- normalisation over the last axis, fused (one kernel forward and one backward; tensor/kernels.def)
// x̂ = (x − mean x)/sqrt(var x + eps), biased variance; layer_norm in autograd/nn.h adds γ and β.
Tensor layer_norm_rows(const Tensor& x, double eps);
// s·(v − mean v − x̂·mean(v⊙x̂)), s = 1/sqrt(var x + eps): the gradient of layer_norm_rows at x for the
// upstream gradient v (v broadcasts to x). Differentiable in x and v, so the inner loop's closed-form
// gradient through a LayerNorm (docs/ttt.md §1.6, §2.2) is one op.
Tensor layer_norm_backward(const Tensor& x, const Tensor& v, double eps);
// γ⊙layer_norm_rows(x) + β as one op, γ and β of one shape broadcasting to x along its leading axes
// (a (D) vector, or per head (1, H, 1, D) for (B, H, rows, D)). layer_norm in autograd/nn.h uses it.
Tensor layer_norm_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);
// ∂/∂z of ½‖γ⊙x̂ + β − target‖² row by row, x̂ = layer_norm_rows(z) (docs/ttt.md §1.6: the TTT inner
// gradient through LN + L2) as one op whose gradient (docs/ttt.md §2.2) is one fused kernel. target broadcasts to z.
Tensor ln_l2_grad(const Tensor& z, const Tensor& target, const Tensor& gamma, const Tensor& beta, double eps);
// x / sqrt(mean(x²) + eps); rms_norm in autograd/nn.h adds the weight.
Tensor rms_norm_rows(const Tensor& x, double eps);
// w⊙rms_norm_rows(x) as one op (w broadcast like layer_norm_affine's γ); rms_norm in autograd/nn.h uses it.
Tensor rms_norm_affine(const Tensor& x, const Tensor& weight, double eps);
// r·(g − y·mean(g⊙y)), y = rms_norm_rows(x), r = 1/sqrt(mean(x²) + eps): its gradient for upstream g.
Tensor rms_norm_backward(const Tensor& x, const Tensor& g, double eps);

// ---- attention
// Causal softmax attention per head: softmax(scale·q·kᵀ over the keys each query sees)·v, q (…, n, f), k and
// v (…, T, f); AttnGeometry (tensor/backend.h) places queries and keys and sets the window. One fused kernel
// forward and backward where the backend has it (it skips hidden keys and stores no (n × T) tensor).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttnGeometry& geo);

// ---- TTT-Linear's dual form on one mini-batch (the map: autograd/compose.h), {out, W', bias'}. W (…, f, f) and
// bias (…, 1, f) broadcast to xq's leading axes; γ, β to (…, b, f) along its leading axes. One node around the
// backend's kernel where it has one, else the composition. mark(p) is called after phase p's FLOPs are counted
// (0 inner forward, 1 inner gradient, 2 output, 3 update), on either path.
std::array<Tensor, 3> ttt_linear_dual(const Tensor& W, const Tensor& bias, const Tensor& xq, const Tensor& xk,
                                      const Tensor& xv, const Tensor& eta, const Tensor& gamma, const Tensor& beta,
                                      double eps, const std::function<void(int)>& mark = {});

// ---- prefix mode's K closed-form inner steps on one unit of TTT-Linear (the map: compose::ttt_prefix_steps): A
// (…, P, f) from z0, t (…, b, f), neg_m (…, b, b) and w (…, P, 1), P = b(b + 1)/2. One node around the backend's
// kernel where it has one, else the composition; mark(p) is called after phase p's FLOPs are counted (0 inner
// forward, 1 inner gradients, 2 updates of A), on either path.
Tensor ttt_prefix_steps(const Tensor& z0, const Tensor& t, const Tensor& neg_m, const Tensor& w, const Tensor& gamma,
                        const Tensor& beta, int steps, double eps, const std::function<void(int)>& mark = {});

// ---- TTT-Linear's dual form over the n = N / b mini-batches of a sequence, the state carried from each to the next:
// W0 (…, f, f) and b0 (…, 1, f) broadcast to xq's leading shape, xq, xk, xv (…, N, f), eta (…, n, b, b) (each
// mini-batch's η), γ and β as for ttt_linear_dual. Returns {out (…, N, f), W_n, bias_n}. Defined as n
// ttt_linear_dual ops and a concatenation; where the dual kernels run it is one node over the whole sequence
// (autograd/ops_ttt_scan.cpp). mark(u, p): after unit u's phase p as ttt_linear_dual's mark, and mark(u, -1) before
// unit u starts, on either path.
std::array<Tensor, 3> ttt_linear_scan(const Tensor& W0, const Tensor& b0, const Tensor& xq, const Tensor& xk,
                                      const Tensor& xv, const Tensor& eta, const Tensor& gamma, const Tensor& beta,
                                      double eps, const std::function<void(int64_t, int)>& mark = {});

// ---- TTT-MLP's dual form on one mini-batch (the map: compose::ttt_mlp_dual): x = {W1, b1, W2, b2, xq, xk, xv, eta,
// γ, β} → {out, W1', b1', W2', b2'}. One node around the backend's kernel where it has one, else the composition;
// mark(p) as for ttt_linear_dual, on either path.
std::array<Tensor, 5> ttt_mlp_dual(const std::array<Tensor, 10>& x, double eps,
                                   const std::function<void(int)>& mark = {});

// ---- TTT-MLP's dual form over the n units of a sequence (xq, xk, xv (…, n·b, f), eta (…, n, b, b)), the weights
// carried from each unit to the next: → {out (…, n·b, f), W1_n, b1_n, W2_n, b2_n}. By definition n ttt_mlp_dual
// ops and a concatenation; where the dual kernels run it is one node over the whole sequence
// (autograd/ops_ttt_mlp_scan.cpp). mark(u, p) as for ttt_linear_scan.
std::array<Tensor, 5> ttt_mlp_scan(const std::array<Tensor, 10>& x, double eps,
                                   const std::function<void(int64_t, int)>& mark = {});

// ---- masks
Tensor tril(const Tensor& x, int64_t k = 0);
Tensor triu(const Tensor& x, int64_t k = 0);

// ---- linear algebra: (…, m, k)·(…, k, n), batch axes broadcast
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- shape (views share storage)
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start = 0, int64_t end = -1);
Tensor permute(const Tensor& x, const std::vector<int>& perm);
Tensor transpose(const Tensor& x, int a, int b);
Tensor slice(const Tensor& x, int axis, int64_t start, int64_t end, int64_t step = 1);
Tensor pad_slice(const Tensor& src, const Shape& shape, int axis, int64_t start, int64_t step = 1);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor unsqueeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, int axis);
Tensor cat(const std::vector<Tensor>& xs, int axis);
Tensor stack(const std::vector<Tensor>& xs, int axis);
// Views of consecutive pieces along `axis`, made by one node whose backward concatenates the pieces'
// gradients (zeros for pieces that got none), so splitting into n pieces costs O(size) in backward,
// not n zero-padded copies of the whole.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int axis);
// Moves x along `axis` by s (s > 0: later), filling with zeros.
Tensor shift(const Tensor& x, int axis, int64_t s);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to_dtype(const Tensor& x, DType dtype);

// ---- indexing (int indices; the index receives no gradient)
Tensor index_select(const Tensor& x, int axis, const Tensor& idx);
Tensor index_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src);
Tensor gather(const Tensor& x, int axis, const Tensor& idx);
Tensor scatter_add(const Shape& shape, int axis, const Tensor& idx, const Tensor& src);
// (V, D), (…) → (…, D); ids on another device are copied to the table's.
Tensor embedding(const Tensor& weight, const Tensor& ids);
Tensor one_hot(const Tensor& idx, int64_t n, DType dtype = DType::F32);

// ---- neural-network functions
// Causal depthwise conv over time: x (B, T, C), w (C, K), optional bias (C);
// y[b,t,c] = Σ_k w[c,k]·x[b, t−K+1+k, c] (+ bias[c]), zeros before the start.
Tensor causal_conv1d(const Tensor& x, const Tensor& w, const Tensor& bias = {});
// Mean next-token loss: logits (N, V), targets (N) ints (copied to the logits' device if elsewhere).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);
// Per-token loss (N).
Tensor cross_entropy_per_token(const Tensor& logits, const Tensor& targets);

// ---- in-place updates for optimisers (refuse tensors that require grad while grad mode is on)
void copy_(const Tensor& dst, const Tensor& src);
void fill_(const Tensor& dst, double value);

// ---- operators
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);

// A scalar tensor with a's dtype and device.
Tensor scalar_like(const Tensor& a, double v);
Tensor zeros_like(const Tensor& a);
Tensor ones_like(const Tensor& a);

}  // namespace ponder
