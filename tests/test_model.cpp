// The language model: causality of attention, TTT and hybrid stacks under random schedules, the
// config's error messages, and a short training run that learns.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/optim.h"
#include "model_fixtures.h"
#include "tensor/flops.h"
#include "ttt/flop_profile.h"
#include "ttt/model.h"
#include "ttt/rope.h"
#include "ttt/step_trace.h"
#include "ttt/stream_eval.h"

using namespace ponder;
using namespace ponder::ttt;

namespace {
// Mamba backbone with the pre-conv unless the test says otherwise: the most code on the path.
ModelConfig small(std::vector<std::string> mixers, std::string backbone = "mamba") {
  return test::test_model(std::move(mixers), std::move(backbone), true);
}
using test::random_ids;
}  // namespace

TEST_CASE("causality of attention, TTT and hybrid models under random schedules") {
  const std::vector<std::vector<std::string>> stacks = {
      {"attention", "attention"}, {"ttt", "ttt"}, {"attention", "ttt", "ttt", "attention"}};
  for (const auto& mixers : stacks)
    for (StepMode mode : {StepMode::Carry, StepMode::Prefix}) {
      INFO("layers ", mixers.size(), " prefix ", mode == StepMode::Prefix);
      Model model(small(mixers, mixers.size() == 2 ? "transformer" : "mamba"), 3, DType::F64);
      Generator gen(4);
      Tensor ids = random_ids(gen, 2, 16, 32);
      FixedSchedule sched({2, 0, 1, 3});
      TTTRun run;
      run.path = InnerPath::Iterative;
      run.mode = mode;
      run.schedule = &sched;
      NoGradGuard ng;
      Tensor y0 = model.forward(ids, run);
      for (int64_t t : {2, 5, 9}) {
        auto v = ids.to_ints();
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t i = t + 1; i < 16; ++i) v[size_t(b * 16 + i)] = (v[size_t(b * 16 + i)] + 7) % 32;
        Tensor y1 = model.forward(Tensor::from_ints(v, {2, 16}), run);
        auto a = raw::contiguous(raw::slice(y0, 1, 0, t + 1)).to_vector();
        auto b = raw::contiguous(raw::slice(y1, 1, 0, t + 1)).to_vector();
        double err = 0;
        for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(a[i] - b[i]));
        CHECK(err < 1e-12);
      }
    }
}

// The tables are cached by the positions they hold (ttt/rope.cpp): offsets 5 and 21 share one at period 16 and not at
// period 0, a repeated offset is a hit, and after more tables than the cache keeps it starts over.
TEST_CASE("rope rotates pair i of token t by ((offset + t) % period) * theta^(-2i/f)") {
  const int64_t N = 37, f = 6;  // more than two periods, so rows copied from earlier ones are checked
  Generator gen(3);
  Tensor x = gen.normal({1, 2, N, f}, 0, 1, DType::F64);  // (B, H, N, f)
  const auto in = x.to_vector();
  auto check = [&](int64_t period, int64_t offset) {
    CAPTURE(period);
    CAPTURE(offset);
    const auto out = rope(x, period, 10000.0, offset).to_vector();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < N; ++t)
        for (int64_t i = 0; i < f / 2; ++i) {
          const double p = double(period > 0 ? (offset + t) % period : offset + t);
          const double ang = p * std::pow(10000.0, -2.0 * double(i) / double(f));
          const size_t e = size_t((h * N + t) * f + 2 * i);
          CHECK(out[e] == doctest::Approx(in[e] * std::cos(ang) - in[e + 1] * std::sin(ang)).epsilon(1e-14));
          CHECK(out[e + 1] == doctest::Approx(in[e] * std::sin(ang) + in[e + 1] * std::cos(ang)).epsilon(1e-14));
        }
  };
  for (int64_t period : {0, 16}) {
    for (int64_t offset : {5, 21, 0, 5}) check(period, offset);
    for (int64_t o = 100; o < 400; ++o) (void)rope(x, period, 10000.0, o);  // more tables than the cache keeps
    check(period, 7);
  }
}

