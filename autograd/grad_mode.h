// Whether differentiable ops record history (thread-local, like PyTorch's GradMode).
#pragma once

namespace ponder {

struct GradMode {
  static bool enabled();
  static void set(bool on);
};

// Ops inside run as plain kernels: no nodes, no saved tensors.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set(false); }
  ~NoGradGuard() { GradMode::set(prev_); }
 private:
  bool prev_;
};

class SetGradGuard {
 public:
  explicit SetGradGuard(bool on) : prev_(GradMode::enabled()) { GradMode::set(on); }
  ~SetGradGuard() { GradMode::set(prev_); }
 private:
  bool prev_;
};

}  // namespace ponder
