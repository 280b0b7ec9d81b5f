// Optimisers. Updates run under NoGradGuard and write parameters in place (bumping their version,
// so a graph that saved the old values refuses to backward through them).
#pragma once
#include <vector>

#include "autograd/ops.h"

namespace ponder {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params);
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();
  // Moves the parameters (in place, see move_to_device_ in autograd/nn.h) and the optimiser's state
  // buffers to `device`: call it after moving the model, or instead of it. Takes effect for later steps.
  virtual void to(Device device);
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
 protected:
  std::vector<Tensor> params_;
  double lr_ = 1e-3;
};

// SGD with (heavy-ball) momentum: v = μ·v + g; p -= lr·v.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0.0);
  void step() override;
  void to(Device device) override;
 private:
  double momentum_;
  std::vector<Tensor> velocity_;
};

// AdamW (Loshchilov & Hutter): decoupled weight decay p -= lr·wd·p, bias-corrected moments.
class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, double lr, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 0.01);
  void step() override;
  void to(Device device) override;
  int64_t steps() const { return t_; }
  // Moment buffers, for checkpoints: m_[i], v_[i] match params()[i].
  std::vector<Tensor>& exp_avg() { return m_; }
  std::vector<Tensor>& exp_avg_sq() { return v_; }
  void set_steps(int64_t t) { t_ = t; }
 private:
  double beta1_, beta2_, eps_, wd_;
  int64_t t_ = 0;
  std::vector<Tensor> m_, v_;
};

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm before.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace ponder
