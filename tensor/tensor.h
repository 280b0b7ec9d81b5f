// Tensor: a cheap handle to a strided view (shape, strides, offset) of a shared Storage.
// The tensor layer knows nothing of autograd beyond an opaque slot that autograd/ fills.
#pragma once
#include <memory>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace ponder {

struct AutogradMeta;  // defined in autograd/; the tensor layer only carries the pointer

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::F32;
  std::shared_ptr<AutogradMeta> autograd;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::CPU);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32, Device device = Device::CPU);
  static Tensor scalar(double value, DType dtype = DType::F32, Device device = Device::CPU);
  // Copies host values into a new CPU tensor of `dtype` (values are converted).
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::F32);
  static Tensor from_ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype = DType::I64);
  static Tensor arange(int64_t n, DType dtype = DType::I64);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t offset() const { return impl_->offset; }
  size_t dim() const { return impl_->shape.size(); }
  int64_t size(int64_t axis) const;
  int64_t numel() const { return shape_numel(impl_->shape); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device; }
  bool is_contiguous() const;
  Storage& storage() const { return *impl_->storage; }
  uint32_t version() const { return impl_->storage->version.load(); }
  void bump_version() const { impl_->storage->version.fetch_add(1); }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // Pointer to the first element of this view (CPU or device memory).
  template <class T> T* data() const {
    return static_cast<T*>(impl_->storage->data) + impl_->offset;
  }
  // Host copy of the elements in row-major order, converted to double / int64.
  std::vector<double> to_vector() const;
  std::vector<int64_t> to_ints() const;
  double item() const;

  // A new handle to the same view with no autograd state (the tensor layer's "detach").
  Tensor alias() const;
  std::string str(int max_elems = 8) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Makes a view with explicit geometry over t's storage (no copy, no autograd).
Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace ponder
