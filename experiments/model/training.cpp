#include "experiments/model/training.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/corpora.h"
#include "data/corpus_table.h"
#include "util/sha256.h"
#include "data/dir_corpus.h"
#include "data/planted.h"
#include "experiments/process/bench_util.h"
#include "experiments/model/device.h"
#include "experiments/process/ranks.h"
#include "tensor/dist.h"
#include "tensor/cpu/runtime.h"
#include "util/fault.h"
#include "util/files.h"

namespace ponder::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int sig) {
  g_interrupted = sig;
  // A second Ctrl-C (or TERM, HUP) stops at once; a closed pipe is ignored from now on, so the messages written while
  // the checkpoint is saved (to the same closed pipe) cannot kill the run before it is.
  std::signal(sig, sig == SIGPIPE ? SIG_IGN : SIG_DFL);
}

// Installs the handler for Ctrl-C (SIGINT), a scheduler's SIGTERM, a closed terminal's SIGHUP and a closed pipe's
// SIGPIPE (`ponder train | head`) for the lifetime of a run: each finishes the current step and checkpoints before
// stopping.
class InterruptGuard {
 public:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
  InterruptGuard() {
    g_interrupted = 0;
    for (size_t i = 0; i < std::size(kSignals); ++i) prev_[i] = std::signal(kSignals[i], on_interrupt);
  }
  ~InterruptGuard() {
    for (size_t i = 0; i < std::size(kSignals); ++i) std::signal(kSignals[i], prev_[i]);
  }
  bool fired() const { return g_interrupted != 0; }
  const char* signal_name() const {
    switch (g_interrupted) {
      case SIGTERM: return "SIGTERM";
      case SIGHUP: return "SIGHUP";
      case SIGPIPE: return "SIGPIPE";
      default: return "SIGINT";
    }
  }
 private:
  void (*prev_[std::size(kSignals)])(int);
};

// " 0.0625 0.071" for the carry factors of the TTT layers, " –" for a model without TTT layers.
std::string carry_text(const std::vector<double>& f) {
  std::string s;
  char buf[32];
  for (double v : f) {
    std::snprintf(buf, sizeof buf, " %.4g", v);
    s += buf;
  }
  return s.empty() ? " –" : s;
}

