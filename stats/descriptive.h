// Descriptive statistics on plain vectors, with the conventions of docs/rl_stats.md (its conventions, §7, pitfall
// P4 of §10).
#pragma once
#include <vector>

namespace ponder::stats {

double mean(const std::vector<double>& x);
// Σ(x - mean)²/(n - ddof): ddof = 1 is torch's .std() and scipy's sample variance, ddof = 0 is np.std's default (P4).
// Needs n > ddof.
double variance(const std::vector<double>& x, int ddof = 1);
double stddev(const std::vector<double>& x, int ddof = 1);

// numpy's default "linear" quantile (Hyndman–Fan type 7): pos = (n-1)·q, interpolated linearly between the
// neighbouring order statistics. q is a fraction in [0, 1] (not a percent).
double quantile(const std::vector<double>& x, double q);
std::vector<double> quantiles(const std::vector<double>& x, const std::vector<double>& qs);
double median(const std::vector<double>& x);

// scipy.stats.trim_mean(x, proportion): sort, drop k = floor(proportion·n) values from each end, average the rest.
// Throws when nothing would remain (proportion must be in [0, 0.5)).
double trimmed_mean(const std::vector<double>& x, double proportion);
// rliable's interquartile mean: trimmed_mean(x, 0.25). This floors the cut instead of weighting the boundary values
// fractionally, so it differs from the "fractional IQM" when n is not a multiple of 4 (docs/rl_stats.md §7.2, §9.7).
double iqm(const std::vector<double>& x);

// 1-based ranks with ties given their average rank (scipy.stats.rankdata's default 'average').
std::vector<double> average_ranks(const std::vector<double>& x);

}  // namespace ponder::stats
