#include "ttt/stream_eval.h"

#include <chrono>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "autograd/grad_mode.h"
#include "tensor/cpu/runtime.h"
#include "tensor/side_by_side.h"

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

namespace {

// What one stream gave: every prediction's loss in stream order (positions 1, 2, …), the scored part's sum and count,
// the tokens read and the inner loop's FLOPs.
struct StreamPart {
  std::vector<double> losses;
  double sum = 0;
  int64_t count = 0, read = 0;
  UnitCost inner;
};

// One stream fed chunk by chunk with the state carried; `progress` is told the share of its tokens read.
StreamPart read_stream(const Model& model, const data::StreamTokens& s, const StreamEvalOptions& opt,
                       const std::function<void(double)>& progress) {
  const int64_t b = model.config().mini_batch;
  const int64_t n = int64_t(s.tokens.size()) - 1;  // predictions: input t predicts token t + 1
  std::unique_ptr<StepSchedule> schedule = make_schedule(opt.inner.schedule);
  StreamPart p;
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
    add_costs(costs, p.inner);
    const std::vector<double> losses = chunk_losses(logits, tgt);
    for (int64_t i = 0; i < len; ++i) {
      p.losses.push_back(losses[size_t(i)]);
      if (c0 + i + 1 < s.first_scored) continue;  // position of the predicted token in the stream
      p.sum += losses[size_t(i)];
      ++p.count;
    }
    p.read += len;
    // after every chunk, not every stream: one held-out repository can be megabytes read for many minutes
    if (progress && c0 + len < n) progress(double(c0 + len) / double(s.tokens.size()));
  }
  return p;
}

// What evaluate_streams reads: the streams themselves, or with a reset each stream's documents (data::
// split_at_documents); owner[i] is the stream that read i belongs to.
struct Pieces {
  std::vector<data::StreamTokens> split;
  std::vector<const data::StreamTokens*> read;
  std::vector<size_t> owner;
  Pieces(const Pieces&) = delete;  // read points into split
  Pieces(const std::vector<data::StreamTokens>& streams, bool reset) {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (!reset) {
        read.push_back(&streams[i]);
        owner.push_back(i);
        continue;
      }
      for (data::StreamTokens& p : data::split_at_documents(streams[i])) {
        split.push_back(std::move(p));
        owner.push_back(i);
      }
    }
    for (const data::StreamTokens& p : split) read.push_back(&p);
  }
};

// The reads' parts combined in read order, as one read after another would have added them, so the thread count
// changes no bit; a stream's scored sums and counts gather its reads'.
StreamEvalResult combine(const std::vector<StreamPart>& parts, const std::vector<size_t>& owner, size_t streams) {
  StreamEvalResult r;
  std::vector<double> sums(streams, 0.0);
  std::vector<int64_t> counts(streams, 0);
  double loss_sum = 0;
  for (size_t j = 0; j < parts.size(); ++j) {
    const StreamPart& p = parts[j];
    for (size_t i = 0; i < p.losses.size(); ++i) r.by_position.add(int64_t(i) + 1, p.losses[i]);
    add_costs({p.inner}, r.inner);
    loss_sum += p.sum;
    sums[owner[j]] += p.sum;
    counts[owner[j]] += p.count;
    r.tokens += p.count;
    r.read += p.read;
  }
  for (size_t i = 0; i < streams; ++i) {
    r.stream_tokens.push_back(counts[i]);
    r.stream_bpb.push_back(counts[i] > 0 ? sums[i] / double(counts[i]) / std::numbers::ln2 : NAN);
  }
  r.streams = int64_t(streams);
  r.pieces = int64_t(parts.size());
  r.loss = r.tokens > 0 ? loss_sum / double(r.tokens) : NAN;
  r.bpb = r.loss / std::numbers::ln2;
  return r;
}

}  // namespace

StreamEvalResult evaluate_streams(const Model& model, const std::vector<data::StreamTokens>& streams,
                                  const StreamEvalOptions& opt) {
  const int64_t b = model.config().mini_batch;
  if (opt.chunk < b || opt.chunk % b != 0)
    throw std::invalid_argument("evaluate_streams: chunk " + std::to_string(opt.chunk) +
                                " must be a positive multiple of the mini-batch size " + std::to_string(b));
  if (streams.empty()) throw std::invalid_argument("evaluate_streams: no streams to evaluate");
  if (opt.jobs < 0) throw std::invalid_argument("evaluate_streams: jobs must be >= 0, got " + std::to_string(opt.jobs));
  NoGradGuard no_grad;
  const auto t0 = std::chrono::steady_clock::now();
  FlopScope scope;
  const Pieces pieces(streams, opt.reset_at_documents);
  if (pieces.read.empty()) throw std::invalid_argument("evaluate_streams: the streams have no scored token");
  std::vector<double> sizes;
  for (const data::StreamTokens* s : pieces.read) sizes.push_back(double(s->tokens.size()));
  const int jobs = model.device() != Device::CPU ? 1 : std::min<int>(opt.jobs > 0 ? opt.jobs : cpu::num_threads(),
                                                                       int(sizes.size()));
  SharedProgress told(opt.progress, sizes);
  std::vector<StreamPart> parts(sizes.size());
  side_by_side(hand_out_order(sizes, jobs), jobs, [&](size_t i, int) {
    parts[i] = read_stream(model, *pieces.read[i], opt, [&told, i](double f) { told.tell(i, f); });
    told.tell(i, 1.0);
  });
  StreamEvalResult r = combine(parts, pieces.owner, streams.size());
  if (r.tokens == 0) throw std::invalid_argument("evaluate_streams: the streams have no scored token");
  r.flops = scope.counts();
  r.flops_per_token = double(r.flops.total()) / double(r.read);
  r.inner_flops_per_token = double(r.inner.total()) / double(r.read);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace ponder::ttt