std::string clock_text(double seconds) {
  const long s = long(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

// The progress display on stderr: one line rewritten in place on a terminal, else a line every `every` steps.
class Progress {
 public:
  Progress(int64_t first, int64_t end, int64_t every)
      : first_(first), end_(end), every_(every), tty_(isatty(STDERR_FILENO) != 0),
        t0_(std::chrono::steady_clock::now()) {}

  void update(const ttt::StepReport& r, const std::vector<double>& carry) {
    const int64_t s = r.stats.step, done = s - first_;
    tokens_ += r.stats.tokens;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double eta = elapsed / double(done) * double(end_ - s);
    char line[256];
    std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f  lr %.2e  %.0f tok/s  elapsed %s  ETA %s", (long long)s,
                  (long long)end_, r.stats.loss, r.stats.lr, double(tokens_) / elapsed, clock_text(elapsed).c_str(),
                  clock_text(eta).c_str());
    if (r.val) {
      clear();
      std::fprintf(stderr, "step %lld: val loss %.4f, %.4f bits/byte (%lld windows, %.1f s), carry factor%s\n",
                   (long long)s, r.val->loss, r.val->bpb, (long long)r.val->windows, r.val->seconds,
                   carry_text(carry).c_str());
      if (r.val_stream)
        std::fprintf(stderr, "step %lld: val streams %.4f bits/byte (%lld streams, %lld scored tokens, state carried, "
                     "%.1f s)\n", (long long)s, r.val_stream->bpb, (long long)r.val_stream->streams,
                     (long long)r.val_stream->tokens, r.val_stream->seconds);
    }
    if (tty_) {
      constexpr int kWidth = 24;
      const int filled = int(double(kWidth) * double(s) / double(end_));
      std::fprintf(stderr, "\r[%s%s] %s", std::string(size_t(filled), '#').c_str(),
                   std::string(size_t(kWidth - filled), '.').c_str(), line);
      shown_ = true;
    } else if (s % every_ == 0 || s == end_) {
      std::fprintf(stderr, "%s\n", line);
    }
    std::fflush(stderr);
  }
  void clear() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  int64_t first_, end_, every_;
  bool tty_;
  bool shown_ = false;
  int64_t tokens_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

nlohmann::ordered_json header(const TrainJob& job, const Dataset& ds, const ttt::Trainer& trainer) {
  const RunConfig& c = job.config;
  return {{"type", "header"},
          {"config", c.text},
          {"config_source", c.source},
          {"seed", c.train.seed},
          {"commit", job.provenance.commit},
          {"version", job.provenance.version},
          {"build_type", job.provenance.build_type},
          {"threads", cpu::num_threads()},
          {"device", describe_device(job.device)},
          {"corpus", ds.corpus.name},
          {"data_sha256", ds.corpus.sha256},
          {"train_tokens", ds.train.num_tokens()},
          {"valid_tokens", ds.valid.num_tokens()},
          {"parameters", trainer.model().num_parameters()},
          {"start_step", trainer.step_count()},
          {"steps", c.train.steps}};
}

}  // namespace

namespace {

// The valid or the test member, by name.
template <class T>
const T& held_out(const std::string& name, const T& valid, const T& test) {
  if (name == "valid") return valid;
  if (name == "test") return test;
  throw std::invalid_argument("split must be 'valid' or 'test', got '" + name + "'");
}

}  // namespace

const data::TokenStream& Dataset::split(const std::string& name) const { return held_out(name, valid, test); }

const std::vector<data::StreamTokens>& Dataset::streams(const std::string& name) const {
  return held_out(name, valid_streams, test_streams);
}

const data::TokenStream& Dataset::documents_read(const std::string& name) const {
  return held_out(name, valid_read, test_read);
}

namespace {

// Every document the held-out streams read, in stream order: adaptation files, then evaluation files.
data::TokenStream documents_read(const std::vector<data::HeldOut>& streams) {
  std::vector<data::Document> docs;
  for (const data::HeldOut& h : streams) {
    docs.insert(docs.end(), h.adapt.begin(), h.adapt.end());
    docs.insert(docs.end(), h.eval.begin(), h.eval.end());
  }
  return data::tokenize(docs);
}

data::Corpus load_corpus(const DataConfig& cfg) {
  const std::string& name = cfg.corpus;
  if (const data::NamedCorpus* named = data::find_named_corpus(name)) return named->load(cfg.max_file_bytes);
  if (!std::filesystem::exists(name))
    throw std::invalid_argument("data.corpus: '" + name + "' is neither a built-in corpus (" +
                                data::named_corpus_list() + ") nor an existing file or folder");
  data::DirCorpusOptions opt;
  opt.extensions = cfg.extensions;
  opt.max_file_bytes = cfg.max_file_bytes;
  opt.layout = cfg.layout;
  return data::load_dir_corpus(name, opt);
}

data::Split split_corpus(const data::Corpus& c, const DataConfig& cfg) {
  if (c.repositories) {
    if (!cfg.test_from.empty())
      throw std::invalid_argument("data.test_from splits flat corpora by document name; corpus '" + c.name +
                                  "' is a corpus of repositories (split by data.valid_frac and data.test_frac)");
    return data::split_by_repository(c, cfg.valid_frac, cfg.test_frac, cfg.adapt_frac);
  }
  if (!cfg.test_from.empty()) return data::split_from_name(c, cfg.test_from, cfg.valid_frac);
  return data::split_by_document(c, cfg.valid_frac, cfg.test_frac);
}

}  // namespace

Dataset load_dataset(const DataConfig& cfg) {
  Dataset ds;
  ds.corpus = load_corpus(cfg);
  const data::Split split = split_corpus(ds.corpus, cfg);
  ds.corpus.docs.clear();
  if (cfg.train_across_files && !ds.corpus.repositories)
    throw std::invalid_argument("data.train_across_files joins each training repository's files; corpus '" +
                                ds.corpus.name + "' is not a corpus of repositories");
  ds.train = data::tokenize(cfg.train_across_files ? data::join_by_repository(split.train) : split.train);
  ds.valid = data::tokenize(split.valid);
  ds.test = data::tokenize(split.test);
  ds.valid_streams = data::tokenize_streams(split.valid_streams);
  ds.test_streams = data::tokenize_streams(split.test_streams);
  ds.valid_read = documents_read(split.valid_streams);
  ds.test_read = documents_read(split.test_streams);
  ds.roles = data::split_roles(split);
  return ds;
}

nlohmann::ordered_json corpus_json(const Dataset& ds) {
  nlohmann::ordered_json j = {{"name", ds.corpus.name}, {"source", ds.corpus.source}, {"sha256", ds.corpus.sha256},
                              {"layout", ds.corpus.repositories ? "repositories" : "documents"}};
  if (ds.corpus.manifest.empty()) return j;
  std::map<std::string, std::string> role(ds.roles.begin(), ds.roles.end());
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const data::ManifestEntry& m : ds.corpus.manifest) {
    nlohmann::ordered_json f = {{"path", m.path}, {"bytes", m.bytes}};
    if (!m.repo.empty()) f["repo"] = m.repo;
    if (!m.sha256.empty()) f["sha256"] = m.sha256;
    if (m.skipped.empty()) f["split"] = role.count(m.path) ? role[m.path] : "unused";
    else f["skipped"] = m.skipped;
    files.push_back(f);
  }
  j["files"] = files;
  return j;
}

