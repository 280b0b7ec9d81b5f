#include "tensor/profile.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>
#include <unordered_map>

namespace ponder::prof {
namespace {
std::atomic<bool> g_on{false};
thread_local Totals t_totals;
struct Entry {
  Kind kind;
  double seconds = 0;
  uint64_t calls = 0;
};
thread_local std::unordered_map<const char*, Entry> t_labels;

void by_time(std::vector<LabelTotal>& v) {
  std::stable_sort(v.begin(), v.end(), [](const LabelTotal& a, const LabelTotal& b) { return a.seconds > b.seconds; });
}
}  // namespace

const char* kind_name(Kind k) {
  static const char* names[] = {"matmul", "elementwise", "fused", "reduction", "copy", "alloc"};
  static_assert(sizeof(names) / sizeof(names[0]) == size_t(Kind::Count), "one name per Kind");
  return names[size_t(k)];
}

double Totals::total_seconds() const {
  double s = 0;
  for (double v : seconds) s += v;
  return s;
}

Totals Totals::operator-(const Totals& o) const {
  Totals r;
  for (size_t i = 0; i < seconds.size(); ++i) {
    r.seconds[i] = seconds[i] - o.seconds[i];
    r.calls[i] = calls[i] - o.calls[i];
  }
  return r;
}

Totals& Totals::operator+=(const Totals& o) {
  for (size_t i = 0; i < seconds.size(); ++i) {
    seconds[i] += o.seconds[i];
    calls[i] += o.calls[i];
  }
  return *this;
}

bool enabled() { return g_on.load(std::memory_order_relaxed); }
void set_enabled(bool on) { g_on.store(on, std::memory_order_relaxed); }
namespace {
std::atomic<void (*)()> g_flush{nullptr};
void flush_pending() {
  if (void (*f)() = g_flush.load()) f();
}
}  // namespace

void set_pending_flush(void (*flush)()) { g_flush.store(flush); }
Totals snapshot() {
  flush_pending();
  return t_totals;
}
void add(Kind k, const char* label, double seconds) {
  t_totals.seconds[size_t(k)] += seconds;
  t_totals.calls[size_t(k)] += 1;
  if (!label) return;
  Entry& e = t_labels.try_emplace(label, Entry{k}).first->second;
  e.seconds += seconds;
  e.calls += 1;
}

std::vector<LabelTotal> label_snapshot() {
  flush_pending();
  // Entries are keyed by the label's address; two literals with the same text may have two addresses,
  // so merge by text (and kind), which is what label_diff matches on.
  std::map<std::pair<std::string, Kind>, LabelTotal> merged;
  for (const auto& [label, e] : t_labels) {
    LabelTotal& t = merged.try_emplace({label, e.kind}, LabelTotal{label, e.kind}).first->second;
    t.seconds += e.seconds;
    t.calls += e.calls;
  }
  std::vector<LabelTotal> v;
  for (auto& [key, t] : merged) v.push_back(std::move(t));
  by_time(v);
  return v;
}

std::vector<LabelTotal> label_diff(const std::vector<LabelTotal>& after, const std::vector<LabelTotal>& before) {
  std::vector<LabelTotal> v;
  for (const LabelTotal& a : after) {
    LabelTotal d = a;
    for (const LabelTotal& b : before)
      if (b.label == a.label && b.kind == a.kind) {
        d.seconds -= b.seconds;
        d.calls -= b.calls;
      }
    if (d.calls > 0) v.push_back(d);
  }
  by_time(v);
  return v;
}

}  // namespace ponder::prof
