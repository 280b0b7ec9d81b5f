// Generalised advantage estimation (Schulman et al. 2016) as docs/rl_stats.md §2 states it, with real
// truncation bootstrapping (docs/rl_stats.md P1) instead of cleanrl's "done = terminated OR truncated" simplification.
#pragma once
#include <vector>

#include "rl/boundaries.h"

namespace ponder::rl {

struct GaeResult {
  std::vector<double> advantages;  // A_t
  std::vector<double> returns;     // R_t = A_t + V(s_t), the value targets
};

// For t = T-1 .. 0:
//   δ_t = r_t + γ·next_t - V(s_t), next_t = boundaries.next(t, T, V(s_{t+1})) (0 at a terminal, V(final obs) at a
//         truncation, bootstrap_value after the last transition)
//   A_t = δ_t + γλ·(1 - done_t)·A_{t+1}, A_T = 0.
// λ = 1 gives Monte-Carlo advantages G_t - V(s_t); λ = 0 gives the one-step TD errors δ_t.
GaeResult gae(const std::vector<double>& rewards, const std::vector<double>& values, const Boundaries& boundaries,
              double gamma, double lambda);

}  // namespace ponder::rl
