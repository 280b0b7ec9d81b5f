// What several processes rest on, checked in one: the collectives of a single rank, the positions a rank skips to
// (windows and schedule draws of the micro-batches before its own), how the cells of a comparison are dealt to shards,
// --shard's parsing and the command line a shard records. The runs over real ranks are tests/cli_mpi.py's.
#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>

#include "autograd/engine.h"
#include "autograd/grad_sync.h"
#include "autograd/ops.h"
#include "experiments/process/command_line.h"
#include "experiments/study/compare.h"
#include "experiments/model/config.h"
#include "experiments/study/shard.h"
#include "experiments/model/training.h"
#include "tensor/dist.h"
#include "ttt/train.h"
#include "test_util.h"

using namespace ponder;
using ponder::test::error_of;

TEST_CASE("one rank: every collective returns its input, and an error keeps its type") {
  CHECK(dist::rank() == 0);
  CHECK(dist::size() == 1);
  std::vector<float> buf = {1.5f, -2.0f, 3.25f};
  dist::sum_in_rank_order(buf);
  CHECK(buf == std::vector<float>{1.5f, -2.0f, 3.25f});
  CHECK(dist::allgather(std::vector<double>{0.5, 7}) == std::vector<double>{0.5, 7});
  CHECK(dist::allgather(std::vector<uint64_t>{3}) == std::vector<uint64_t>{3});
  CHECK(dist::any(true));
  CHECK_FALSE(dist::any(false));
  CHECK(dist::first_message("why") == "why");
  CHECK_THROWS_AS(dist::first_error("why"), dist::SharedError);
  CHECK_NOTHROW(dist::first_error(""));
  CHECK_THROWS_AS(dist::together([] { throw std::invalid_argument("bad"); }), std::invalid_argument);
  // The gradients of one rank are left as they are.
  Tensor p = Tensor::from_vector({1, 2}, {2});
  set_requires_grad(p);
  backward(sum(mul(p, p)));
  sum_gradients_over_ranks({p});
  CHECK(grad_of(p).to_vector() == std::vector<double>{2, 4});
}

TEST_CASE("a sampler sought to micro-batch m gives the batch one process draws m-th") {
  const cli::Dataset ds = cli::load_dataset(cli::DataConfig{});
  data::WindowSampler a(ds.train, 4, 64, 11), b(ds.train, 4, 64, 11);
  const uint64_t start = a.state();
  a.next();
  a.next();
  const data::Batch third = a.next();
  b.seek(start, 2);
  const data::Batch sought = b.next();
  CHECK(sought.input.to_ints() == third.input.to_ints());
  CHECK(sought.target.to_ints() == third.target.to_ints());
  CHECK(b.state() == a.state());
}

TEST_CASE("a step draws the windows and schedule counts the ranks skip over: batch_size and layers × units each") {
  cli::RunConfig c = cli::load_config(cli::resolve_config("ci"));
  c.train.grad_accum = 3;
  REQUIRE_FALSE(c.train.step_options.empty());
  const cli::Dataset ds = cli::load_dataset(c.data);
  ttt::Trainer t(c.model, c.train, ds.train);
  const ttt::Checkpoint before = t.checkpoint("", {});
  t.step();
  const ttt::Checkpoint after = t.checkpoint("", {});
  CHECK(after.sampler_state - before.sampler_state == uint64_t(3 * c.train.batch_size));
  const int64_t units = c.train.seq_len / c.model.mini_batch;
  CHECK(after.schedule_state - before.schedule_state == uint64_t(3 * t.model().num_ttt_layers() * units));
}

TEST_CASE("--shard i/n: 0-based, and each malformed form is an error naming it") {
  const cli::Shard s = cli::parse_shard("1/3");
  CHECK(s.index == 1);
  CHECK(s.count == 3);
  CHECK(s.text() == "1/3");
  CHECK(cli::parse_shard("0/1").whole());
  CHECK(error_of([] { cli::parse_shard("3/2"); }).find("--shard 3/2: the shard index must lie in 0..1") == 0);
  CHECK(error_of([] { cli::parse_shard("2/2"); }).find("must lie in 0..1") != std::string::npos);
  CHECK(error_of([] { cli::parse_shard("0/0"); }).find("n must be at least 1") != std::string::npos);
  for (const char* bad : {"1of2", "-1/2", "/2", "1/", "a/b", "1/2/3", ""})
    CHECK(error_of([&] { cli::parse_shard(bad); }).find("expected i/n") != std::string::npos);
}

TEST_CASE("the cells of a comparison: the oracle by seed, other methods whole, the frontier's sweep but μ = 0, and no "
          "frontier without the oracle") {
  cli::CompareOptions opt;
  opt.methods = methods::parse_methods({"oracle", "uniform-1", "random"});
  opt.seeds = 3;
  opt.frontier_mus = {0.0, 0.1, 0.5};
  CHECK(cli::compare_cells(opt) == std::vector<std::string>{"run oracle seed 0", "run oracle seed 1",
                                                            "run oracle seed 2", "method uniform-1", "method random",
                                                            "frontier mu 0.1", "frontier mu 0.5"});
  opt.streams = true;  // the later seeds repeat seed 0
  CHECK(cli::compare_cells(opt).size() == 5);
  opt.oracle_mu = 0.1;  // the frontier's point at μ 0.1 is now the oracle's run, and μ = 0 a cell of its own
  CHECK(cli::compare_cells(opt) == std::vector<std::string>{"run oracle seed 0", "method uniform-1", "method random",
                                                            "frontier mu 0.0", "frontier mu 0.5"});
  opt.oracle_mu = 0;
  opt.methods = methods::parse_methods({"uniform-1"});  // no oracle: no frontier to search (each point is an oracle pass)
  CHECK(cli::compare_cells(opt) == std::vector<std::string>{"method uniform-1"});
}

TEST_CASE("the shards own every cell of every model once, in shares that differ by at most one") {
  const int64_t models = 3, cells = 7;
  for (int n = 1; n <= 5; ++n) {
    std::vector<int64_t> load(size_t(n), 0);
    for (int64_t m = 0; m < models; ++m)
      for (int64_t c = 0; c < cells; ++c) {
        int owners = 0;
        for (int i = 0; i < n; ++i)
          if (cli::cell_share({i, n}, m, cells).owns(c)) {
            ++owners;
            ++load[size_t(i)];
          }
        CHECK(owners == 1);
      }
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    CHECK(*hi - *lo <= 1);
  }
}

TEST_CASE("a shard records its command without --out, --shard and --jobs, in either form") {
  cli::set_command_line({"--threads", "1", "compare", "--out", "x", "--shard", "0/2", "--jobs=2", "--seeds", "3",
                         "--out=y", "--shard=1/2", "--jobs", "4", "--set", "a=b c"});
  CHECK(cli::results_command_args() == std::vector<std::string>{"--threads", "1", "compare", "--seeds", "3", "--set",
                                                                "a=b c"});
  CHECK(cli::results_command_line() == "ponder --threads 1 compare --seeds 3 --set 'a=b c'");
  CHECK(cli::command_line().find("--shard 0/2") != std::string::npos);
}
