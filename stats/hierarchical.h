// Statistics over independently trained models (docs/method.md §6.6): each model is one replicate, and within a
// model the held-out documents (streams) are paired observations. An interval that ignores the models would hold
// only document sampling, not training variance; one over model means alone would throw the documents away.
#pragma once
#include <cstdint>
#include <vector>

#include "stats/rliable.h"

namespace ponder::stats {

// The mean over groups of each group's mean (every model weighs the same, whatever its document count).
double mean_of_group_means(const std::vector<std::vector<double>>& groups);

// Two-stage (hierarchical) percentile bootstrap of mean_of_group_means: each replicate draws groups with
// replacement, then each drawn group's values with replacement. With one group it is the ordinary bootstrap of the
// mean; with one value per group, the bootstrap over groups. Seeded, so a rerun gives the same interval.
Interval hierarchical_bootstrap_ci(const std::vector<std::vector<double>>& groups, const BootstrapOptions& options);

// The p-quantile of Student's t with `df` degrees of freedom (p in (0, 1), df > 0), by bisection on its CDF.
double student_t_quantile(double p, double df);

// The smallest true mean difference a two-sided one-sample (paired) t-test at level `alpha` detects with probability
// `power`, for n replicates with standard deviation `sd`: (t_{1−α/2, n−1} + t_{power, n−1})·sd/√n. NaN for n < 2.
double minimum_detectable_effect(double sd, int64_t n, double alpha = 0.05, double power = 0.8);

}  // namespace ponder::stats
