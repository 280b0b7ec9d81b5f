// What `ponder train` and `ponder quick` share: loading a config's corpus, and a training run with a
// progress line on stderr, a JSON-lines log and checkpoints in one output folder:
//   DIR/checkpoint.ckpt   the latest checkpoint (replaced atomically)
//   DIR/train.jsonl       a header line per run (or resumption), then one line per logged step
//   DIR/train.csv         the logged steps again as CSV rows, for spreadsheets and plotting tools
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "data/corpus.h"
#include "data/tokens.h"
#include "experiments/model/config.h"
#include "ttt/train.h"

namespace ponder::cli {

// What produced a result (experiments/process/build_info.h fills it; tests may leave it empty).
struct Provenance {
  std::string version, commit, build_type;
};

struct Dataset {
  data::Corpus corpus;  // name, source, sha256 and manifest (its documents are moved into the splits)
  data::TokenStream train, valid, test;  // valid/test: the scored documents of the held-out streams
  std::vector<data::StreamTokens> valid_streams, test_streams;  // whole held-out documents or repositories
  data::TokenStream valid_read, test_read;  // every document of those streams, adaptation files included
  std::vector<std::pair<std::string, std::string>> roles;  // document name → train / valid-adapt / … / test-eval
  const data::TokenStream& split(const std::string& name) const;  // "valid" | "test"
  const std::vector<data::StreamTokens>& streams(const std::string& name) const;  // "valid" | "test"
  const data::TokenStream& documents_read(const std::string& name) const;        // "valid" | "test"
};
// Loads a built-in corpus or a path (DataConfig::corpus) and splits it: flat corpora by document order (or from
// data.test_from on), repository corpora by repository and then by file (data/corpus.h). Throws naming the key.
Dataset load_dataset(const DataConfig& cfg);
// The corpus as results files record it: name, source, sha256 of the manifest (or file), and for corpora read from
// folders every file with its size, sha256, split role, or the reason it was skipped.
nlohmann::ordered_json corpus_json(const Dataset& ds);

std::string checkpoint_path(const std::string& dir);
std::string log_path(const std::string& dir);
// DIR/train.csv: the step lines of the log as CSV rows (step, loss, lr, grad_norm, tokens_per_s, val_loss, val_bpb).
std::string csv_log_path(const std::string& dir);

struct TrainJob {
  RunConfig config;
  std::string out_dir;
  const ttt::Checkpoint* resume = nullptr;  // continue from this (loaded from out_dir by the caller)
  int64_t stop_after = 0;                   // stop (with a checkpoint) after this step; 0 = run to the end
  Provenance provenance;
  Device device = Device::CPU;              // from run_device (experiments/model/device.h): already usable
};

struct TrainOutcome {
  std::string checkpoint;
  ttt::TrainResult result;
};

// Trains; Ctrl-C finishes the current step, writes a checkpoint and throws saying how to resume.
TrainOutcome run_train_job(const TrainJob& job);

// The model a checkpoint holds, with its config (parsed from the checkpoint's config text), on `device`
// (the checkpoint's host tensors are copied there).
struct TrainedModel {
  RunConfig config;
  ttt::Model model;
  int64_t step;
  std::string data_sha256;  // the corpus it was trained on (the checkpoint's metadata); empty: not recorded
};
TrainedModel load_trained(const ttt::Checkpoint& ck, const std::string& path, Device device = Device::CPU);
// Refuses to read `ds` with a model trained on another corpus (a path corpus resolved from another working folder,
// files changed since): the checkpoint's recorded sha256 must be the corpus's, unless `other_corpus` says the other
// corpus is read on purpose (--other-corpus; the results then record both hashes).
void check_corpus(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint, bool other_corpus);

// The model `cfg` trains into `dir`: reused when a finished run of the same config by this build is there (`reused`
// is set), continued when that run was interrupted, else trained afresh (saying why on stderr); `retrain` forces it.
// `by` names this build: a checkpoint written by another commit is not reused.
TrainedModel train_or_reuse(const RunConfig& cfg, const std::string& dir, bool retrain, Device device,
                            const Provenance& by, bool& reused);

// Evaluation options for a trained model: the config's eval section, the TTT-MLP lr multiplier of its step.
ttt::EvalOptions eval_options(const TrainedModel& m, const ttt::InnerRun& inner);

// An evaluation as JSON, with the full per-position loss array.
nlohmann::ordered_json eval_json(const ttt::EvalResult& r, const ttt::InnerRun& inner);

}  // namespace ponder::cli
