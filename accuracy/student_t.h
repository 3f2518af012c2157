// student_t.h - Student's t distribution: upper tail probability and quantile, for the paired
// gate's one-sided confidence bounds (accuracy/gate.h, docs/accuracy.md section 3).
//
// The tail is P(T > t) = I_x(df/2, 1/2) / 2 at x = df / (df + t^2), the regularized incomplete
// beta function evaluated by its continued fraction (modified Lentz), with x and 1 - x both
// formed from t^2 / df so neither loses digits. The quantile inverts the tail by Newton steps
// kept inside a bisection bracket; from 10^4 degrees of freedom on (where the fraction loses
// digits) it is the normal quantile's expansion in powers of 1/df (Abramowitz & Stegun 26.7.5).
// Relative accuracy ~1e-12 for df >= 1 (tests: table values from the closed-form sums of
// Abramowitz & Stegun 26.7.3-4, the closed forms for df 1 and 2, the normal limit).
#pragma once

namespace wideattn::accuracy {

// P(T > t) for T ~ Student t with df > 0 degrees of freedom; t may be any real or +-inf
// (relative accuracy ~1e-12 up to 10^4 degrees of freedom, decreasing beyond).
double student_t_upper_tail(double t, double df);

// Density of T at t.
double student_t_density(double t, double df);

// The t with P(T <= t) = probability; probability in (0, 1), df > 0. Throws AccuracyError
// naming the bad argument otherwise.
double student_t_quantile(double probability, double df);

}  // namespace wideattn::accuracy