TEST_CASE("model config errors name the field") {
  ModelConfig c = small({"ttt"});
  c.heads = 3;
  CHECK_THROWS_WITH(Model(c, 1), doctest::Contains("heads"));
  c = small({"ttt", "lstm"});
  CHECK_THROWS_WITH(Model(c, 1), doctest::Contains("'lstm'"));
  c = small({"ttt"});
  c.inner = "cubic";
  CHECK_THROWS_WITH(Model(c, 1), doctest::Contains("inner"));
  Model m(small({"ttt"}), 1);
  CHECK_THROWS_WITH(m.forward(Tensor::from_ints({1, 2, 3}, {1, 3})), doctest::Contains("multiple of the mini-batch"));
}

TEST_CASE("a hybrid model learns a repeating sequence in a few AdamW steps") {
  Model model(small({"ttt", "attention"}), 5);
  std::vector<int64_t> v;
  for (int i = 0; i < 2 * 17; ++i) v.push_back((i * 5) % 11);
  Tensor seq = Tensor::from_ints(v, {2, 17});
  Tensor x = raw::slice(seq, 1, 0, 16), y = raw::slice(seq, 1, 1, 17);
  AdamW opt(model.parameters(), 3e-2, 0.9, 0.95, 1e-8, 0.0);
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss = mean(model.token_losses(x, y));
    if (step == 0) first = loss.item();
    last = loss.item();
    opt.zero_grad();
    backward(loss);
    opt.step();
  }
  CHECK(first > 2.5);  // about ln 32 at initialisation
  CHECK(last < 0.5 * first);
}

TEST_CASE("feeding a sequence unit by unit gives the whole-sequence logits") {
  const std::vector<std::vector<std::string>> stacks = {{"ttt", "attention"}, {"attention", "ttt", "ttt"}};
  for (const auto& mixers : stacks)
    for (InnerPath path : {InnerPath::Dual, InnerPath::Iterative}) {
      Model model(small(mixers), 8, DType::F64);
      Generator gen(9);
      Tensor ids = random_ids(gen, 2, 16, 32);
      FixedSchedule sched({1, 0, 2, 1});
      TTTRun run;
      run.path = path;
      run.schedule = &sched;
      NoGradGuard ng;
      Tensor whole = model.forward(ids, run);
      ModelState st;
      std::vector<Tensor> parts;
      for (int64_t u = 0; u < 4; ++u) parts.push_back(model.forward_chunk(raw::slice(ids, 1, 4 * u, 4 * u + 4), st, run));
      Tensor chunked = raw::cat(parts, 1);
      auto a = whole.to_vector(), b = chunked.to_vector();
      double err = 0;
      for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(a[i] - b[i]));
      CHECK(err < 1e-12);
      CHECK(st.tokens == 16);
    }
}

TEST_CASE("Model::to(Device::CPU) on a CPU model is a no-op: same tensors, same storage, same logits") {
  Model model(small({"ttt", "attention"}), 5);
  Generator gen(3);
  Tensor ids = random_ids(gen, 2, 16, 32), targets = random_ids(gen, 2, 16, 32);
  const std::vector<double> before = model.forward(ids).to_vector();
  const std::vector<Tensor> params = model.parameters();
  AdamW opt(model.parameters(), 1e-2);  // with state, a gradient and a step behind it
  backward(mean(model.token_losses(ids, targets)));
  opt.step();
  const std::vector<double> stepped = model.forward(ids).to_vector();
  const Tensor m0 = opt.exp_avg()[0], g0 = grad_of(params[0]);
  std::vector<const void*> data;
  std::vector<uint32_t> versions;
  for (const Tensor& p : params) {
    data.push_back(p.storage().data);
    versions.push_back(p.version());
  }

  CHECK(model.device() == Device::CPU);
  CHECK(&model.to(Device::CPU) == &model);
  opt.to(Device::CPU);
  const std::vector<Tensor> after = model.parameters();
  REQUIRE(after.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(after[i].same(params[i]));
    CHECK(after[i].storage().data == data[i]);
    CHECK(after[i].version() == versions[i]);
    CHECK(requires_grad(after[i]));
  }
  CHECK(opt.exp_avg()[0].same(m0));
  CHECK(grad_of(params[0]).same(g0));
  CHECK(model.forward(ids).to_vector() == stepped);
  CHECK(stepped != before);
  // Only leaves move in place, whatever the device.
  Tensor derived = mul(params[0], params[0]);
  CHECK_THROWS_WITH(move_to_device_(derived, Device::CPU), doctest::Contains("only a leaf tensor"));
}

