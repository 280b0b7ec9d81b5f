// Evaluation of whole held-out streams (a document, or a repository's adaptation files followed by its evaluation
// files): the sequence is fed chunk by chunk with the model state — TTT inner weights, attention keys — carried from
// its first token to its last, and only the scored part's predictions count in the loss. Loss by position covers
// every prediction read, in log-spaced bins of the predicted token's position in its stream: the TTT paper's
// loss-vs-context curve, on long text.
#pragma once
#include <functional>
#include <vector>

#include "data/tokens.h"
#include "ttt/eval.h"

namespace ponder::ttt {

struct StreamEvalOptions {
  InnerRun inner;
  int64_t chunk = 1024;   // tokens per forward pass (a multiple of the mini-batch; the state carries across chunks)
  double lr_mult = 1.0;   // ttt_lr_mult (TTT-MLP ends its warm-up at 1)
  std::function<void(double fraction)> progress;  // optional: after each chunk, the share of the tokens read
  // Streams read side by side on CPU threads (tensor/side_by_side.h), each op on one thread; 0: as many as the CPU
  // threads (one on a GPU). Results are the same bits whatever it is.
  int jobs = 0;
  // Reset the state at every document's start (data::split_at_documents): each document of a stream is read alone,
  // from a fresh state, after the one token before it. The same predictions are scored as without it, and the
  // results still count per stream; only the context a prediction has changes.
  bool reset_at_documents = false;
};

// Position bins [1, 2), [2, 4), [4, 8), … up to the longest stream: a bin holds the predictions of tokens whose
// index in their stream lies in it.
struct PositionBins {
  std::vector<int64_t> lo, hi;  // [lo, hi)
  std::vector<double> loss_sum;
  std::vector<int64_t> count;
  void add(int64_t position, double loss);
  double mean(size_t bin) const { return count[bin] > 0 ? loss_sum[bin] / double(count[bin]) : 0.0; }
};

struct StreamEvalResult {
  int64_t streams = 0;
  int64_t pieces = 0;                 // reads from a fresh state: the streams, or their documents with a reset
  int64_t tokens = 0;                 // scored predictions
  int64_t read = 0;                   // tokens fed through the model (scored or not, padding excluded)
  double loss = 0, bpb = 0;           // mean over scored predictions
  std::vector<double> stream_bpb;     // per stream (NaN for a stream with nothing scored)
  std::vector<int64_t> stream_tokens; // scored predictions per stream
  PositionBins by_position;           // every prediction read (the adaptation part too): loss along the stream
                                      // (with a reset, along the document, its lead token at position 0)
  FlopCounts flops;                   // every forward pass, unscored parts included
  UnitCost inner;                     // TTT inner-loop FLOPs over all units and layers
  double flops_per_token = 0;         // flops.total() / read: what reading one token costs
  double inner_flops_per_token = 0;
  double seconds = 0;
};

// Runs every stream through `model` under NoGradGuard. A stream's inputs are padded at the end to a multiple of the
// mini-batch; padding is causal-safe (it comes after every scored position) and never scored or counted as read.
StreamEvalResult evaluate_streams(const Model& model, const std::vector<data::StreamTokens>& streams,
                                  const StreamEvalOptions& opt);

}  // namespace ponder::ttt