std::string checkpoint_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "checkpoint.ckpt").string();
}
std::string log_path(const std::string& dir) { return (std::filesystem::path(dir) / "train.jsonl").string(); }
std::string csv_log_path(const std::string& dir) { return (std::filesystem::path(dir) / "train.csv").string(); }

namespace {

// A lower bound on what training `m` holds in memory: its parameters, their gradients and AdamW's two moments in
// float32 (embedding, and per layer the four d×d projections and the SwiGLU's three d×hidden matrices).
double lower_bound_bytes(const ttt::ModelConfig& m) {
  const double d = double(m.d), per_layer = 4 * d * d + 3 * d * double(m.ffn_hidden());
  return 4.0 * 4.0 * (double(m.vocab) * d + double(m.layers) * per_layer);
}

// Refuses, naming the keys, a model that cannot fit before a single tensor is made (instead of std::bad_alloc
// after minutes of data loading, or an address-space limit hit half-way).
void check_fits(const RunConfig& c) {
  const double room = available_memory_bytes();
  const double need = lower_bound_bytes(c.model);
  if (room > 0 && need > room) {
    char msg[320];
    std::snprintf(msg, sizeof msg, "%s: model.d %lld with model.layers %lld needs at least %.1f GiB for parameters, "
                  "gradients and AdamW moments, more than the %.1f GiB of memory this process may use; make model.d "
                  "or model.layers smaller", c.source.c_str(), (long long)c.model.d, (long long)c.model.layers,
                  need / 1073741824.0, room / 1073741824.0);
    throw std::invalid_argument(msg);
  }
}

// The run's metrics: every log line in train.jsonl (the header first), and the step lines again as rows of
// train.csv for spreadsheets and plotting tools. A write that fails (disk full, a read-only folder) is remembered
// so the caller can checkpoint and stop, instead of training on with no record of it.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& dir) : json_path_(log_path(dir)), csv_path_(csv_log_path(dir)) {
    std::error_code ec;
    const bool new_csv = std::filesystem::file_size(csv_path_, ec) == 0 || ec;  // missing, empty or not a file
    json_.open(json_path_, std::ios::app);
    csv_.open(csv_path_, std::ios::app);
    if (!json_) throw std::runtime_error("cannot write the log '" + json_path_ + "'");
    if (!csv_) throw std::runtime_error("cannot write the log '" + csv_path_ + "'");
    if (new_csv) csv_ << "step,loss,lr,grad_norm,tokens_per_s,val_loss,val_bpb\n";
  }
  void header(const nlohmann::ordered_json& line) {
    json_ << line.dump() << std::endl;
    if (!ok()) throw std::runtime_error(error());  // nothing trained yet: stop at once
  }
  void step(const nlohmann::ordered_json& line) {
    json_ << line.dump() << std::endl;
    csv_ << line["step"].get<int64_t>() << ',' << num(line, "loss") << ',' << num(line, "lr") << ','
         << num(line, "grad_norm") << ',' << num(line, "tokens_per_s") << ',' << num(line, "val_loss") << ','
         << num(line, "val_bpb") << std::endl;
  }
  bool ok() const { return json_.good() && csv_.good(); }
  std::string error() const {
    return "cannot write the log '" + (json_.good() ? csv_path_ : json_path_) + "' (disk full or read-only?)";
  }

 private:
  static std::string num(const nlohmann::ordered_json& line, const char* key) {
    if (!line.contains(key)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", line[key].get<double>());
    return buf;
  }
  std::string json_path_, csv_path_;
  std::ofstream json_, csv_;
};

}  // namespace

