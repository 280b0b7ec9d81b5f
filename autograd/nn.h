// Modules: parameter holders with a forward function made of differentiable ops.
// Weights are stored (in, out) so a linear map is x·W + b with no transpose.
#pragma once
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "tensor/rng.h"

namespace ponder {

// Moves a leaf tensor (a parameter, an optimiser buffer) to `device` in place, as PyTorch's
// `p.data = p.data.to(device)`: every handle to it, a module's field and an optimiser's list alike,
// sees the device copy; requires_grad and the name are kept and an accumulated gradient moves along.
// A graph recorded before the move refuses to backward through it (the storage version moves on).
// Throws for a non-leaf (the result of a recorded op), wherever it is; otherwise a no-op when t is
// undefined or already on `device`.
void move_to_device_(const Tensor& t, Device device);

struct Module {
  virtual ~Module() = default;
  virtual std::vector<Tensor> parameters() const = 0;
  // Moves every parameter to `device` in place (move_to_device_); a no-op for those already there.
  void to(Device device);
};

struct Linear : Module {
  Tensor weight;  // (in, out), init U(-1/√in, 1/√in)
  Tensor bias;    // (out), zeros; undefined when built without bias
  Linear() = default;
  Linear(int64_t in, int64_t out, bool with_bias, Generator& gen, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;  // (…, in) → (…, out)
  std::vector<Tensor> parameters() const override;
};

struct Embedding : Module {
  Tensor weight;  // (V, D), init N(0, 0.02²)
  Embedding() = default;
  Embedding(int64_t vocab, int64_t dim, Generator& gen, DType dtype = DType::F32);
  Tensor forward(const Tensor& ids) const;  // (…) ints → (…, D)
  std::vector<Tensor> parameters() const override;
};

// Normalises over the last axis.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps);
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);

struct LayerNorm : Module {
  Tensor gamma, beta;  // (D): ones, zeros
  double eps = 1e-5;
  LayerNorm() = default;
  LayerNorm(int64_t dim, double eps = 1e-5, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
  std::vector<Tensor> parameters() const override;
};

struct RMSNorm : Module {
  Tensor weight;  // (D): ones
  double eps = 1e-6;
  RMSNorm() = default;
  RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::F32);
  Tensor forward(const Tensor& x) const;
  std::vector<Tensor> parameters() const override;
};

// A causal LSTM: the cell sees only the current input and the previous state.
struct LSTMCell : Module {
  Tensor w_ih;  // (in, 4H)   gate order: input, forget, cell, output
  Tensor w_hh;  // (H, 4H)
  Tensor bias;  // (4H), forget-gate part initialised to 1
  int64_t hidden = 0;
  LSTMCell() = default;
  LSTMCell(int64_t in, int64_t hidden, Generator& gen, DType dtype = DType::F32);
  // x (B, in), state (h, c) each (B, H) → new (h, c).
  std::pair<Tensor, Tensor> step(const Tensor& x, const std::pair<Tensor, Tensor>& state) const;
  // x (B, T, in) → h for every step (B, T, H), starting from zeros.
  Tensor forward(const Tensor& x) const;
  std::vector<Tensor> parameters() const override;
};

}  // namespace ponder