TEST_CASE("sliding-window attention: full attention when the window covers the sequence, local otherwise, and the same "
          "fed in chunks") {
  ModelConfig full = test::test_model({"attention", "attention"}), local = full, wide = full;  // no pre-conv
  local.attn_window = 6;
  wide.attn_window = 16;
  Model mf(full, 3, DType::F64), ml(local, 3, DType::F64), mw(wide, 3, DType::F64);
  Generator gen(4);
  Tensor ids = random_ids(gen, 2, 16, 32);
  NoGradGuard ng;
  const auto yf = mf.forward(ids).to_vector(), yw = mw.forward(ids).to_vector(), yl = ml.forward(ids).to_vector();
  double wide_err = 0, local_diff = 0;
  for (size_t i = 0; i < yf.size(); ++i) {
    wide_err = std::max(wide_err, std::abs(yf[i] - yw[i]));
    local_diff = std::max(local_diff, std::abs(yf[i] - yl[i]));
  }
  CHECK(wide_err < 1e-12);
  CHECK(local_diff > 1e-3);
  // Two layers of window 6: position t sees tokens t − 10 … t. Changing token 2 leaves positions ≥ 13 alone
  // and changes position 12.
  auto v = ids.to_ints();
  for (int64_t b = 0; b < 2; ++b) v[size_t(b * 16 + 2)] = (v[size_t(b * 16 + 2)] + 5) % 32;
  const auto y2 = ml.forward(Tensor::from_ints(v, {2, 16})).to_vector();
  const int64_t V = 32;
  auto max_at = [&](int64_t t) {
    double m = 0;
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < V; ++k) m = std::max(m, std::abs(yl[size_t((b * 16 + t) * V + k)] - y2[size_t((b * 16 + t) * V + k)]));
    return m;
  };
  CHECK(max_at(12) > 1e-6);
  for (int64_t t = 13; t < 16; ++t) CHECK(max_at(t) == 0.0);
  // Chunked with a trimmed cache: the same logits as the whole sequence.
  ModelState st;
  std::vector<Tensor> parts;
  for (int64_t c = 0; c < 4; ++c) parts.push_back(ml.forward_chunk(raw::slice(ids, 1, 4 * c, 4 * c + 4), st, {}));
  const auto yc = raw::cat(parts, 1).to_vector();
  double chunk_err = 0;
  for (size_t i = 0; i < yc.size(); ++i) chunk_err = std::max(chunk_err, std::abs(yc[i] - yl[i]));
  CHECK(chunk_err < 1e-12);
  CHECK(st.kv[0].k.shape()[2] == 5);  // window − 1 positions kept
}

TEST_CASE("stream evaluation with a carried state equals the whole-sequence forward on the concatenated stream") {
  for (const auto& mixers : std::vector<std::vector<std::string>>{{"ttt", "ttt"}, {"attention", "ttt"}}) {
    ModelConfig cfg = test::test_model(mixers);
    cfg.attn_window = 12;
    Model model(cfg, 7, DType::F64);
    Generator gen(11);
    const std::vector<int64_t> ids = random_ids(gen, 1, 43, 32).to_ints();  // 42 predictions: not a multiple of 4
    data::StreamTokens s{"s", {}, 10};
    for (int64_t v : ids) s.tokens.push_back(int32_t(v));
    StreamEvalOptions opt;
    opt.chunk = 8;
    opt.inner.schedule = ttt::parse_schedule("uniform-2");
    std::vector<double> progress;
    opt.progress = [&](double f) { progress.push_back(f); };
    const StreamEvalResult r = evaluate_streams(model, {s}, opt);
    // Progress after every chunk of 8 predictions (the last one short), ending at the whole stream's 43 tokens.
    CHECK(progress == std::vector<double>{8 / 43.0, 16 / 43.0, 24 / 43.0, 32 / 43.0, 40 / 43.0, 1.0});
    // The whole stream in one forward pass (padded to 44 inputs), scored from token 10 on.
    std::vector<int64_t> in(ids.begin(), ids.end() - 1), tgt(ids.begin() + 1, ids.end());
    in.resize(44, 0);
    tgt.resize(44, 0);
    UniformSchedule two(2);
    TTTRun run;
    run.schedule = &two;
    NoGradGuard ng;
    const std::vector<double> whole =
        model.token_losses(Tensor::from_ints(in, {1, 44}), Tensor::from_ints(tgt, {1, 44}), run).to_vector();
    double sum = 0;
    for (int64_t t = 9; t < 42; ++t) sum += whole[size_t(t)];  // input t predicts token t + 1
    CHECK(r.tokens == 33);
    CHECK(r.read == 42);
    CHECK(r.loss == doctest::Approx(sum / 33).epsilon(1e-12));
    // Every prediction read is binned: [1, 2), [2, 4), … [32, 64) hold positions 1, 2–3, …, 32–42.
    REQUIRE(r.by_position.lo.size() == 6);
    CHECK(r.by_position.count[0] == 1);
    CHECK(r.by_position.count[3] == 8);
    CHECK(r.by_position.count[4] == 16);
    CHECK(r.by_position.count[5] == 11);
    double bin = 0;
    for (int64_t t = 7; t < 15; ++t) bin += whole[size_t(t)];  // positions 8–15
    CHECK(r.by_position.mean(3) == doctest::Approx(bin / 8).epsilon(1e-12));
  }
}

