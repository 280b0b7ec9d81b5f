#include "ttt/conv.h"

namespace ponder::ttt {

Tensor causal_conv_chunk(const Tensor& x, Tensor& hist, const Tensor& w, const Tensor& bias) {
  const int64_t keep = w.shape()[1] - 1, n = x.shape()[1];
  Tensor full = hist.defined() ? cat({hist, x}, 1) : x;
  Tensor y = causal_conv1d(full, w, bias);
  const int64_t h = full.shape()[1] - n;
  if (h > 0) y = slice(y, 1, h, h + n);
  if (keep > 0) {
    if (full.shape()[1] < keep) {  // fewer inputs than the window so far: pad with the zeros they stand for
      Shape s = full.shape();
      s[1] = keep;
      full = pad_slice(full, s, 1, keep - full.shape()[1]);
    }
    hist = slice(full, 1, full.shape()[1] - keep, full.shape()[1]);
  }
  return y;
}

}  // namespace ponder::ttt
