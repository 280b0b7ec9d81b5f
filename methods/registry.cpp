#include "methods/registry.h"

#include <iterator>
#include <optional>
#include <stdexcept>

namespace ponder::methods {

namespace {

// A step count or period: digits only (no sign, no spaces), at most 4 digits so no value overflows an int.
int parse_count(const std::string& s, const std::string& method) {
  bool ok = !s.empty() && s.size() <= 4;
  for (char c : s) ok = ok && c >= '0' && c <= '9';
  if (!ok) throw std::invalid_argument("method '" + method + "': expected a whole number, got '" + s + "'");
  return std::stoi(s);
}

[[noreturn]] void unknown(const std::string& name) {
  throw std::invalid_argument("unknown method '" + name + "' (" + method_forms() + ")");
}

#define PONDER_LEARNER_NAME(id, name, kind) name,
constexpr const char* kLearnerNames[] = {PONDER_LEARNERS(PONDER_LEARNER_NAME)};
#undef PONDER_LEARNER_NAME

// The learner a learned method's name (without its brackets) names, or nullopt.
std::optional<Learner> find_learner(const std::string& base) {
  for (size_t i = 0; i < std::size(kLearnerNames); ++i)
    if (base == kLearnerNames[i]) return Learner(i);
  return std::nullopt;
}

}  // namespace

const char* method_forms() {
  static const std::string forms = [] {
    std::string learners;
    for (const char* n : kLearnerNames) learners += std::string(n) + ", ";
    return "uniform-K, every-K/N, front-K, random, " + policy::score_names() +
           ", easy-<one of those scores>, gate-<any of those>, " + learners.substr(0, learners.size() - 2) +
           " (learned methods may carry overrides: learned-reinforce[gamma=0.5,net=lstm]), oracle, "
           "replay:<oracle.json>[+<oracle.json>...][@<order.json>], replay-shuffled-S:<oracle.json>[+<oracle.json>...]";
  }();
  return forms.c_str();
}

MethodSpec parse_method(const std::string& name) {
  MethodSpec m;
  if (name.rfind("uniform-", 0) == 0) {
    m.family = MethodFamily::Uniform;
    m.k = parse_count(name.substr(8), name);
    m.name = "uniform-" + std::to_string(m.k);
  } else if (name.rfind("every-", 0) == 0) {
    const size_t slash = name.find('/');
    if (slash == std::string::npos) throw std::invalid_argument("method '" + name + "': expected every-K/N");
    m.family = MethodFamily::Every;
    m.k = parse_count(name.substr(6, slash - 6), name);
    m.every = parse_count(name.substr(slash + 1), name);
    if (m.every < 1) throw std::invalid_argument("method '" + name + "': N must be >= 1 (K on every N-th unit)");
    m.name = "every-" + std::to_string(m.k) + "/" + std::to_string(m.every);
  } else if (name.rfind("front-", 0) == 0) {
    m.family = MethodFamily::Front;
    m.k = parse_count(name.substr(6), name);
    m.name = "front-" + std::to_string(m.k);
  } else if (name.rfind("fixed-", 0) == 0) {
    throw std::invalid_argument("method '" + name + "': K on every N-th unit is now every-K/N (\"fixed\" names only "
                                "an explicit list of K per unit, eval --schedule fixed:K1,K2,...)");
  } else if (name.rfind("replay:", 0) == 0 || name.rfind("replay-shuffled-", 0) == 0) {
    m.family = MethodFamily::Replay;
    m.name = name;
    size_t from = name.find(':');
    if (name[6] == '-') {  // replay-shuffled-S: the seed of the permutation within segments
      if (from == std::string::npos) throw std::invalid_argument("method '" + name + "': expected replay-shuffled-S:FILE[+FILE...]");
      m.shuffle_seed = parse_count(name.substr(16, from - 16), name);
    }
    std::string files = name.substr(from + 1);
    if (const size_t at = files.rfind('@'); at != std::string::npos) {  // …@ORDER.json: placed by its scores
      m.order_file = files.substr(at + 1);
      files.resize(at);
      if (m.order_file.empty()) throw std::invalid_argument("method '" + name + "': expected @ORDER.json after the files");
      if (m.shuffle_seed >= 0)
        throw std::invalid_argument("method '" + name + "': a replay is shuffled or placed by @ORDER.json, not both");
    }
    for (from = 0;;) {
      const size_t plus = files.find('+', from);
      m.files.push_back(files.substr(from, plus == std::string::npos ? std::string::npos : plus - from));
      if (m.files.back().empty()) throw std::invalid_argument("method '" + name + "': expected replay:FILE[+FILE...]");
      if (plus == std::string::npos) break;
      from = plus + 1;
    }
  } else if (name == "random" || name == "oracle") {
    m.family = name == "random" ? MethodFamily::Random : MethodFamily::Oracle;
    m.name = name;
  } else if (policy::is_score_name(name)) {
    m.family = MethodFamily::Heuristic;
    m.score = policy::parse_score(name);
    m.name = name;
  } else if (name.rfind("gate-", 0) == 0) {
    const std::string score = name.substr(5);
    if (!policy::is_score_name(score)) unknown(name);
    m.family = MethodFamily::Heuristic;
    m.score = policy::parse_score(score);
    m.ema_gate = true;
    m.name = name;
  } else {
    const std::string base = name.substr(0, name.find('['));
    const std::optional<Learner> learner = find_learner(base);
    if (!learner) unknown(name);
    if (base.size() < name.size() && name.back() != ']')
      throw std::invalid_argument("method '" + name + "': overrides must end with ']'");
    m.family = MethodFamily::Learned;
    m.learner = *learner;
    m.overrides = parse_learn_overrides(name);
    m.name = name;
  }
  return m;
}

std::vector<MethodSpec> parse_methods(const std::vector<std::string>& names) {
  std::vector<MethodSpec> out;
  for (const std::string& n : names) {
    MethodSpec m = parse_method(n);
    for (const MethodSpec& o : out)
      if (o.name == m.name) throw std::invalid_argument("method '" + n + "' is listed twice (as '" + o.name + "')");
    out.push_back(std::move(m));
  }
  return out;
}

#define PONDER_LEARNER_KIND(id, name, kind) kind,
constexpr const char* kKindNames[] = {"uniform", "every",  "front", "random", "heuristic", "gate",
                                      PONDER_LEARNERS(PONDER_LEARNER_KIND) "oracle", "replay"};
#undef PONDER_LEARNER_KIND
static_assert(std::size(kKindNames) == size_t(MethodKind::Replay) + 1, "every MethodKind has its name");

const char* kind_name(MethodKind k) { return kKindNames[size_t(k)]; }

MethodKind parse_kind(const std::string& name) {
  for (size_t i = 0; i < std::size(kKindNames); ++i)
    if (name == kKindNames[i]) return MethodKind(i);
  throw std::invalid_argument("unknown method kind '" + name + "'");
}

MethodKind MethodSpec::kind() const {
  switch (family) {
    case MethodFamily::Uniform: return MethodKind::Uniform;
    case MethodFamily::Every: return MethodKind::Every;
    case MethodFamily::Front: return MethodKind::Front;
    case MethodFamily::Random: return MethodKind::Random;
    case MethodFamily::Heuristic: return ema_gate ? MethodKind::Gate : MethodKind::Heuristic;
    case MethodFamily::Oracle: return MethodKind::Oracle;
    case MethodFamily::Replay: return MethodKind::Replay;
    case MethodFamily::Learned:
      return MethodKind(size_t(MethodKind::Gate) + 1 + size_t(learner));  // the learners' kinds follow Gate
  }
  return MethodKind::Uniform;
}

std::unique_ptr<policy::Policy> schedule_policy(const MethodSpec& m, double budget_k, const std::vector<int>& options) {
  if (m.family == MethodFamily::Uniform) return std::make_unique<policy::UniformPolicy>(m.k);
  if (m.family == MethodFamily::Every) return std::make_unique<policy::EveryPolicy>(m.k, m.every);
  if (m.family == MethodFamily::Front) {
    if (options.empty()) throw std::invalid_argument("method '" + m.name + "' needs the step options to round K to");
    return std::make_unique<policy::HardBudgetPolicy>(std::make_unique<policy::UniformPolicy>(m.k), budget_k, options);
  }
  throw std::invalid_argument("method '" + m.name + "' must be fitted to a model first; schedule_policy builds only "
                              "uniform-K, every-K/N and front-K");
}

std::string fast_weight_refusal(const MethodSpec& m) {
  const policy::FeatureNeeds n = policy::score_needs(m.score);
  if (m.family == MethodFamily::Heuristic && (n.probe_loss || n.probe_grad || n.recon || n.recon_drop))
    return m.name + " probes the TTT layers' inner loss, which fast weights on a frozen base do not have";
  return "";
}

std::string posthoc_refusal(const MethodSpec& m, const policy::RolloutOptions& opt) {
  const policy::FeatureNeeds n = policy::score_needs(m.score);
  if (m.family != MethodFamily::Heuristic || !(n.recon || n.recon_drop)) return "";
  if (opt.mode == ttt::StepMode::Carry && opt.two_stage) return "";
  return m.name + " reads a unit's own reconstruction loss, which only carry mode's two stages give (compare.mode: "
                  "carry with compare.two_stage: true): deciding a unit's K from it before the unit runs would leak";
}

}  // namespace ponder::methods
