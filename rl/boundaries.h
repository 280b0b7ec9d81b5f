// Episode boundaries of a time-major rollout, shared by the Monte-Carlo returns and GAE (docs/rl_stats.md: its
// conventions, §1, §2 and pitfall P1). For PonderTTT a document end is a true terminal (no bootstrap) and a rollout
// cut mid-document is a truncation that bootstraps from V of the pre-reset final observation.
#pragma once
#include <cstddef>
#include <vector>

namespace ponder::rl {

struct Boundaries {
  // Each flag vector has one entry per transition, or is empty meaning "no transition has that flag".
  std::vector<bool> terminated = {};      // transition t reached a true terminal state: nothing follows it
  std::vector<bool> truncated = {};       // the episode was cut after t although s'_t is not terminal
  std::vector<double> final_values = {};  // V(s'_t) of the final observation; read only where truncated[t] (may
                                          // be empty when nothing is truncated)
  double bootstrap_value = 0;             // V(s_T) after the last transition; read unless it ended the episode

  // Throws std::invalid_argument (prefixed with `who`) unless the vectors fit a rollout of `steps` transitions
  // and every value that will be read is finite.
  void validate(size_t steps, const char* who) const;
  bool is_terminated(size_t t) const { return !terminated.empty() && terminated[t]; }
  bool is_truncated(size_t t) const { return !truncated.empty() && truncated[t]; }
  bool done(size_t t) const { return is_terminated(t) || is_truncated(t); }
  // What follows transition t of a rollout of `steps`: 0 at a terminal, V(final obs) at a truncation (a terminal
  // wins when both are set), bootstrap_value after the last transition, otherwise `following` (V(s_{t+1}) or
  // G_{t+1}).
  double next(size_t t, size_t steps, double following) const;
};

}  // namespace ponder::rl
