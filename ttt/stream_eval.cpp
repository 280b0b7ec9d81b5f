#include "ttt/stream_eval.h"

#include <chrono>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "autograd/grad_mode.h"

namespace ponder::ttt {
namespace {

// Per-token losses (n) of one chunk: logits (1, n, V) against targets.
std::vector<double> chunk_losses(const Tensor& logits, const std::vector<int64_t>& targets) {
  const int64_t n = logits.shape()[1], V = logits.shape()[2];
  return cross_entropy_per_token(reshape(logits, {n, V}), Tensor::from_ints(targets, {n})).to_vector();
}

}  // namespace

void PositionBins::add(int64_t position, double loss) {
  if (position < 1) throw std::invalid_argument("PositionBins: position must be >= 1, got " + std::to_string(position));
  while (hi.empty() || position >= hi.back()) {
    const int64_t l = hi.empty() ? 1 : hi.back();
    lo.push_back(l);
    hi.push_back(2 * l);
    loss_sum.push_back(0);
    count.push_back(0);
  }
  const size_t bin = size_t(std::floor(std::log2(double(position))));
  loss_sum[bin] += loss;
  ++count[bin];
}

StreamEvalResult evaluate_streams(const Model& model, const std::vector<data::StreamTokens>& streams,
                                  const StreamEvalOptions& opt) {
  const int64_t b = model.config().mini_batch;
  if (opt.chunk < b || opt.chunk % b != 0)
    throw std::invalid_argument("evaluate_streams: chunk " + std::to_string(opt.chunk) +
                                " must be a positive multiple of the mini-batch size " + std::to_string(b));
  if (streams.empty()) throw std::invalid_argument("evaluate_streams: no streams to evaluate");
  NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<StepSchedule> schedule = make_schedule(opt.inner.schedule);
  StreamEvalResult r;
  double loss_sum = 0;
  FlopScope scope;
  const double all_tokens = data::stream_tokens(streams);
  double fed = 0;  // tokens of the streams before this one
  for (const data::StreamTokens& s : streams) {
    const int64_t n = int64_t(s.tokens.size()) - 1;  // predictions: input t predicts token t + 1
    double stream_sum = 0;
    int64_t stream_count = 0;
    ModelState state;
    for (int64_t c0 = 0; c0 < n; c0 += opt.chunk) {
      const int64_t len = std::min(opt.chunk, n - c0), padded = (len + b - 1) / b * b;
      std::vector<int64_t> in(size_t(padded), 0), tgt(size_t(padded), 0);
      for (int64_t i = 0; i < len; ++i) {
        in[size_t(i)] = s.tokens[size_t(c0 + i)];
        tgt[size_t(i)] = s.tokens[size_t(c0 + i + 1)];
      }
      std::vector<UnitCost> costs;
      const TTTRun run = make_run(opt.inner, schedule.get(), opt.lr_mult, &costs);
      const Tensor logits = model.forward_chunk(Tensor::from_ints(in, {1, padded}), state, run);
      add_costs(costs, r.inner);
      const std::vector<double> losses = chunk_losses(logits, tgt);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t position = c0 + i + 1;  // index of the predicted token in the stream
        r.by_position.add(position, losses[size_t(i)]);  // every prediction read: how loss evolves along the stream
        if (position < s.first_scored) continue;
        stream_sum += losses[size_t(i)];
        ++stream_count;
      }
      r.read += len;
      // after every chunk, not every stream: one held-out repository can be megabytes read for many minutes
      if (opt.progress && c0 + len < n) opt.progress((fed + double(c0 + len)) / all_tokens);
    }
    fed += double(s.tokens.size());
    if (opt.progress) opt.progress(fed / all_tokens);
    loss_sum += stream_sum;
    r.tokens += stream_count;
    r.stream_tokens.push_back(stream_count);
    r.stream_bpb.push_back(stream_count > 0 ? stream_sum / double(stream_count) / std::numbers::ln2 : NAN);
    ++r.streams;
  }
  if (r.tokens == 0) throw std::invalid_argument("evaluate_streams: the streams have no scored token");
  r.flops = scope.counts();
  r.loss = loss_sum / double(r.tokens);
  r.bpb = r.loss / std::numbers::ln2;
  r.flops_per_token = double(r.flops.total()) / double(r.read);
  r.inner_flops_per_token = double(r.inner.total()) / double(r.read);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ponder::ttt
