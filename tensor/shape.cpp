#include "tensor/shape.h"

#include <algorithm>
#include <stdexcept>

namespace ponder {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape r(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw std::invalid_argument(std::string(op) + ": shapes " + shape_str(a) + " and " + shape_str(b) +
                                  " do not broadcast");
    r[i] = da == 1 ? db : da;
  }
  return r;
}

int normalize_axis(int64_t axis, size_t ndim, const char* op) {
  int64_t n = int64_t(ndim);
  if (axis < -n || axis >= n)
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " out of range for a " +
                                std::to_string(ndim) + "-d tensor");
  return int(axis < 0 ? axis + n : axis);
}

std::vector<int> normalize_axes(const std::vector<int64_t>& axes, size_t ndim, const char* op) {
  std::vector<int> r;
  if (axes.empty()) {
    for (size_t i = 0; i < ndim; ++i) r.push_back(int(i));
    return r;
  }
  for (int64_t a : axes) r.push_back(normalize_axis(a, ndim, op));
  std::sort(r.begin(), r.end());
  if (std::adjacent_find(r.begin(), r.end()) != r.end())
    throw std::invalid_argument(std::string(op) + ": repeated axis");
  return r;
}

Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdim) {
  Shape r;
  for (size_t i = 0; i < s.size(); ++i) {
    bool red = std::find(axes.begin(), axes.end(), int(i)) != axes.end();
    if (!red) r.push_back(s[i]);
    else if (keepdim) r.push_back(1);
  }
  return r;
}

void split_dims(const Shape& s, int axis, int64_t& outer, int64_t& len, int64_t& inner) {
  outer = inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  len = s[size_t(axis)];
}

}  // namespace ponder
