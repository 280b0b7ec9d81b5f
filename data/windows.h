// Fixed-length (input, target) windows for language modelling. A window is seq_len + 1 consecutive tokens of ONE
// document (windows never cross a document boundary; documents shorter than seq_len + 1 tokens give none);
// input = its first seq_len tokens, target = its last seq_len, i.e. input shifted by one.
#pragma once
#include <cstdint>
#include <vector>

#include "data/tokens.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace ponder::data {

struct Window {
  int64_t doc = 0;    // index into TokenStream::docs
  int64_t start = 0;  // first token; the window is [start, start + seq_len + 1)
  bool operator==(const Window&) const = default;
};

struct Batch {
  Tensor input;   // int64 (B, T)
  Tensor target;  // int64 (B, T): target[b, t] is the token after input[b, t]
};

// Stacks `windows` of `tokens` into a Batch; throws when a window does not fit inside its document.
Batch gather_windows(const TokenStream& tokens, const std::vector<Window>& windows, int64_t seq_len);

// Training mode: each next() draws batch_size windows independently and uniformly over every valid start
// position of every document, from a counter-based generator. The position is (seed, state()): restoring a
// saved state() with set_state() continues the exact same sequence of batches.
// With span > 1 a draw is a run of span consecutive windows (span · seq_len + 1 tokens of one document), handed out
// by next_span() as `span` batches: row b of batch i is window i of draw b, so a model reading the batches in order
// with its state carried reads each row's run from its start (train.carry_state). span = 1 draws as next() does.
class WindowSampler {
 public:
  WindowSampler(TokenStream tokens, int64_t batch_size, int64_t seq_len, uint64_t seed, int64_t span = 1);
  Batch next();                  // span must be 1
  std::vector<Batch> next_span();  // batch_size draws of span windows each, as span batches
  uint64_t state() const { return gen_.counter(); }
  void set_state(uint64_t state) { gen_.set_state(seed_, state); }
  // Where `batches` calls of next() from `state` leave the sampler (each window of a batch is one draw), so that
  // processes sharing a step's batches each start at their own (ttt/train.h).
  void seek(uint64_t state, int64_t batches) { set_state(state + uint64_t(batches * batch_size_)); }
  uint64_t seed() const { return seed_; }
  int64_t batch_size() const { return batch_size_; }
  int64_t seq_len() const { return seq_len_; }
  int64_t span() const { return span_; }
  const TokenStream& tokens() const { return tokens_; }

 private:
  TokenStream tokens_;
  int64_t batch_size_, seq_len_, span_;
  uint64_t seed_;
  Generator gen_;
  std::vector<int64_t> starts_before_;  // starts_before_[d]: valid start positions of a draw in documents [0, d]
  std::vector<Window> draw();           // batch_size draws: where each run starts
};

// Evaluation mode: a fixed list of windows, the same on every call and for every method evaluated. Windows
// start at 0, T, 2T, … of each document in order, so consecutive windows share one token and every token of a
// document after its first is predicted exactly once, except the final < T tokens that do not fill a window.
// With max_windows > 0 and more windows than that, max_windows of them, evenly spaced over the list, are kept.
class EvalWindows {
 public:
  EvalWindows(TokenStream tokens, int64_t seq_len, int64_t max_windows = 0);
  const std::vector<Window>& windows() const { return windows_; }
  int64_t size() const { return int64_t(windows_.size()); }
  int64_t seq_len() const { return seq_len_; }
  int64_t num_batches(int64_t batch_size) const;
  // Windows [index · batch_size, (index + 1) · batch_size) of the list; the last batch may be smaller.
  Batch batch(int64_t index, int64_t batch_size) const;

 private:
  TokenStream tokens_;
  int64_t seq_len_;
  std::vector<Window> windows_;
};

}  // namespace ponder::data