TEST_CASE("streams read side by side give the bits and FLOPs they give one after another") {
  Model model(test::test_model({"ttt", "attention"}), 8, DType::F32);
  Generator gen(12);
  std::vector<data::StreamTokens> streams;
  for (int64_t n : {43, 120, 17, 77, 64}) {
    data::StreamTokens s{"s" + std::to_string(n), {}, n / 3};
    for (int64_t v : random_ids(gen, 1, n, 32).to_ints()) s.tokens.push_back(int32_t(v));
    streams.push_back(s);
  }
  auto read = [&](int jobs, std::vector<double>& progress) {
    StreamEvalOptions opt;
    opt.chunk = 16;
    opt.inner.schedule = ttt::parse_schedule("uniform-2");
    opt.jobs = jobs;
    opt.progress = [&](double f) { progress.push_back(f); };
    return evaluate_streams(model, streams, opt);
  };
  std::vector<double> p1, p3;
  const StreamEvalResult a = read(1, p1), b = read(3, p3);
  CHECK(a.loss == b.loss);
  CHECK(a.stream_bpb == b.stream_bpb);
  CHECK(a.stream_tokens == b.stream_tokens);
  CHECK(a.by_position.loss_sum == b.by_position.loss_sum);
  CHECK(a.by_position.count == b.by_position.count);
  CHECK(a.read == b.read);
  CHECK(a.inner.total() == b.inner.total());
  CHECK(a.inner.total() > 0);
  CHECK(a.flops.total() == b.flops.total());  // the workers' counts reach the caller
  CHECK(p3.size() == p1.size());
  for (size_t i = 1; i < p3.size(); ++i) CHECK(p3[i] >= p3[i - 1]);
  CHECK(p3.back() == doctest::Approx(1.0));
}

