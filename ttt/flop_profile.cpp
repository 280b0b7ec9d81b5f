#include "ttt/flop_profile.h"

#include <algorithm>

#include "autograd/grad_mode.h"
#include "tensor/flops.h"

namespace ponder::ttt {

std::string section_of(const std::string& point) {
  const size_t first = point.find('.');
  if (first == std::string::npos) return point;
  const size_t second = point.find('.', first + 1);
  return second == std::string::npos ? point : point.substr(0, second);
}

std::vector<std::pair<std::string, uint64_t>> forward_flops_by_section(const Model& model, const Tensor& ids,
                                                                       TTTRun run) {
  std::vector<std::pair<std::string, uint64_t>> out;
  auto add = [&out](const std::string& section, uint64_t n) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.first == section; });
    if (it == out.end()) out.push_back({section, n});
    else it->second += n;
  };
  NoGradGuard ng;
  const FlopScope scope;
  uint64_t last = 0;
  run.watch = [&](const std::string& point, const Tensor&) {
    const uint64_t now = scope.counts().total();
    add(section_of(point), now - last);
    last = now;
  };
  model.forward(ids, run);
  add("logits", scope.counts().total() - last);
  return out;
}

}  // namespace ponder::ttt
