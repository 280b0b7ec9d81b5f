// Shapes, strides and broadcasting rules shared by every backend.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/small_vector.h"

namespace ponder {

// Six numbers inline: a scan's η, (B, H, units, b, b), has five axes and most tensors fewer, so shapes and strides
// stay off the heap (util/small_vector.h says why that matters); a longer one goes to the heap and works the same.
using Shape = SmallVector<int64_t, 6>;

int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);
// NumPy broadcasting of two shapes; throws naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Normalises a possibly negative axis into [0, ndim); throws for out-of-range axes.
int normalize_axis(int64_t axis, size_t ndim, const char* op);
// Sorted, unique, normalised axes; an empty list means "all axes".
std::vector<int> normalize_axes(const std::vector<int64_t>& axes, size_t ndim, const char* op);
// Shape after reducing `axes` (kept as size-1 dims when keepdim).
Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdim);
// A contiguous shape around `axis` as (outer, axis length, inner): the index kernels' view of their operands.
void split_dims(const Shape& s, int axis, int64_t& outer, int64_t& len, int64_t& inner);

}  // namespace ponder
