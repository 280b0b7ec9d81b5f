// `ponder export`: a checkpoint's parameters as safetensors, for tools outside this project (experiments/export.h).
#include <cstdio>
#include <memory>

#include "experiments/commands.h"
#include "experiments/export.h"
#include "experiments/training.h"

namespace ponder::cli {

namespace cmd_export {
namespace {

struct ExportArgs {
  std::string checkpoint, out;
  bool summary = false;
};

void run_export(const ExportArgs& a) {
  const ttt::Checkpoint ck = ttt::load_checkpoint(a.checkpoint);
  const std::vector<std::string> names = load_trained(ck, a.checkpoint).model.parameter_labels();
  const std::string out = a.out.empty() ? a.checkpoint.substr(0, a.checkpoint.rfind('.')) + ".safetensors" : a.out;
  export_safetensors(ck, names, out);
  std::fprintf(stderr, "export: %zu tensors of %s (step %lld) -> %s\n", ck.params.size(), a.checkpoint.c_str(),
               (long long)ck.step, out.c_str());
  if (a.summary) std::printf("%s\n", parameter_summary(ck, names).dump(1).c_str());
}

}  // namespace
}  // namespace cmd_export

void register_export(CLI::App& app) {
  using namespace cmd_export;
  auto a = std::make_shared<ExportArgs>();
  CLI::App* sub = app.add_subcommand("export", "Write a checkpoint's parameters as safetensors (readable by PyTorch, "
                                               "JAX, numpy: scripts/read_safetensors.py)");
  sub->add_option("--checkpoint", a->checkpoint, "Checkpoint to export")->required();
  sub->add_option("--out", a->out, "Output file (default: the checkpoint's path with .safetensors)");
  sub->add_flag("--summary", a->summary, "Also print each parameter's name, dtype, shape, L2 norm and sum as JSON");
  sub->callback([a] { run_export(*a); });
}

}  // namespace ponder::cli