namespace {

// What a run needs before its first step. Every rank builds it; only rank 0 writes the logs.
struct TrainSetup {
  Dataset ds;
  std::unique_ptr<data::EvalWindows> valid;
  std::vector<data::StreamTokens> valid_streams;  // eval.stream_tokens of each, state carried; empty = none
  std::unique_ptr<ttt::Trainer> trainer;
  std::unique_ptr<MetricsLog> log;  // rank 0's
};

// A checkpoint continues only on as many ranks as made it: each step's micro-batches are split the same way then.
void check_ranks(const ttt::Checkpoint& ck, const std::string& path) {
  const std::string had = ck.meta_value("ranks");  // absent: written by one process
  int made = 1;
  if (!had.empty()) {
    char* end = nullptr;
    const long v = std::strtol(had.c_str(), &end, 10);
    if (end != had.c_str() + had.size() || v < 1 || v > 1000000)
      throw std::invalid_argument("train --resume: '" + path + "' records ranks '" + had + "', which is not a rank count");
    made = int(v);
  }
  const int now = dist::size();
  if (made != now)
    throw std::invalid_argument("train --resume: '" + path + "' was trained on " + std::to_string(made) + " rank(s) " +
                                "(mpirun -np " + std::to_string(made) + "); this run has " + std::to_string(now) +
                                ": resume it with the same number of ranks");
}

// Under mpirun every rank must train the same run: a rank with another model size corrupts the all-reduce's buffers,
// one with other steps or resume state leaves the others waiting forever, one with another lr or seed trains a
// silently different model. Compared before any work (experiments/process/ranks.h).
void check_training_ranks(const TrainJob& job, const Dataset& ds) {
  const int64_t from = job.resume ? job.resume->step : 0;
  check_ranks_agree("train", {{"config (its text after --set and --seed)", job.config.text},
                              {"step range", std::to_string(from) + ".." + std::to_string(job.config.train.steps) +
                                                 ", stop after " + std::to_string(job.stop_after)},
                              {"resume state", job.resume ? "resuming " + util::sha256_hex(job.resume->config_text) +
                                                                " at step " + std::to_string(job.resume->step)
                                                          : "a fresh start"},
                              {"corpus (sha256 of its files)", ds.corpus.sha256}});
}

// Why `ds` is not the corpus a checkpoint recorded (its data_sha256; empty: not recorded), or "" when it is.
std::string corpus_mismatch(const std::string& trained_sha256, const Dataset& ds, const std::string& checkpoint) {
  if (trained_sha256.empty() || trained_sha256 == ds.corpus.sha256) return "";
  return "'" + checkpoint + "' was trained on a corpus with sha256 " + trained_sha256 + ", but '" + ds.corpus.name +
         "' reads as " + ds.corpus.sha256 + " here (a path corpus resolved from another working folder, or files " +
         "changed since?)";
}

// What a run reads before it may start, on each rank alone (an error here may be one rank's: a file missing there).
std::unique_ptr<TrainSetup> load_for_training(const TrainJob& job, const std::string& checkpoint) {
  const RunConfig& c = job.config;
  check_fits(c);
  if (dist::rank() == 0) util::lock_output_dir(job.out_dir);  // before its files are looked at; ranks share the folder
  if (!job.resume && std::filesystem::exists(checkpoint))
    throw std::runtime_error("'" + checkpoint + "' exists; pass --resume to continue that run, or choose another --out");
  if (job.resume) check_ranks(*job.resume, checkpoint);
  std::filesystem::create_directories(job.out_dir);
  auto s = std::make_unique<TrainSetup>();
  s->ds = load_dataset(c.data);
  s->valid = std::make_unique<data::EvalWindows>(s->ds.valid, c.train.seq_len, c.eval.max_windows);
  if (c.eval.stream_tokens > 0)
    for (const data::StreamTokens& v : s->ds.valid_streams)
      s->valid_streams.push_back(data::cap_stream(v, c.eval.stream_tokens, c.eval.stream_tokens));
  if (job.resume)
    if (const std::string why = corpus_mismatch(job.resume->meta_value("data_sha256"), s->ds, checkpoint); !why.empty())
      throw std::invalid_argument("train --resume: " + why + "; resume from the folder the run started in");
  return s;
}

// The model and optimiser state, and rank 0's log, once every rank has agreed on the run (check_training_ranks).
void start_training(const TrainJob& job, TrainSetup& setup) {
  const RunConfig& c = job.config;
  TrainSetup* s = &setup;
  s->trainer = std::make_unique<ttt::Trainer>(c.model, c.train, s->ds.train, job.device);
  if (job.resume) s->trainer->restore(*job.resume);
  if (dist::rank() == 0) {
    s->log = std::make_unique<MetricsLog>(job.out_dir);
    nlohmann::ordered_json head = header(job, s->ds, *s->trainer);
    head["ranks"] = dist::size();
    s->log->header(head);
  }
}

// How to continue the run in `dir`: on as many ranks as this one.
std::string resume_command(const std::string& dir) {
  const std::string launcher = dist::size() > 1 ? "mpirun -np " + std::to_string(dist::size()) + " " : "";
  return launcher + "ponder train --out " + dir + " --resume";
}

nlohmann::ordered_json step_line(const ttt::StepReport& r, const ttt::Trainer& trainer) {
  const ttt::StepStats& s = r.stats;
  nlohmann::ordered_json line = {{"type", "step"}, {"step", s.step}, {"loss", s.loss}, {"lr", s.lr},
                                 {"grad_norm", s.grad_norm}, {"tokens_per_s", double(s.tokens) / s.seconds()}};
  if (s.ranks > 1) line["allreduce_s"] = s.comm_s;
  if (r.val) {
    line["val_loss"] = r.val->loss;
    line["val_bpb"] = r.val->bpb;
    line["carry_token_factor"] = trainer.model().carry_factors();  // 0 in a layer: its carried state is dead
  }
  if (r.val_stream) {
    line["val_stream_bpb"] = r.val_stream->bpb;
    line["val_stream_tokens"] = r.val_stream->tokens;
  }
  return line;
}

}  // namespace

