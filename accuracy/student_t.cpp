// student_t.cpp - see student_t.h.
#include "accuracy/student_t.h"

#include <cmath>
#include <limits>
#include <string>

#include "accuracy/accuracy_error.h"

namespace wideattn::accuracy {
namespace {

constexpr int kMaxFractionTerms = 100000;
// The continued fraction stops when a step changes it by at most this (relative).
constexpr double kFractionTolerance = 2.0 * std::numeric_limits<double>::epsilon();
constexpr double kTiny = 1e-300;  // keeps Lentz's divisors away from zero
constexpr int kMaxBracketDoublings = 2100;
constexpr int kMaxQuantileSteps = 500;
constexpr double kQuantileTolerance = 4.0 * std::numeric_limits<double>::epsilon();
constexpr double kHalf = 0.5;
constexpr double kLogSqrtPi = 0.57236494292470008707;  // log(pi) / 2 = lgamma(1/2)
// From this a on, log Gamma(a + 1/2) - log Gamma(a) comes from its asymptotic series (error
// < 1e-15 here), not from the difference of two large lgamma values (which loses ~a log(a) eps).
constexpr double kSeriesFrom = 30.0;
constexpr double kAsymptoticFrom = 1e4;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrtTwoPi = 0.39894228040143267794;

// log Gamma(a + 1/2) - log Gamma(a) = log(a)/2 - 1/(8a) + 1/(192a^3) - 1/(640a^5) + 17/(14336a^7) - ...
double log_gamma_half_step(double a) {
    if (a < kSeriesFrom) return std::lgamma(a + kHalf) - std::lgamma(a);
    const double inv = 1.0 / a, inv2 = inv * inv;
    return kHalf * std::log(a) - inv * (1.0 / 8 - inv2 * (1.0 / 192 - inv2 * (1.0 / 640 - inv2 * (17.0 / 14336))));
}

// log B(a, 1/2) = log Gamma(a) + log Gamma(1/2) - log Gamma(a + 1/2).
double log_beta_half(double a) { return kLogSqrtPi - log_gamma_half_step(a); }

double away_from_zero(double v) { return std::fabs(v) < kTiny ? kTiny : v; }

// The continued fraction of I_x(a, b) * a * B(a, b) / (x^a (1 - x)^b), modified Lentz; it
// converges fast for x < (a + 1) / (a + b + 2).
double beta_fraction(double a, double b, double x) {
    const double sum = a + b, above = a + 1.0, below = a - 1.0;
    double c = 1.0;
    double d = 1.0 / away_from_zero(1.0 - sum * x / above);
    double h = d;
    for (int m = 1; m <= kMaxFractionTerms; ++m) {
        const double twice = 2.0 * m;
        const double even = m * (b - m) * x / ((below + twice) * (a + twice));
        d = 1.0 / away_from_zero(1.0 + even * d);
        c = away_from_zero(1.0 + even / c);
        h *= d * c;
        const double odd = -(a + m) * (sum + m) * x / ((a + twice) * (above + twice));
        d = 1.0 / away_from_zero(1.0 + odd * d);
        c = away_from_zero(1.0 + odd / c);
        const double step = d * c;
        h *= step;
        if (std::fabs(step - 1.0) <= kFractionTolerance) return h;
    }
    throw AccuracyError("Student t tail: the incomplete beta continued fraction did not converge (a " +
                        std::to_string(a) + ", b " + std::to_string(b) + ", x " + std::to_string(x) + ")");
}

// P(T > t) for t >= 0 from q = t^2 / df: x = 1 / (1 + q), 1 - x = q / (1 + q).
double upper_tail_nonnegative(double t, double df) {
    if (t == 0.0) return kHalf;
    if (std::isinf(t)) return 0.0;
    const double q = t / df * t;
    const double a = kHalf * df, b = kHalf;
    const double log_x = -std::log1p(q);
    const double log_y = std::log(q) + log_x;
    const double x = 1.0 / (1.0 + q);
    const double y = q / (1.0 + q);
    const double front = std::exp(a * log_x + b * log_y - log_beta_half(a));
    if (x < (a + 1.0) / (a + b + 2.0)) return kHalf * front * beta_fraction(a, b, x) / a;
    return kHalf * (1.0 - front * beta_fraction(b, a, y) / b);
}

void check_df(double df) {
    if (!(df > 0.0) || std::isinf(df))
        throw AccuracyError("Student t: degrees of freedom must be a finite number > 0, got " + std::to_string(df));
}

// The x >= 0 with tail(x) = alpha for a decreasing tail with tail(0) = 1/2 and density
// -tail'; alpha in (0, 1/2]. Newton steps on the tail, kept inside a bisection bracket.
template <typename Tail, typename Density>
double invert_tail(double alpha, Tail tail, Density density) {
    if (alpha == kHalf) return 0.0;
    double lo = 0.0, hi = 1.0;
    for (int i = 0; tail(hi) > alpha; ++i) {
        if (i == kMaxBracketDoublings) throw AccuracyError("Student t quantile: no bracket found");
        lo = hi;
        hi *= 2.0;
    }
    double x = kHalf * (lo + hi);
    for (int step = 0; step < kMaxQuantileSteps; ++step) {
        const double excess = tail(x) - alpha;
        if (excess == 0.0) return x;
        if (excess > 0.0) lo = x; else hi = x;
        double next = x + excess / density(x);
        if (!(next > lo && next < hi)) next = kHalf * (lo + hi);
        if (std::fabs(next - x) <= kQuantileTolerance * next || hi - lo <= kQuantileTolerance * hi) return next;
        x = next;
    }
    return x;
}

// The z >= 0 with P(Z > z) = alpha for a standard normal Z.
double normal_upper_quantile(double alpha) {
    return invert_tail(
        alpha, [](double z) { return kHalf * std::erfc(z * kSqrtHalf); },
        [](double z) { return kInvSqrtTwoPi * std::exp(-kHalf * z * z); });
}

// The t >= 0 with P(T > t) = alpha, alpha in (0, 1/2]. From kAsymptoticFrom degrees of freedom
// on, the continued fraction loses digits (x -> 1 with a huge a), and the expansion of t in
// powers of 1/df around the normal quantile z (Abramowitz & Stegun 26.7.5, four terms, error
// O(df^-5)) is exact to rounding instead.
double upper_quantile(double alpha, double df) {
    if (df < kAsymptoticFrom)
        return invert_tail(
            alpha, [df](double t) { return upper_tail_nonnegative(t, df); },
            [df](double t) { return student_t_density(t, df); });
    const double z = normal_upper_quantile(alpha);
    const double z2 = z * z;
    const double g1 = (z2 + 1) * z / 4;
    const double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
    const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
    const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
    const double inv = 1.0 / df;
    return z + inv * (g1 + inv * (g2 + inv * (g3 + inv * g4)));
}

}  // namespace

double student_t_density(double t, double df) {
    check_df(df);
    return std::exp(-log_beta_half(kHalf * df) - kHalf * std::log(df) - kHalf * (df + 1.0) * std::log1p(t / df * t));
}

double student_t_upper_tail(double t, double df) {
    check_df(df);
    if (std::isnan(t)) return t;
    return t >= 0.0 ? upper_tail_nonnegative(t, df) : 1.0 - upper_tail_nonnegative(-t, df);
}

double student_t_quantile(double probability, double df) {
    check_df(df);
    if (!(probability > 0.0 && probability < 1.0))
        throw AccuracyError("Student t quantile: probability must lie in (0, 1), got " + std::to_string(probability));
    if (probability >= kHalf) return upper_quantile(1.0 - probability, df);
    return -upper_quantile(probability, df);
}

}  // namespace wideattn::accuracy
