#include "data/windows.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ponder::data {
namespace {

void check_positive(int64_t value, const char* what) {
  if (value < 1) throw std::invalid_argument(std::string(what) + " must be >= 1, got " + std::to_string(value));
}

size_t longest(const TokenStream& tokens) {
  size_t n = 0;
  for (const auto& d : tokens.docs) n = std::max(n, d.size());
  return n;
}

}  // namespace

Batch gather_windows(const TokenStream& tokens, const std::vector<Window>& windows, int64_t seq_len) {
  check_positive(seq_len, "gather_windows: seq_len");
  std::vector<int64_t> input, target;
  input.reserve(windows.size() * size_t(seq_len));
  target.reserve(windows.size() * size_t(seq_len));
  for (const Window& w : windows) {
    if (w.doc < 0 || w.doc >= int64_t(tokens.docs.size()) || w.start < 0 ||
        w.start + seq_len + 1 > int64_t(tokens.docs[size_t(w.doc)].size()))
      throw std::invalid_argument("gather_windows: window (doc " + std::to_string(w.doc) + ", start " +
                                  std::to_string(w.start) + ") of " + std::to_string(seq_len + 1) +
                                  " tokens does not fit inside a document of the stream");
    const int32_t* t = tokens.docs[size_t(w.doc)].data() + w.start;
    input.insert(input.end(), t, t + seq_len);
    target.insert(target.end(), t + 1, t + seq_len + 1);
  }
  Shape shape = {int64_t(windows.size()), seq_len};
  return {Tensor::from_ints(input, shape), Tensor::from_ints(target, shape)};
}

WindowSampler::WindowSampler(TokenStream tokens, int64_t batch_size, int64_t seq_len, uint64_t seed, int64_t span)
    : tokens_(std::move(tokens)), batch_size_(batch_size), seq_len_(seq_len), span_(span), seed_(seed), gen_(seed) {
  check_positive(batch_size, "WindowSampler: batch_size");
  check_positive(seq_len, "WindowSampler: seq_len");
  check_positive(span, "WindowSampler: span");
  int64_t total = 0;
  for (const auto& d : tokens_.docs) {
    total += std::max<int64_t>(0, int64_t(d.size()) - span * seq_len);
    starts_before_.push_back(total);
  }
  if (total == 0) {
    const std::string what = span == 1 ? "seq_len + 1 = " : std::to_string(span) + " windows · seq_len + 1 = ";
    throw std::invalid_argument("WindowSampler: no document has " + what + std::to_string(span * seq_len + 1) +
                                " tokens (longest: " + std::to_string(longest(tokens_)) + ")");
  }
}

std::vector<Window> WindowSampler::draw() {
  std::vector<Window> windows;
  const int64_t total = starts_before_.back();
  for (int64_t b = 0; b < batch_size_; ++b) {  // one draw per row: seek() counts on it
    auto k = std::min(int64_t(gen_.uniform01() * double(total)), total - 1);
    // The document is the first whose cumulative start count exceeds k; documents without starts are skipped.
    auto doc = std::upper_bound(starts_before_.begin(), starts_before_.end(), k) - starts_before_.begin();
    windows.push_back({doc, k - (doc > 0 ? starts_before_[size_t(doc) - 1] : 0)});
  }
  return windows;
}

Batch WindowSampler::next() {
  if (span_ != 1)
    throw std::logic_error("WindowSampler::next: this sampler draws runs of " + std::to_string(span_) +
                           " windows; read them with next_span()");
  return gather_windows(tokens_, draw(), seq_len_);
}

std::vector<Batch> WindowSampler::next_span() {
  std::vector<Window> windows = draw();
  std::vector<Batch> out;
  for (int64_t i = 0; i < span_; ++i) {
    out.push_back(gather_windows(tokens_, windows, seq_len_));
    for (Window& w : windows) w.start += seq_len_;  // the next window of the run continues where this one ended
  }
  return out;
}

EvalWindows::EvalWindows(TokenStream tokens, int64_t seq_len, int64_t max_windows)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  check_positive(seq_len, "EvalWindows: seq_len");
  if (max_windows < 0)
    throw std::invalid_argument("EvalWindows: max_windows must be >= 0 (0 = all), got " + std::to_string(max_windows));
  std::vector<Window> all;
  for (size_t d = 0; d < tokens_.docs.size(); ++d)
    for (int64_t s = 0; s + seq_len + 1 <= int64_t(tokens_.docs[d].size()); s += seq_len)
      all.push_back({int64_t(d), s});
  if (all.empty())
    throw std::invalid_argument("EvalWindows: no document has seq_len + 1 = " + std::to_string(seq_len + 1) +
                                " tokens (longest: " + std::to_string(longest(tokens_)) + ")");
  const auto n = int64_t(all.size());
  if (max_windows == 0 || max_windows >= n) {
    windows_ = std::move(all);
  } else {
    for (int64_t i = 0; i < max_windows; ++i) windows_.push_back(all[size_t(i * n / max_windows)]);
  }
}

int64_t EvalWindows::num_batches(int64_t batch_size) const {
  check_positive(batch_size, "EvalWindows::num_batches: batch_size");
  return (size() + batch_size - 1) / batch_size;
}

Batch EvalWindows::batch(int64_t index, int64_t batch_size) const {
  if (index < 0 || index >= num_batches(batch_size))
    throw std::out_of_range("EvalWindows::batch: index " + std::to_string(index) + " outside [0, " +
                            std::to_string(num_batches(batch_size)) + ") for batch_size " + std::to_string(batch_size));
  auto first = windows_.begin() + index * batch_size;
  auto last = windows_.begin() + std::min(size(), (index + 1) * batch_size);
  return gather_windows(tokens_, std::vector<Window>(first, last), seq_len_);
}

}  // namespace ponder::data
