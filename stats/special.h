// Special functions behind the p-values of the classical tests (docs/rl_stats.md §8.6). Written here rather than
// taken from a library: the project has no scipy/Boost, and the t tail is a one-liner given the incomplete beta.
#pragma once

namespace ponder::stats {

// I_x(a, b), the regularised incomplete beta function, a, b > 0, x ∈ [0, 1]. The continued fraction is evaluated with
// the modified Lentz method (Numerical Recipes' betacf), on the side of (a+1)/(a+b+2) where it converges fast;
// accurate to ~1e-15 relative.
double regularized_incomplete_beta(double a, double b, double x);

// Two-sided tail P(|T| ≥ |t|) of Student's t with df > 0 degrees of freedom: I_{df/(df+t²)}(df/2, 1/2)
// (docs/rl_stats.md §8.6). |t| = ∞ gives 0; NaN gives NaN.
double student_t_two_sided_p(double t, double df);

// Two-sided standard-normal tail P(|Z| ≥ |z|) = erfc(|z|/√2); NaN gives NaN.
double normal_two_sided_p(double z);

}  // namespace ponder::stats
