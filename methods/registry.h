// The registry of comparison methods: every name a config or command line may give (`compare.methods`) is parsed
// here, once, into a typed MethodSpec, and the schedules that need nothing but their own options are built here too.
// Methods that must first be fitted to a model — random (its probability), the heuristics (their thresholds) and the
// learned policies (training, methods/learned.h) — are built by the comparison from the same spec
// (experiments/study/method_build.cpp). How to add one: docs/adding_a_method.md.
//
//   uniform-K        K inner steps on every unit
//   every-K/N        K on every N-th unit (starting with the first), SKIP (K = 0) otherwise
//   front-K          K on every unit until the sequence's budget (compare.budget_k steps per unit) is spent, SKIP
//                    after: all the budget as early as possible, the schedule a hard cap makes of a greedy spender
//   random           the two levels compare.low / compare.high, the high one with the probability that meets the budget
//   entropy | loss | ttt-loss | gradnorm
//                    the low or high level by a difficulty score, its threshold calibrated to the budget
//   gate-entropy | gate-loss | gate-ttt-loss | gate-gradnorm
//                    the same score and calibration, the threshold then adapted along each sequence by an EMA of
//                    the decisions toward the calibrated share of high ones (EmaGatePolicy: the published gate)
//   learned-reinforce | learned-ppo-pid | pondernet [ '[' key=value,... ']' ]
//                    a policy trained on validation windows (overrides of `learn:` in the brackets,
//                    methods/learn_options.h)
//   oracle           the greedy oracle (reads the labels; an upper bound, not a policy)
//   replay:FILE[+FILE...]
//                    the K per unit that `ponder oracle` chose on the same segments (its oracle.json), e.g. another
//                    model's; with several files, the step option nearest their mean K on each unit. A diagnostic
//                    (those choices read labels): how much of one model's oracle headroom another's choices buy
//
// "fixed" names one thing only: an explicit list of K per unit (`--schedule fixed:K1,K2,...` in eval); the former
// method name fixed-K/N is refused with the name it now has.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "methods/learn_options.h"
#include "policy/policies.h"
#include "policy/rollout.h"

namespace ponder::methods {

enum class MethodFamily { Uniform, Every, Front, Random, Heuristic, Learned, Oracle, Replay };

// The learned methods, one line each: X(id, method name, kind) — the Learner, the name a config lists (which may
// carry bracketed overrides) and its kind in results. Its training is a branch of methods/learned.cpp.
#define PONDER_LEARNERS(X)                                                                                     \
  X(Reinforce, "learned-reinforce", "reinforce") X(PpoPid, "learned-ppo-pid", "ppo-pid")                     \
  X(PonderNet, "pondernet", "pondernet")
#define PONDER_ENUM_ID(id, ...) id,
enum class Learner : uint8_t { PONDER_LEARNERS(PONDER_ENUM_ID) };

// What a method is, as results.json's `kind` names it: its family, a heuristic split by whether an EMA adapts its
// threshold (gate), a learned method by its learner (one kind per line of PONDER_LEARNERS).
enum class MethodKind : uint8_t {
  Uniform, Every, Front, Random, Heuristic, Gate, PONDER_LEARNERS(PONDER_ENUM_ID) Oracle, Replay
};
#undef PONDER_ENUM_ID
const char* kind_name(MethodKind k);
// The kind a results file names; an std::invalid_argument names an unknown one.
MethodKind parse_kind(const std::string& name);
// Whether the method's choices read the labels (the oracle, and replays of its choices): a bound, not a policy.
inline bool reads_labels(MethodKind k) { return k == MethodKind::Oracle || k == MethodKind::Replay; }

struct MethodSpec {
  std::string name;  // canonical: how results, journals and reports name the method
  MethodFamily family = MethodFamily::Uniform;
  int k = 0;             // Uniform: K; Every: K on the chosen units; Front: K until the budget is spent
  int every = 1;         // Every: N
  policy::Score score = policy::Score::Loss;  // Heuristic
  bool ema_gate = false;      // Heuristic: gate-<score>, the threshold adapted by an EMA (EmaGatePolicy)
  Learner learner = Learner::Reinforce;  // Learned
  LearnOverrides overrides;              // Learned: the bracketed overrides of `learn:` (they stay in `name` too)
  std::vector<std::string> files;  // Replay: the oracle.json files it reads
  int shuffle_seed = -1;  // Replay (replay-shuffled-S): K permuted within each segment with seed S, the placement null
  std::string order_file;  // Replay (…@ORDER.json): each segment's K placed in the order of ORDER's per_unit.score
  MethodKind kind() const;
  bool operator==(const MethodSpec& o) const { return name == o.name; }
};

// Parses one method name; an unknown or malformed name is an std::invalid_argument that names it and lists the forms.
MethodSpec parse_method(const std::string& name);
std::vector<MethodSpec> parse_methods(const std::vector<std::string>& names);
// The forms parse_method accepts, for error messages and --help.
const char* method_forms();

// Why `m` cannot run on the fast-weight path (ponder adapt), or "" when it can: the ttt-loss / gradnorm scores probe
// the TTT layers' inner loss, which fast weights on a frozen base do not have.
std::string fast_weight_refusal(const MethodSpec& m);
// Why a method cannot run under these rollout options, or "": the recon scores exist only at carry mode's After
// stage (policy/unit_features.h).
std::string posthoc_refusal(const MethodSpec& m, const policy::RolloutOptions& opt);

// The policy of a method that needs no fitting: uniform-K and every-K/N, and front-K given the budget in steps per
// unit and the step options (K is rounded down to them as the budget runs out). Other families are an error here.
std::unique_ptr<policy::Policy> schedule_policy(const MethodSpec& m, double budget_k = 0,
                                                const std::vector<int>& options = {});

}  // namespace ponder::methods
