// Each method against the uniform frontier at its own compute (docs/method.md §6.3): the uniform schedules that no
// cheaper uniform schedule beats form a curve of bits/byte against total FLOPs per token (base + inner + overhead);
// a method is compared, document by document, with that curve interpolated linearly at the method's measured total
// FLOPs. Matching compute this way needs no calibration to be exact, and it charges a method for its overhead.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "experiments/study/compare.h"
#include "stats/rliable.h"

namespace ponder::cli {

struct FrontierDelta {
  std::vector<double> d;    // per document: method − curve (negative: better than uniform at the same FLOPs)
  double mean = NAN;
  stats::Interval ci;       // 95% bootstrap over documents
  std::string lower, upper; // the uniform schedules interpolated between (equal at the ends of the curve)
  double weight = 0;        // of `upper` in the interpolation
  bool outside = false;     // the method's FLOPs fall outside the curve's range (compared with its end point)
};

// NaN mean and empty d when no uniform schedule ran.
FrontierDelta frontier_delta(const CompareResult& r, const MethodResult& m, bool streams);
nlohmann::ordered_json frontier_delta_json(const FrontierDelta& f);
// What a 95% interval of a frontier distance says: "better than uniform at equal compute" (entirely below 0), "worse
// than uniform at equal compute" (above), or "not distinguishable from uniform at equal compute"; an interval of
// exactly 0 (every document's distance 0: a method that ran a uniform schedule) says so.
std::string frontier_verdict(const stats::Interval& ci);
// An interval of exactly 0: the method read as the frontier on every document (it ran a uniform schedule).
inline bool uniform_in_effect(const stats::Interval& ci) { return ci.lo == 0 && ci.hi == 0; }
// The answer's sentences on the frontier: the best method's distance with its verdict, and which policies (methods
// that neither run a uniform schedule nor read labels) lie below the frontier. Empty when no uniform schedule ran.
std::string frontier_answer(const CompareResult& r, const std::string& best, bool streams);
// "## Distance to the uniform frontier": one row per method that is neither uniform nor the oracle.
std::string frontier_markdown(const CompareResult& r, bool streams);

}  // namespace ponder::cli
