#include "methods/learn_options.h"

#include <sstream>
#include <stdexcept>

namespace ponder::methods {
namespace {

double to_double(const std::string& key, const std::string& v, const std::string& method) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument("compare: '" + method + "': " + key + " needs a number, got '" + v + "'");
}

std::vector<int> to_options(const std::string& v, const std::string& method) {
  std::vector<int> out;
  std::stringstream in(v);
  for (std::string item; std::getline(in, item, '/');) {
    const double k = to_double("options", item, method);
    if (k < 0 || k != int(k)) throw std::invalid_argument("compare: '" + method + "': step options must be integers >= 0");
    out.push_back(int(k));
  }
  if (out.size() < 2) throw std::invalid_argument("compare: '" + method + "': options needs at least two step counts, e.g. 1/2/4/8");
  return out;
}

void set_override(LearnOverrides& o, const std::string& key, const std::string& v, const std::string& method) {
  if (key == "gamma") {
    o.gamma = to_double(key, v, method);
  } else if (key == "lambda") {
    o.lambda = to_double(key, v, method);
  } else if (key == "options") {
    o.options = to_options(v, method);
  } else if (key == "net") {
    o.net = v;
  } else if (key == "unit") {
    o.unit = int64_t(to_double(key, v, method));
  } else if (key == "iters") {
    o.iters = int64_t(to_double(key, v, method));
  } else if (key == "probe") {
    o.probe = to_double(key, v, method) != 0;
  } else if (key == "hidden") {
    o.hidden = int64_t(to_double(key, v, method));
  } else {
    throw std::invalid_argument("compare: '" + method + "': unknown override '" + key +
                                "' (gamma, lambda, options, net, unit, iters, hidden, probe)");
  }
}

}  // namespace

LearnOverrides parse_learn_overrides(const std::string& method) {
  LearnOverrides o;
  const size_t open = method.find('[');
  if (open == std::string::npos) return o;
  if (method.back() != ']') throw std::invalid_argument("compare: '" + method + "': overrides must end with ']'");
  std::stringstream in(method.substr(open + 1, method.size() - open - 2));
  for (std::string kv; std::getline(in, kv, ',');) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("compare: '" + method + "': expected key=value, got '" + kv + "'");
    set_override(o, kv.substr(0, eq), kv.substr(eq + 1), method);
  }
  return o;
}

LearnOptions apply_learn_overrides(const std::string& method, const LearnOverrides& o, const LearnOptions& learn) {
  LearnOptions lo = learn;
  if (o.gamma) lo.reinforce.gamma = lo.ppo.gamma = *o.gamma;
  if (o.lambda) lo.reinforce.penalty = *o.lambda;
  if (o.options) lo.options = *o.options;
  if (o.net) lo.net = *o.net;
  if (o.unit) lo.unit_tokens = *o.unit;
  if (o.iters) lo.reinforce.iterations = lo.ppo.iterations = lo.pondernet.iterations = *o.iters;
  if (o.probe) lo.probe = *o.probe;
  if (o.hidden) lo.hidden = *o.hidden;
  if (lo.net != "mlp" && lo.net != "lstm")
    throw std::invalid_argument("compare: '" + method + "': net must be mlp or lstm, got '" + lo.net + "'");
  if (lo.unit_tokens < 0 || lo.hidden < 1 || lo.reinforce.iterations < 1)
    throw std::invalid_argument("compare: '" + method + "': unit must be >= 0, hidden and iters >= 1");
  return lo;
}

}  // namespace ponder::methods