TrainOutcome run_train_job(const TrainJob& job) {
  const RunConfig& c = job.config;
  TrainOutcome out;
  out.checkpoint = checkpoint_path(job.out_dir);
  std::unique_ptr<TrainSetup> setup;
  // A failure on any rank before the first step (a file missing on one node) stops every rank with its message.
  dist::together([&] { setup = load_for_training(job, out.checkpoint); });
  check_training_ranks(job, setup->ds);  // every rank got here: a collective is safe
  dist::together([&] { start_training(job, *setup); });
  ttt::Trainer& trainer = *setup->trainer;
  const bool lead = dist::rank() == 0;
  if (lead) {
    std::fprintf(stderr, "train: %s, %lld parameters, %s (%lld train tokens), steps %lld -> %lld, %d threads, "
                 "log %s\n", c.source.c_str(), (long long)trainer.model().num_parameters(), setup->ds.corpus.name.c_str(),
                 (long long)setup->ds.train.num_tokens(), (long long)trainer.step_count(), (long long)c.train.steps,
                 cpu::num_threads(), log_path(job.out_dir).c_str());
    std::fprintf(stderr, "train: device %s\n", describe_device(job.device).c_str());
    if (trainer.frozen_parameters() > 0)
      std::fprintf(stderr, "train: %lld parameter tensors from %s frozen; the rest train\n",
                   (long long)trainer.frozen_parameters(), ttt::init_path(c.train).c_str());
    if (dist::size() > 1)
      std::fprintf(stderr, "train: %d ranks, %lld micro-batch(es) of each step on each\n", dist::size(),
                   (long long)(c.train.grad_accum / dist::size()));
  }

  ttt::TrainLoopOptions opt;
  opt.checkpoint_path = out.checkpoint;
  opt.config_text = c.text;
  opt.meta = {{"commit", job.provenance.commit},   {"version", job.provenance.version},
              {"build_type", job.provenance.build_type}, {"corpus", setup->ds.corpus.name},
              {"data_sha256", setup->ds.corpus.sha256}, {"ranks", std::to_string(dist::size())}};
  opt.valid = setup->valid.get();
  opt.eval.inner = c.eval.inner;
  opt.eval.batch_size = c.eval.batch_size;
  opt.valid_streams = &setup->valid_streams;
  opt.stream_eval.chunk = c.streams.chunk;
  opt.stop_after = job.stop_after;
  const InterruptGuard interrupt;
  MetricsLog* log = setup->log.get();
  // A log that stops taking lines stops the run too, after the next step's checkpoint.
  opt.interrupted = [&] { return interrupt.fired() || (log && !log->ok()); };
  const int64_t end = job.stop_after > 0 ? std::min(job.stop_after, c.train.steps) : c.train.steps;
  Progress progress(trainer.step_count(), end, c.train.log_every);
  out.result = ttt::train_loop(trainer, opt, [&](const ttt::StepReport& r) {
    if (!lead) return;
    progress.update(r, r.val ? trainer.model().carry_factors() : std::vector<double>{});
    const ttt::StepStats& s = r.stats;
    if (s.step % c.train.log_every != 0 && !r.val && s.step != end) return;
    log->step(step_line(r, trainer));
    fault::point("train.log");
  });
  // Every rank stops together (train_loop), each with this message; rank 0 reports it.
  if (out.result.interrupted && log && !log->ok())
    throw dist::SharedError(log->error() + "; stopped after step " + std::to_string(out.result.final_step) +
                            " with checkpoint '" + out.checkpoint + "'; free space, then continue with: " +
                            resume_command(job.out_dir));
  if (out.result.interrupted)
    throw dist::SharedError(std::string(interrupt.signal_name()) + ": interrupted after step " +
                            std::to_string(out.result.final_step) + "; checkpoint '" + out.checkpoint +
                            "'; continue with: " + resume_command(job.out_dir));
  return out;
}