TEST_CASE("streams read with the state reset at every document: each document's reads alone, nothing before it "
          "seen, summed per stream") {
  Model model(test::test_model({"ttt", "attention"}), 9, DType::F64);
  Generator gen(13);
  std::vector<data::StreamTokens> streams;
  for (const auto& [n, starts] : std::vector<std::pair<int64_t, std::vector<int64_t>>>{
           {70, {20, 33, 50}}, {41, {}}, {90, {5, 6, 64}}}) {
    data::StreamTokens s{"s" + std::to_string(n), {}, 30, starts};
    for (int64_t v : random_ids(gen, 1, n, 32).to_ints()) s.tokens.push_back(int32_t(v));
    streams.push_back(s);
  }
  StreamEvalOptions opt;
  opt.chunk = 16;
  opt.inner.schedule = ttt::parse_schedule("uniform-1");
  opt.reset_at_documents = true;
  const StreamEvalResult r = evaluate_streams(model, streams, opt);
  // The same as reading the pieces as streams of their own, then gathering them per stream.
  std::vector<data::StreamTokens> pieces;
  std::vector<size_t> owner;
  for (size_t i = 0; i < streams.size(); ++i)
    for (const data::StreamTokens& p : data::split_at_documents(streams[i])) pieces.push_back(p), owner.push_back(i);
  StreamEvalOptions alone = opt;
  alone.reset_at_documents = false;
  const StreamEvalResult direct = evaluate_streams(model, pieces, alone);
  CHECK(r.streams == 3);
  CHECK(r.pieces == int64_t(pieces.size()));
  CHECK(r.pieces == 6);  // scored from 30: s70's documents from 20, 33 and 50; s41 itself; s90's from 6 and 64
  CHECK(r.tokens == direct.tokens);
  CHECK(r.tokens == 40 + 11 + 60);  // every scored prediction of the streams, once
  CHECK(r.loss == doctest::Approx(direct.loss).epsilon(1e-12));
  CHECK(r.read == direct.read);
  CHECK(r.inner.total() == direct.inner.total());
  for (size_t i = 0; i < streams.size(); ++i) {
    double sum = 0;
    int64_t n = 0;
    for (size_t j = 0; j < pieces.size(); ++j)
      if (owner[j] == i) sum += direct.stream_bpb[j] * double(direct.stream_tokens[j]), n += direct.stream_tokens[j];
    CHECK(r.stream_tokens[i] == n);
    CHECK(r.stream_bpb[i] == doctest::Approx(sum / double(n)).epsilon(1e-12));
  }
  // A reset means it: changing every token of the first stream's documents before 49 (the token before document 50,
  // its lead, stays) leaves that document's predictions as they were, while the carried read sees the change.
  std::vector<data::StreamTokens> changed = streams;
  for (size_t t = 0; t < 49; ++t) changed[0].tokens[t] = (changed[0].tokens[t] + 7) % 32;
  changed[0].first_scored = 50;
  std::vector<data::StreamTokens> last = streams;
  last[0].first_scored = 50;
  CHECK(evaluate_streams(model, changed, opt).stream_bpb[0] == evaluate_streams(model, last, opt).stream_bpb[0]);
  StreamEvalOptions carried = opt;
  carried.reset_at_documents = false;
  CHECK(evaluate_streams(model, changed, carried).stream_bpb[0] != evaluate_streams(model, last, carried).stream_bpb[0]);
  // Without the reset the starts change nothing; with it the thread count changes no bit.
  std::vector<data::StreamTokens> no_starts = streams;
  for (data::StreamTokens& s : no_starts) s.doc_starts.clear();
  CHECK(evaluate_streams(model, no_starts, carried).stream_bpb == evaluate_streams(model, streams, carried).stream_bpb);
  StreamEvalOptions three = opt;
  three.jobs = 3;
  const StreamEvalResult r3 = evaluate_streams(model, streams, three);
  CHECK(r3.loss == r.loss);
  CHECK(r3.stream_bpb == r.stream_bpb);
  CHECK(r3.by_position.loss_sum == r.by_position.loss_sum);
  CHECK(r3.flops.total() == r.flops.total());
}

TEST_CASE("FLOPs by section: in forward order, adding up to the pass's total, inner steps counted in the mixer") {
  Model model(small({"ttt", "attention"}, "transformer"), 3, DType::F64);
  Generator gen(5);
  const Tensor ids = random_ids(gen, 1, 16, 32);
  auto profile = [&](int k) {
    UniformSchedule sched(k);
    TTTRun run;
    run.schedule = &sched;
    return forward_flops_by_section(model, ids, run);
  };
  const auto one = profile(1), two = profile(2);
  std::vector<std::string> names;
  for (const auto& s : one) names.push_back(s.first);
  CHECK(names == std::vector<std::string>{"embedding", "block0.seq_norm", "block0.ttt", "block0.ffn", "block1.seq_norm",
                                          "block1.attention", "block1.ffn", "final_norm", "logits"});
  uint64_t sum = 0;
  for (const auto& s : one) sum += s.second;
  UniformSchedule sched(1);
  TTTRun run;
  run.schedule = &sched;
  NoGradGuard ng;
  const FlopScope scope;
  model.forward(ids, run);
  CHECK(sum == scope.counts().total());  // watching the pass changes nothing it computes
  REQUIRE(two.size() == one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO(one[i].first);
    if (one[i].first == "block0.ttt") CHECK(two[i].second > one[i].second);  // the second inner step
    else CHECK(two[i].second == one[i].second);
  }
}

