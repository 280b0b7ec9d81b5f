#include "ttt/step_trace.h"

#include <algorithm>

#include "autograd/ops.h"
#include "tensor/flops.h"
#include "ttt/flop_profile.h"

namespace ponder::ttt {
namespace {

struct Boundary {
  uint64_t seq_end;  // nodes with seq < seq_end (and ≥ the previous boundary's) were made in this section
  size_t section;
};

SectionFlops& section_named(std::vector<SectionFlops>& sections, const std::string& name) {
  auto it = std::find_if(sections.begin(), sections.end(), [&](const SectionFlops& s) { return s.name == name; });
  if (it != sections.end()) return *it;
  sections.push_back({name, 0, 0});
  return sections.back();
}

// The forward section that uses a parameter (Model::parameter_labels → the sections of ttt/flop_profile.h): the
// embedding, a block's pre-conv and norm, its mixer, its FFN and norm, the final norm, the untied output head.
std::string section_of_label(const std::string& label) {
  if (label.rfind("emb.", 0) == 0) return "embedding";
  if (label == "head") return "logits+loss";
  const size_t dot = label.find('.');
  if (label.rfind("block", 0) != 0 || dot == std::string::npos) return label.substr(0, dot);  // "final_norm"
  const std::string block = label.substr(0, dot), rest = label.substr(dot + 1);
  if (rest.rfind("ttt.", 0) == 0) return block + ".ttt";
  if (rest.rfind("attn.", 0) == 0) return block + ".attention";
  if (rest.rfind("ffn", 0) == 0) return block + ".ffn";  // ffn.* and ffn_norm.weight
  return block + ".seq_norm";                           // seq_norm.weight and the pre-conv's conv_*
}

}  // namespace

StepTrace trace_step(const Model& model, const Tensor& ids, const Tensor& targets, TTTRun run, bool grad_norms) {
  const auto named = model.named_parameters();
  const auto labels = model.parameter_labels();
  for (size_t i = 0; i < named.size(); ++i) set_name(named[i].second, labels[i]);

  StepTrace t;
  std::vector<Boundary> bounds;
  const FlopScope step;
  uint64_t last = 0;
  auto close_section = [&](const std::string& name) {
    const uint64_t now = step.counts().phase(Phase::Forward);
    SectionFlops& s = section_named(t.sections, name);
    s.forward += now - last;
    last = now;
    bounds.push_back({node_seq_now(), size_t(&s - t.sections.data())});
  };
  run.watch = [&](const std::string& point, const Tensor&) { close_section(section_of(point)); };
  const Tensor loss = mean(model.token_losses(ids, targets, run));
  close_section("logits+loss");

  GraphTrace trace;
  GradOptions opt;
  trace.grad_norms = grad_norms;
  opt.trace = &trace;
  backward(loss, {}, opt);
  t.forward_total = step.counts().phase(Phase::Forward);
  t.backward_total = step.counts().phase(Phase::Backward);
  for (const TraceEntry& e : trace.entries) {
    std::string name;
    if (!e.label.empty()) {
      name = section_of_label(e.label);
    } else {
      auto it = std::upper_bound(bounds.begin(), bounds.end(), e.seq,
                                 [](uint64_t seq, const Boundary& b) { return seq < b.seq_end; });
      name = it == bounds.end() ? "logits+loss" : t.sections[it->section].name;
    }
    section_named(t.sections, name).backward += e.backward_flops;
    t.node_sections.push_back(name);
  }
  t.nodes = std::move(trace.entries);
  return t;
}

}  // namespace ponder::ttt
