// Run configs: one YAML file with the sections `model:`, `train:`, `data:`, `eval:` and `compare:` (every key is
// documented in configs/README.md; every key is optional and defaults to the value below or in
// ttt::ModelConfig / ttt::TrainConfig). Unknown keys and bad values are errors naming the file, the line
// and the key.
#pragma once
#include <string>
#include <vector>

#include "experiments/study/adapt_options.h"
#include "experiments/study/compare_options.h"
#include "policy/adapt_rollout.h"
#include "tensor/precision.h"
#include "ttt/eval.h"
#include "ttt/model.h"
#include "ttt/train.h"

namespace ponder::cli {

struct DataConfig {
  // A built-in corpus (moby_dick | tinyshakespeare | wikitext2 | sotu | pystdlib | pycode) or a path: a text file,
  // a folder of documents or a folder of repositories (data/dir_corpus.h).
  std::string corpus = "moby_dick";
  double valid_frac = 0.1;           // documents (or repositories) held out, in order: train, then valid, then test
  double test_frac = 0.1;
  std::string test_from;             // flat corpora: documents named this or later (byte order) are the test split
  double adapt_frac = 0.8;           // repository corpora: share of a held-out repository's files read, not scored
  std::vector<std::string> extensions;  // path corpora: file suffixes to read (e.g. [".py"]); empty = all
  int64_t max_file_bytes = 1 << 20;  // path corpora: larger files are skipped
  std::string layout = "auto";       // path corpora: auto | documents | repositories
  // Repository corpora: training windows are drawn from each training repository's files joined in path order, so a
  // window may cross a file boundary, as a state carried through a held-out repository does. Off: each file alone.
  bool train_across_files = false;
};

struct EvalConfig {
  ttt::InnerRun inner;        // schedule, mode and path of validation and of `ponder eval`
  int64_t batch_size = 8;     // windows per forward pass
  int64_t max_windows = 64;   // evenly spaced windows of the split; 0 = all
  // Validation during training also reads each validation stream with the state carried: its first stream_tokens
  // scored tokens after at most stream_tokens before them (data::cap_stream); 0 = windows only.
  int64_t stream_tokens = 0;
  std::string split = "valid";  // valid | test
};

// streams: how held-out streams are read for the regime checks (experiments/model/regime.h) of quick and compare.
struct StreamsConfig {
  int64_t chunk = 1024;        // tokens per forward pass; the state carries across chunks
  int64_t max_adapt = 0;       // per stream: at most this many unscored tokens before the scored part; 0 = all
  int64_t max_scored = 0;      // per segment: at most this many scored tokens; 0 = all (one segment per stream)
  int64_t max_segments = 0;    // per stream: segments of max_scored tokens kept, evenly spaced; 0 = all (whole split)
  int64_t max_ngram = 5;       // count n-gram baselines of orders 1 … max_ngram
  bool attention_baseline = true;  // quick: also train an attention-only model of the same size and read it
  // Loss by position from held-out documents (adaptation files too) read from their first token (each alone, fresh state), the documents at
  // least position_len tokens long cut to that length, at most position_docs of them evenly spaced; 0 = the bins of
  // the streams above. Streams that join a repository's files mid-file put different text at each position; equal
  // documents from their start show what reading more of the same text is worth (the TTT paper's figure).
  int64_t position_docs = 0;
  int64_t position_len = 1024;
  // uniform-K schedules also read with the state reset at every file's start (each file alone, after the byte before
  // it), on the same scored tokens: does carrying the state across a repository's files help? [] = none.
  std::vector<int> reset_ks = {1};
  // The comparison's streams mode (compare.streams) reads with the state reset at every file's start instead of
  // carried across a repository's files. The regime's uniform passes stay carried (reset_ks adds the reset ones).
  bool reset_at_documents = false;
};

struct RunConfig {
  ttt::ModelConfig model;
  std::string device = "cpu";  // model.device: cpu | cuda, where the parameters live and passes run
  // model.precision: f32 | tf32 | bf16, the operands of float32 matrix products (tensor/precision.h)
  MatmulPrecision precision = MatmulPrecision::F32;
  ttt::TrainConfig train;
  DataConfig data;
  EvalConfig eval;
  CompareOptions compare;  // `ponder compare` and `ponder quick`
  StreamsConfig streams;
  AdaptSection adapt;
  // train.seeds: `ponder quick` trains this many independent models (train.seed, train.seed + 1, …) and reports
  // over them; `ponder train` trains the one of train.seed.
  int64_t train_seeds = 1;
  std::string text;    // the YAML it was parsed from: what checkpoints and logs record
  std::string source;  // where the text came from, for messages
};

// The comparison `ponder adapt` runs: `compare` (the compare: section) with the adapt: section's methods, levels,
// budget and chunk, on every held-out stream.
CompareOptions adapt_compare_options(const AdaptSection& a, const CompareOptions& compare, int64_t mini_batch);

// Parses YAML text; `source` names it in errors.
RunConfig parse_config(const std::string& text, const std::string& source);
RunConfig load_config(const std::string& path);
// "tiny" → <repository>/configs/tiny.yaml; anything with a '/' or a .yaml suffix is a path.
std::string resolve_config(const std::string& name_or_path);
// The same YAML with each "section.key=value" of `sets` applied in order (the value is read as YAML, so lists and
// numbers keep their types); the result is checked by parse_config like any file. Comments are not kept.
std::string with_overrides(const std::string& text, const std::vector<std::string>& sets);
// The same YAML with train.steps set to `steps` (comments are not kept).
std::string with_train_steps(const std::string& text, int64_t steps);
// Which of `sections` (top-level keys) are written differently in two config texts (a section one lacks counts as
// different).
std::vector<std::string> sections_differing(const std::string& a, const std::string& b,
                                            const std::vector<std::string>& sections);

}  // namespace ponder::cli
