// `ponder oracle` (docs/method.md §5.2, "oracle first"): the greedy oracle's K distribution, how well each
// difficulty score predicts the oracle's K (Spearman ρ), and the oracle's quality/compute frontier.
// The oracle chooses K by looking at the labels, so everything here is an upper bound, not a policy.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "experiments/cli/commands.h"
#include "experiments/cli/compare_job.h"
#include "experiments/study/result_util.h"
#include "experiments/model/training.h"
#include "util/files.h"

namespace ponder::cli {
namespace cmd_oracle {
namespace {

struct OracleArgs : CheckpointJobArgs {
  int hidden_k = -1;  // ≥ 0: also write each unit's residual-stream features read under uniform-<hidden_k>
};

// Streams mode: what the comparison scores, in its order (the order of per_unit), each with its stream's name.
std::vector<std::pair<std::string, data::StreamTokens>> scored_reads(const Dataset& ds, const CompareOptions& opt) {
  std::vector<std::pair<std::string, data::StreamTokens>> out;
  for (const data::StreamTokens& st : ds.test_streams)
    for (data::StreamTokens& c : stream_reads(st, opt))
      if (c.scored() > 0) out.emplace_back(st.name, std::move(c));
  return out;
}

// Every segment read, whose units are its consecutive runs of `unit` tokens (the last one padded), so an analysis can
// see each unit's text and what came before it (scripts/oracle_features.py).
nlohmann::ordered_json segments_json(const Dataset& ds, const CompareOptions& opt, int64_t unit) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& [name, c] : scored_reads(ds, opt))
    out.push_back({{"stream", name}, {"first_scored", c.first_scored}, {"unit_tokens", unit}, {"tokens", c.tokens}});
  return out;
}

// policy::unit_hidden of every scored segment, padded as the comparison pads it, written as float32 rows to
// DIR/hidden.f32; returns what oracle.json says of it. Its rows are the segments' units in the order of per_unit
// (seed 0's: in streams mode every seed reads the same units).
nlohmann::ordered_json write_hidden(const ttt::Model& model, const Dataset& ds, const CompareOptions& opt, int64_t unit,
                                    int k, int64_t oracle_units, const std::string& dir) {
  const auto reads = scored_reads(ds, opt);
  const CompareProgress progress = stderr_progress("oracle");
  std::vector<float> rows;
  for (size_t i = 0; i < reads.size(); ++i) {
    progress("hidden states under uniform-" + std::to_string(k), double(i), double(reads.size()));
    const std::vector<int32_t>& t = reads[i].second.tokens;
    const int64_t n = int64_t(t.size()) - 1, padded = (n + unit - 1) / unit * unit;
    std::vector<int64_t> in(size_t(padded), 0);
    for (int64_t p = 0; p < n; ++p) in[size_t(p)] = t[size_t(p)];
    const std::vector<float> h = policy::unit_hidden(model, Tensor::from_ints(in, {1, padded}), k, opt.rollout);
    rows.insert(rows.end(), h.begin(), h.end());
  }
  const int64_t dims = 2 * model.config().d, units = int64_t(rows.size()) / dims;
  if (units == 0 || oracle_units % units != 0)
    throw std::runtime_error("oracle: " + std::to_string(units) + " units of hidden states do not line up with the " +
                             std::to_string(oracle_units) + " units the oracle read");
  const std::string path = (std::filesystem::path(dir) / "hidden.f32").string();
  util::write_atomically(path, std::string(reinterpret_cast<const char*>(rows.data()), rows.size() * sizeof(float)));
  return {{"file", "hidden.f32"}, {"format", "float32, little-endian, row-major (units, dims)"}, {"units", units},
          {"dims", dims}, {"reference", "uniform-" + std::to_string(k)},
          {"columns", "row u: mean over unit u-1's positions of the residual stream after the last block (d values), "
                      "then that stream at unit u-1's last position (d values); row 0 of each segment zeros"}};
}

void run(const OracleArgs& a) {
  CheckpointJob job = load_checkpoint_job(a, "oracle");
  CompareOptions& opt = job.opt;
  const TrainedModel& m = job.m;
  const Dataset& ds = job.ds;
  if (a.hidden_k >= 0 && !opt.streams)
    throw std::invalid_argument("oracle: --hidden-k reads the held-out streams' segments; set compare.streams: true");
  opt.methods = methods::parse_methods({"oracle"});  // the difficulty scores come with the oracle's units
  const CompareResult r = run_compare(m.model, ds.valid, ds.test, opt, stderr_progress("oracle"), nullptr, &ds.test_streams,
                                      {}, &ds.valid_streams);
  std::fprintf(stderr, "\n");
  const MethodResult& o = *find(r, "oracle");

  std::ostringstream txt;
  txt << "Oracle analysis: " << scored_label(r, opt) << ". The oracle picks K per unit by looking at the labels: an upper bound, not a usable policy.\n\n";
  const OracleUnits ou = r.oracle_units.distinct();  // streams mode: every seed read the same units
  int64_t units = 0;
  std::vector<int64_t> count;
  for (int64_t c : o.k_hist) {
    count.push_back(c / r.oracle_units.copies);
    units += count.back();
  }
  std::vector<double> share;
  txt << "Oracle K distribution (" << units << " units):\n";
  for (size_t i = 0; i < r.k_options.size(); ++i) {
    share.push_back(units ? double(count[i]) / double(units) : 0.0);
    txt << "  K=" << r.k_options[i] << "  " << fmt("%5.1f%%", 100 * share.back()) << "\n";
  }
  const double mean_k = seed_mean(o, k_of);
  txt << "  mean K " << fmt("%.3f", mean_k) << ", bpb " << fmt("%.4f", seed_mean(o, bpb_of)) << "\n\n";

  const std::vector<std::pair<std::string, const std::vector<double>*>> scores = {
      {"loss", &ou.loss}, {"entropy", &ou.entropy}, {"ttt-loss", &ou.ttt_loss}, {"gradnorm", &ou.grad_norm}};
  nlohmann::ordered_json corr = nlohmann::ordered_json::object();
  txt << "Spearman correlation of oracle K with each difficulty score (seen before the decision):\n";
  for (const auto& [name, v] : scores) {
    const stats::Correlation c = spearman_finite(ou.k, *v);
    corr[name] = {{"rho", c.rho}, {"p", c.p_value}};
    txt << "  " << name << std::string(10 - name.size(), ' ') << "rho " << fmt("%+.3f", c.rho) << "  p "
        << fmt("%.3g", c.p_value) << "\n";
  }
  txt << "\nOracle frontier (per unit minimise loss + mu * inner cost / base cost; seed 0's windows):\n"
      << "  mu        bpb     FLOPs/token  mean K\n";
  nlohmann::ordered_json frontier = nlohmann::ordered_json::array();
  for (const FrontierPoint& p : r.frontier) {
    const double total = p.base_per_token + p.inner_per_token;
    txt << "  " << fmt("%-8g", p.mu) << "  " << fmt("%.4f", p.bpb) << "  " << fmt("%11.4g", total) << "  "
        << fmt("%.2f", p.mean_k) << "\n";
    frontier.push_back({{"mu", p.mu}, {"bpb", p.bpb}, {"flops_per_token", total},
                        {"base_flops_per_token", p.base_per_token}, {"inner_flops_per_token", p.inner_per_token},
                        {"mean_k", p.mean_k}});
  }
  nlohmann::ordered_json j = provenance(m, ds, a.checkpoint, "ponder oracle");
  j["note"] = "the oracle chooses K using the labels: an upper bound, not a policy";
  j["mu"] = opt.oracle_mu;  // per_unit's K minimise loss + mu * inner cost / base cost (compare.oracle_mu)
  j["seeds"] = opt.seeds;
  j["windows_per_seed"] = opt.windows_per_seed;
  j["units"] = units;
  j["k_options"] = r.k_options;
  j["k_count"] = count;
  j["k_share"] = share;
  j["mean_k"] = mean_k;
  j["bpb"] = seed_mean(o, bpb_of);
  j["spearman"] = corr;
  j["frontier"] = frontier;
  j["scored"] = scored_label(r, opt);
  // Units in reading order (seed after seed; in streams mode segment after segment, context units included, once), so the
  // oracles of two models read on the same data can be compared unit by unit (scripts/oracle_agreement.py).
  j["per_unit"] = {{"k", ou.k}, {"loss", ou.loss}, {"entropy", ou.entropy}, {"ttt_loss", ou.ttt_loss},
                   {"grad_norm", ou.grad_norm}, {"tied", ou.tied}, {"first_token", ou.first_token}};
  const int64_t unit = r.mini_batch * opt.rollout.unit_batches;
  if (opt.streams) j["segments"] = segments_json(ds, opt, unit);
  if (a.hidden_k >= 0) j["hidden"] = write_hidden(m.model, ds, opt, unit, a.hidden_k, int64_t(ou.k.size()), a.out);
  const std::string path = (std::filesystem::path(a.out) / "oracle.json").string();
  util::write_atomically(path, j.dump(2) + "\n");
  std::printf("%s\nwrote %s\n", txt.str().c_str(), path.c_str());
}

}  // namespace
}  // namespace cmd_oracle

void register_oracle(CLI::App& app) {
  using namespace cmd_oracle;
  auto args = std::make_shared<OracleArgs>();
  args->out = "results/oracle";
  CLI::App* sub = app.add_subcommand(
      "oracle", "Oracle analysis of a trained checkpoint: the oracle's K distribution, Spearman correlation of "
                "oracle K with each difficulty score, and the oracle frontier; writes oracle.json");
  add_checkpoint_job_options(sub, *args, "Config whose compare: section sets seeds, windows and step options");
  sub->add_option("--hidden-k", args->hidden_k,
                  "Streams mode: also write hidden.f32, the residual stream a policy could read before each unit, "
                  "read under uniform-K (scripts/oracle_features.py fits the oracle's K on it)")
      ->check(kNonNegative);
  sub->callback([args] { run(*args); });
}

PONDER_COMMAND(oracle, register_oracle);

}  // namespace ponder::cli
