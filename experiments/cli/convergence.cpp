// `ponder convergence` (docs/method.md §5.1): how many inner gradient steps a unit's problem needs. For each
// unit and TTT-Linear layer, the inner loss without LayerNorm is least squares in (W, b1); we solve it in
// closed form and run gradient descent from the weights carried into the unit, recording the gap
// (ℓ(W_K) − ℓ*) / (ℓ(W_0) − ℓ*). Stated choices: rows weighted w_j = 1/b (not the layer's η) and
// step = 1/λ_max of the problem's Hessian (power iteration), the largest step that never overshoots;
// so the counts measure the problem's conditioning, not the layer's learned step size.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "autograd/grad_mode.h"
#include "data/windows.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/study/convergence.h"
#include "experiments/study/result_util.h"
#include "experiments/model/training.h"
#include "tensor/kernels.h"
#include "util/files.h"

namespace ponder::cli {
namespace cmd_convergence {
namespace {

struct ConvergenceArgs {
  std::string checkpoint;
  std::string out = "results/convergence";
  int64_t units = 32;
  int max_k = 256;
};

constexpr double kTol = 0.01;

struct LayerStats {
  std::vector<int64_t> first_below;  // per (unit, head); −1: not within max_k
  std::vector<double> gap_sum;       // per K in the checkpoints
  int64_t problems = 0, ridged = 0, skipped = 0;
  double step_min = 1e300, step_max = 0;
};

// Nearest-rank quantile of first-below counts; −1 (not reached) sorts last.
int64_t quantile(std::vector<int64_t> v, double q) {
  if (v.empty()) return -1;
  for (int64_t& x : v)
    if (x < 0) x = INT64_MAX;
  std::sort(v.begin(), v.end());
  const size_t i = size_t(std::max(0.0, std::ceil(q * double(v.size())) - 1));
  return v[i] == INT64_MAX ? -1 : v[i];
}

// One head's problem of one unit: the least-squares fit of XV − XK from XK, gradient descent from the carried
// weights `theta0` (W row-major, then b1) checked against its closed-form optimum.
void add_problem(LayerStats& s, const std::vector<double>& xk, const std::vector<double>& xv, std::vector<double> theta0,
                 int64_t h, int64_t b, int64_t f, const std::vector<int>& at, int max_k) {
  LstsqProblem p{b, f, {}, {}, std::vector<double>(size_t(b), 1.0 / double(b))};
  for (int64_t i = 0; i < b * f; ++i) {
    p.X.push_back(xk[size_t(h * b * f + i)]);
    p.T.push_back(xv[size_t(h * b * f + i)] - xk[size_t(h * b * f + i)]);
  }
  const NormalEquations e = normal_equations(p);
  const std::vector<double> star = solve_spd(e.A, e.n, e.C, e.m);
  const double l0 = lstsq_loss(p, theta0), ls = lstsq_loss(p, star);
  if (!(l0 - ls > 1e-12 * std::max(1.0, std::abs(l0)))) {  // already at the optimum: no gap to close
    ++s.skipped;
    return;
  }
  const Convergence c = gd_convergence(p, theta0, at, max_k, kTol);
  ++s.problems;
  s.ridged += c.ridged;
  s.step_min = std::min(s.step_min, c.step);
  s.step_max = std::max(s.step_max, c.step);
  s.first_below.push_back(c.first_below);
  for (size_t i = 0; i < at.size(); ++i) s.gap_sum[i] += c.gap[i];
}

// Reads `units` units of `input` under uniform-1 (the official TTT) and adds every (unit, layer, head) problem.
std::vector<LayerStats> collect(const TrainedModel& m, const Tensor& input, int64_t units, const std::vector<int>& at,
                                int max_k) {
  const std::vector<const ttt::TTTLayer*> layers = m.model.ttt_layers();
  const int64_t b = m.model.config().mini_batch, H = layers[0]->config().heads, f = layers[0]->config().head_dim();
  std::vector<LayerStats> st(layers.size());
  for (LayerStats& s : st) s.gap_sum.assign(at.size(), 0.0);
  NoGradGuard ng;
  ttt::ModelState state;
  std::vector<size_t> ttt_blocks;  // which entries of state.ttt belong to TTT layers, in layer order
  for (int64_t u = 0; u < units; ++u) {
    // The weights carried into unit u, copied before the chunk advances them (u = 0: the learned W0).
    std::vector<std::vector<double>> W(layers.size()), B(layers.size());
    for (size_t l = 0; l < layers.size(); ++l) {
      const bool carried = u > 0 && state.ttt[ttt_blocks[l]].inner.W1.defined();
      W[l] = carried ? state.ttt[ttt_blocks[l]].inner.W1.to_vector() : layers[l]->W1.to_vector();
      B[l] = carried ? state.ttt[ttt_blocks[l]].inner.b1.to_vector() : layers[l]->b1.to_vector();
      if (int64_t(W[l].size()) != H * f * f || int64_t(B[l].size()) != H * f)
        throw std::logic_error("convergence: unexpected inner weight shape in TTT layer " + std::to_string(l));
    }
    m.model.forward_chunk(raw::slice(input, 1, u * b, (u + 1) * b), state);
    if (u == 0)
      for (size_t i = 0; i < state.ttt.size(); ++i)
        if (state.ttt[i].last_xk.defined()) ttt_blocks.push_back(i);
    for (size_t l = 0; l < layers.size(); ++l) {
      const std::vector<double> xk = state.ttt[ttt_blocks[l]].last_xk.to_vector();  // (1, H, b, f)
      const std::vector<double> xv = state.ttt[ttt_blocks[l]].last_xv.to_vector();
      for (int64_t h = 0; h < H; ++h) {
        std::vector<double> theta0(W[l].begin() + h * f * f, W[l].begin() + (h + 1) * f * f);
        theta0.insert(theta0.end(), B[l].begin() + h * f, B[l].begin() + (h + 1) * f);
        add_problem(st[l], xk, xv, std::move(theta0), h, b, f, at, max_k);
      }
    }
  }
  return st;
}

// One layer's lines of the printed summary, and its entry of convergence.json.
nlohmann::ordered_json layer_summary(const LayerStats& s, size_t l, const std::vector<int>& at, int max_k,
                                     std::ostream& txt) {
  const int64_t med = quantile(s.first_below, 0.5), p90 = quantile(s.first_below, 0.9);
  auto k_text = [&](int64_t k) { return k < 0 ? "> " + std::to_string(max_k) : std::to_string(k); };
  int64_t not_reached = 0;
  for (int64_t k : s.first_below) not_reached += k < 0;
  std::vector<double> mean_gap;
  for (double g : s.gap_sum) mean_gap.push_back(s.problems ? g / double(s.problems) : NAN);
  txt << "TTT layer " << l << ": " << s.problems << " problems (" << s.ridged << " ridged, " << s.skipped
      << " already optimal), step " << fmt("%.3g", s.step_min) << " .. " << fmt("%.3g", s.step_max) << "\n"
      << "  K_1%: median " << k_text(med) << ", 90th percentile " << k_text(p90) << ", not within " << max_k
      << " steps: " << not_reached << "\n  mean gap:";
  for (size_t i = 0; i < at.size(); ++i) txt << "  K=" << at[i] << " " << fmt("%.3g", mean_gap[i]);
  txt << "\n";
  auto or_null = [](int64_t k) { return k < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(k); };
  return {{"layer", l}, {"problems", s.problems}, {"ridged", s.ridged}, {"already_optimal", s.skipped},
          {"step_min", s.step_min}, {"step_max", s.step_max},
          {"k_below_1pct", {{"median", or_null(med)}, {"p90", or_null(p90)}, {"not_within_max_k", not_reached},
                            {"per_problem", s.first_below}}},
          {"mean_gap", {{"k", at}, {"gap", mean_gap}}}};
}

void run(const ConvergenceArgs& a) {
  const ttt::Checkpoint ck = ttt::load_checkpoint(a.checkpoint);
  const TrainedModel m = load_trained(ck, a.checkpoint);
  const Dataset ds = load_dataset(m.config.data);
  const std::vector<const ttt::TTTLayer*> layers = m.model.ttt_layers();
  if (layers.empty()) throw std::invalid_argument("convergence: the model has no TTT layers");
  for (size_t l = 0; l < layers.size(); ++l)
    if (layers[l]->config().mlp)
      throw std::invalid_argument("convergence: TTT layer " + std::to_string(l) +
                                  " is TTT-MLP; the closed-form optimum needs TTT-Linear");
  const int64_t b = m.model.config().mini_batch, H = layers[0]->config().heads, f = layers[0]->config().head_dim();
  data::EvalWindows wins(ds.test, a.units * b);
  if (wins.size() < 1)
    throw std::invalid_argument("convergence: no test document has " + std::to_string(a.units * b + 1) + " tokens");
  std::vector<int> at = {0};
  for (int k = 1; k <= a.max_k; k *= 2) at.push_back(k);
  if (at.back() != a.max_k) at.push_back(a.max_k);
  const std::vector<LayerStats> st = collect(m, wins.batch(0, 1).input, a.units, at, a.max_k);

  std::ostringstream txt;
  txt << "Inner-loop convergence, TTT-Linear without LayerNorm: " << a.units << " units of " << b
      << " tokens (test split) x " << H << " heads per layer, state carried by uniform-1.\n"
      << "l(W, b1) = 1/2 sum_j w_j |XK_j W + b1 - (XV_j - XK_j)|^2 with w_j = 1/b; closed-form optimum by Cholesky "
         "in double (ridge 1e-8*trace(A) where the normal equations are singular, e.g. b < f + 1); gradient steps of "
         "1/lambda_max(Hessian) (power iteration) from the weights carried into the unit.\n"
      << "gap(K) = (l(W_K) - l*) / (l(W_0) - l*); K_1% = smallest K with gap < 1% (nearest-rank quantiles).\n\n";
  nlohmann::ordered_json jl = nlohmann::ordered_json::array();
  for (size_t l = 0; l < st.size(); ++l) jl.push_back(layer_summary(st[l], l, at, a.max_k, txt));
  nlohmann::ordered_json j = provenance(m, ds, a.checkpoint, "ponder convergence");
  j["units"] = a.units;
  j["mini_batch"] = b;
  j["heads"] = H;
  j["head_dim"] = f;
  j["max_k"] = a.max_k;
  j["tolerance"] = kTol;
  j["row_weights"] = "1/b";
  j["step"] = "1/lambda_max of the Hessian [X 1]^T D [X 1], by power iteration";
  j["ridge"] = "1e-8*trace(A) added where Cholesky finds A singular";
  j["layers"] = jl;
  util::lock_output_dir(a.out);
  const std::string path = (std::filesystem::path(a.out) / "convergence.json").string();
  util::write_atomically(path, j.dump(2) + "\n");
  std::printf("%s\nwrote %s\n", txt.str().c_str(), path.c_str());
}

}  // namespace
}  // namespace cmd_convergence

void register_convergence(CLI::App& app) {
  using namespace cmd_convergence;
  auto args = std::make_shared<ConvergenceArgs>();
  CLI::App* sub = app.add_subcommand(
      "convergence", "Inner gradient steps vs the closed-form optimum of each unit's least-squares problem "
                     "(TTT-Linear without LN): the smallest K with < 1% gap; writes convergence.json");
  sub->add_option("--checkpoint", args->checkpoint, "Trained model (ponder train's checkpoint.ckpt)")->required();
  sub->add_option("--units", args->units, "Units of the test split to analyse")->capture_default_str()->check(kPositive);
  sub->add_option("--max-k", args->max_k, "Most gradient steps per problem")->capture_default_str()->check(kPositive);
  sub->add_option("--out", args->out, "Output folder")->capture_default_str()->check(kNonEmpty);
  sub->callback([args] { run(*args); });
}

PONDER_COMMAND(convergence, register_convergence);

}  // namespace ponder::cli