TEST_CASE("a traced training step: the forward sections of the profile, every backward FLOP in a section") {
  Model model(small({"ttt", "attention"}, "transformer"), 3, DType::F64);
  Generator gen(5);
  const Tensor ids = random_ids(gen, 1, 16, 32), targets = random_ids(gen, 1, 16, 32);
  UniformSchedule sched(2);
  TTTRun run;
  run.schedule = &sched;
  const auto profile = forward_flops_by_section(model, ids, run);
  for (bool norms : {false, true}) {
    for (const Tensor& p : model.parameters()) zero_grad(p);
    const StepTrace t = trace_step(model, ids, targets, run, norms);
    REQUIRE(t.sections.size() == profile.size());
    uint64_t fwd = 0, bwd = 0;
    for (size_t i = 0; i < profile.size(); ++i) {
      INFO(profile[i].first);
      fwd += t.sections[i].forward;
      bwd += t.sections[i].backward;
      if (i + 1 < profile.size()) {
        CHECK(t.sections[i].name == profile[i].first);
        CHECK(t.sections[i].forward == profile[i].second);  // recording the graph changes no FLOP
      } else {
        CHECK(t.sections[i].name == "logits+loss");
        CHECK(t.sections[i].forward > profile[i].second);  // the logits and the cross-entropy after them
      }
      if (profile[i].first != "embedding") CHECK(t.sections[i].backward > 0);
    }
    CHECK(fwd == t.forward_total);
    CHECK(bwd == t.backward_total);
    // A gradient reaches every parameter, each through its own accumulator, named as parameter_labels() names it.
    std::vector<std::string> seen;
    for (const TraceEntry& e : t.nodes)
      if (!e.label.empty()) seen.push_back(e.label);
    std::vector<std::string> labels = model.parameter_labels();
    std::sort(seen.begin(), seen.end());
    std::sort(labels.begin(), labels.end());
    CHECK(seen == labels);
  }
}

TEST_CASE("a unit's further carry steps taken after it is scored: K steps exactly, its outputs untouched") {
  // One mini-batch a unit: its first step, then extra_steps(K − 1), is the schedule's K-step unit (TTT-Linear and
  // TTT-MLP, both inner paths); the next unit then reads the same state. Several mini-batches: the further steps run at
  // the unit's end, so they differ from K per mini-batch, and their cost is K − 1 steps on each mini-batch.
  for (const char* inner : {"linear", "mlp"})
    for (InnerPath path : {InnerPath::Dual, InnerPath::Iterative}) {
      INFO(inner);
      Model model(test::test_model({"ttt", "attention", "ttt"}, "transformer", false, inner), 3, DType::F64);
      Generator gen(4);
      const Tensor ids = random_ids(gen, 1, 8, 32);
      const Tensor first = raw::slice(ids, 1, 0, 4), next = raw::slice(ids, 1, 4, 8);
      NoGradGuard ng;
      UniformSchedule three(3), one(1);
      TTTRun whole, staged;
      whole.path = staged.path = path;
      whole.schedule = &three;
      staged.schedule = &one;
      staged.keep_chunk = true;
      ModelState a, b;
      const std::vector<double> out_a = model.forward_chunk(first, a, whole).to_vector();
      const std::vector<double> out_b = model.forward_chunk(first, b, staged).to_vector();
      std::vector<UnitCost> costs;
      model.extra_steps(b, 2, staged, &costs);
      REQUIRE(costs.size() == 2);  // one per TTT layer
      CHECK((costs[0].steps == 2 && costs[0].inner_grad > 0 && costs[0].output == 0));
      double d_out = 0, d_next = 0;
      for (size_t i = 0; i < out_a.size(); ++i) d_out = std::max(d_out, std::abs(out_a[i] - out_b[i]));
      const std::vector<double> na = model.forward_chunk(next, a, staged).to_vector(),
                                nb = model.forward_chunk(next, b, staged).to_vector();
      for (size_t i = 0; i < na.size(); ++i) d_next = std::max(d_next, std::abs(na[i] - nb[i]));
      CHECK(d_out < 1e-12);
      CHECK(d_next < 1e-12);
    }
  // Without the chunk kept there is nothing to step on.
  Model model(test::test_model({"ttt"}), 3, DType::F64);
  ModelState st;
  Generator gen(5);
  model.forward_chunk(random_ids(gen, 1, 4, 32), st, {});
  CHECK_THROWS_WITH_AS(model.extra_steps(st, 1, {}, nullptr), doctest::Contains("keep_chunk"), std::logic_error);
}
