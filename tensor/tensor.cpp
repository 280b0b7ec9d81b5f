#include "tensor/tensor.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

#include "tensor/backend.h"
#include "tensor/kernels.h"

namespace ponder {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("Tensor::empty: negative dimension in shape " + shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  backend(device).fill(t, value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw std::invalid_argument("Tensor::from_vector: " + std::to_string(values.size()) +
                                " values do not fill shape " + shape_str(shape));
  Tensor t = empty(shape, dtype);
  PONDER_DISPATCH_ALL(dtype, "from_vector", [&] {
    auto* p = t.data<scalar_t>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = scalar_t(values[i]);
  });
  return t;
}

Tensor Tensor::from_ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype) {
  if (int64_t(values.size()) != shape_numel(shape))
    throw std::invalid_argument("Tensor::from_ints: " + std::to_string(values.size()) +
                                " values do not fill shape " + shape_str(shape));
  Tensor t = empty(shape, dtype);
  PONDER_DISPATCH_ALL(dtype, "from_ints", [&] {
    auto* p = t.data<scalar_t>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = scalar_t(values[i]);
  });
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return from_ints(v, {n}, dtype);
}

int64_t Tensor::size(int64_t axis) const { return shape()[size_t(normalize_axis(axis, dim(), "Tensor::size"))]; }

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (size_t i = dim(); i-- > 0;) {
    if (shape()[i] != 1 && strides()[i] != expect) return false;
    expect *= shape()[i];
  }
  return true;
}

namespace {
// Contiguous host copy of any tensor, in its own dtype.
Tensor host_contiguous(const Tensor& t) {
  Tensor c = raw::contiguous(t);
  return c.device() == Device::CPU ? c : raw::to_device(c, Device::CPU);
}
}  // namespace

std::vector<double> Tensor::to_vector() const {
  Tensor c = host_contiguous(*this);
  std::vector<double> v(static_cast<size_t>(numel()));
  PONDER_DISPATCH_ALL(dtype(), "to_vector", [&] {
    const auto* p = c.data<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(p[i]);
  });
  return v;
}

std::vector<int64_t> Tensor::to_ints() const {
  Tensor c = host_contiguous(*this);
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  PONDER_DISPATCH_ALL(dtype(), "to_ints", [&] {
    const auto* p = c.data<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(p[i]);
  });
  return v;
}

double Tensor::item() const {
  if (numel() != 1) throw std::invalid_argument("Tensor::item: tensor of shape " + shape_str(shape()) + " is not a single value");
  return to_vector()[0];
}

Tensor Tensor::alias() const {
  auto impl = std::make_shared<TensorImpl>(*impl_);
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

std::string Tensor::str(int max_elems) const {
  std::ostringstream os;
  os << "Tensor(" << shape_str(shape()) << ", " << dtype_name(dtype()) << ", " << device_name(device()) << ") [";
  auto v = to_vector();
  for (size_t i = 0; i < v.size() && int(i) < max_elems; ++i) os << (i ? ", " : "") << v[i];
  if (int64_t(v.size()) > max_elems) os << ", …";
  os << "]";
  return os.str();
}

Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl()->storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

}  // namespace ponder
