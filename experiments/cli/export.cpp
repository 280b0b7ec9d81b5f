// `ponder export`: a checkpoint's parameters as safetensors, for tools outside this project (experiments/model/export.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "experiments/cli/commands.h"
#include "experiments/model/export.h"
#include "experiments/model/training.h"
#include "util/files.h"

namespace ponder::cli {

namespace cmd_export {
namespace {

struct ExportArgs {
  std::string checkpoint, out;
  bool summary = false;
};

// True when `path` starts as a safetensors file does: a little-endian header length, then the JSON header's '{'.
bool looks_like_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char head[9] = {};
  return f.read(head, sizeof head) && head[8] == '{';
}

// The output may replace an earlier export, nothing else: not the checkpoint itself, not a training log, not a
// device, link or folder (util::write_atomically refuses those).
void refuse_clobber(const std::string& out, const std::string& checkpoint) {
  namespace fs = std::filesystem;
  std::error_code ec;
  util::refuse_unless_replaceable(out);
  if (fs::equivalent(out, checkpoint, ec)) throw std::invalid_argument("export: --out " + out + " is the checkpoint itself");
  if (fs::exists(out, ec) && !looks_like_safetensors(out))
    throw std::invalid_argument("export: --out " + out + " exists and is not a safetensors file; it would be "
                                "replaced (remove it, or pick another path)");
}

void run_export(const ExportArgs& a) {
  const std::string out =
      a.out.empty() ? std::filesystem::path(a.checkpoint).replace_extension(".safetensors").string() : a.out;
  refuse_clobber(out, a.checkpoint);
  const ttt::Checkpoint ck = ttt::load_checkpoint(a.checkpoint);
  const std::vector<std::string> names = load_trained(ck, a.checkpoint).model.parameter_labels();
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
  sub->add_option("--out", a->out, "Output file (default: the checkpoint's path with .safetensors)")->check(kNonEmpty);
  sub->add_flag("--summary", a->summary, "Also print each parameter's name, dtype, shape, L2 norm and sum as JSON");
  sub->callback([a] { run_export(*a); });
}

PONDER_COMMAND(export, register_export);

}  // namespace ponder::cli