TrainedModel load_trained(const ttt::Checkpoint& ck, const std::string& path, Device device) {
  RunConfig cfg = parse_config(ck.config_text, path + " (its config)");
  TrainedModel m{cfg, ttt::Model(cfg.model, cfg.train.seed), ck.step, ck.meta_value("data_sha256")};
  m.model.to(device);
  ttt::load_parameters(m.model, ck);
  // A model with NaN/Inf weights gives NaN everywhere, and one with finite but huge weights (a damaged or crafted
  // file: no training moves a weight near 1e15) overflows float32 in its first product to the same effect: refuse
  // both here, naming the parameter, instead of reporting "nan bits/byte".
  constexpr double kLargestWeight = 1e15;
  const auto labels = m.model.parameter_labels();
  const auto params = m.model.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    for (double v : params[i].to_vector())
      if (!std::isfinite(v) || std::fabs(v) > kLargestWeight)
        throw std::runtime_error("checkpoint '" + path + "': parameter " + labels[i] + " holds " +
                                 (std::isfinite(v) ? "the value " : "a non-finite value (") + std::to_string(v) +
                                 (std::isfinite(v) ? ", beyond any trained weight (|w| <= 1e15)" : ")") +
                                 "; the model cannot be evaluated");
  return m;
}

ttt::EvalOptions eval_options(const TrainedModel& m, const ttt::InnerRun& inner) {
  ttt::EvalOptions o;
  o.inner = inner;
  o.batch_size = m.config.eval.batch_size;
  o.lr_mult = ttt::ttt_lr_mult(m.config.train, m.config.model, m.step);
  return o;
}

nlohmann::ordered_json eval_json(const ttt::EvalResult& r, const ttt::InnerRun& inner) {
  return {{"schedule", inner.schedule.text},
          {"mode", ttt::mode_name(inner.mode)},
          {"path", ttt::path_name(inner.path)},
          {"windows", r.windows},
          {"tokens", r.tokens},
          {"loss", r.loss},
          {"bpb", r.bpb},
          {"mean_k", r.mean_k},
          {"flops_per_token", r.flops_per_token},
          {"inner_flops_per_token", r.inner_flops_per_token},
          {"inner_flops", {{"inner_forward", r.inner.inner_forward}, {"inner_grad", r.inner.inner_grad},
                           {"update", r.inner.update}, {"output", r.inner.output}}},
          {"flops_by_category", {{"matmul", r.flops.category(FlopCat::Matmul)},
                                 {"elementwise", r.flops.category(FlopCat::Elementwise)},
                                 {"reduction", r.flops.category(FlopCat::Reduction)}}},
          {"seconds", r.seconds},
          {"position_loss", r.position_loss}};
}

namespace {

// What to do with the checkpoint at `path`: use it when it is a finished run of `cfg` by this build,
// continue it when that run was interrupted, train afresh when it is `cfg` trained by another build (saying so on
// stderr). A checkpoint of another config, or one that cannot be read, is another run's: it is refused, not
// deleted (--retrain replaces it).
enum class Cached { Reuse, Resume, Retrain };
Cached inspect(const std::string& path, const RunConfig& cfg, const std::string& commit, ttt::Checkpoint& ck) {
  if (!std::filesystem::exists(path)) return Cached::Retrain;
  std::string foreign;
  try {
    ck = ttt::load_checkpoint(path);
    if (ck.config_text != cfg.text) foreign = "its config differs from " + cfg.source;
  } catch (const std::exception& e) {
    foreign = std::string("it cannot be read (") + e.what() + ")";
  }
  if (!foreign.empty())
    throw std::runtime_error("'" + path + "' holds another run: " + foreign + "; pass --retrain to replace it, or " +
                             "choose another --out");
  if (ck.meta_value("commit") == commit) return ck.step < cfg.train.steps ? Cached::Resume : Cached::Reuse;
  std::fprintf(stderr, "not reusing %s: the same config, trained by commit %s; training it again with this build\n",
               path.c_str(), ck.meta_value("commit").c_str());
  return Cached::Retrain;
}

}  // namespace

void check_corpus(const TrainedModel& m, const Dataset& ds, const std::string& checkpoint, bool other_corpus) {
  if (other_corpus) return;
  if (const std::string why = corpus_mismatch(m.data_sha256, ds, checkpoint); !why.empty())
    throw std::invalid_argument(why + "; run from the training's folder, or pass --other-corpus to read this one on "
                                      "purpose");
}

TrainedModel train_or_reuse(const RunConfig& cfg, const std::string& dir, bool retrain, Device device,
                            const Provenance& by, bool& reused) {
  const std::string ckpt = checkpoint_path(dir);
  ttt::Checkpoint cached;
  const Cached state = retrain ? Cached::Retrain : inspect(ckpt, cfg, by.commit, cached);
  reused = state == Cached::Reuse;
  if (reused) {
    std::fprintf(stderr, "reusing %s (same config and commit)\n", ckpt.c_str());
  } else {
    if (state == Cached::Retrain) {
      std::filesystem::remove(ckpt);
      std::filesystem::remove(log_path(dir));
      std::filesystem::remove(csv_log_path(dir));
    }
    TrainJob job;
    job.config = cfg;
    job.out_dir = dir;
    job.resume = state == Cached::Resume ? &cached : nullptr;
    job.provenance = by;
    job.device = device;
    run_train_job(job);
  }
  return load_trained(ttt::load_checkpoint(ckpt), ckpt, device);
}


}  // namespace ponder::cli
