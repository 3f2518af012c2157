// test_student_t.cpp - the Student t quantile and tail against table values, the closed forms
// for 1 and 2 degrees of freedom and the normal limit.
#include <doctest/doctest.h>

#include <cmath>

#include "accuracy/accuracy_error.h"
#include "accuracy/student_t.h"

using namespace wideattn::accuracy;

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kTableTolerance = 1e-9;  // relative; the gate needs 1e-6

// t(p, df), computed for this table from the finite sums of Abramowitz & Stegun 26.7.3 and
// 26.7.4 for P(|T| <= t) with theta = atan(t / sqrt(df)), inverted by bisection to 1e-15
// (a method independent of the incomplete beta fraction in student_t.cpp); they agree with
// published tables to every printed digit (e.g. 1.812 for 0.95 and 10, 2.228 for 0.975 and 10).
struct TableValue {
    double probability;
    int df;
    double t;
};
const TableValue kTable[] = {
    {0.9, 1, 3.0776835371752513},    {0.9, 5, 1.4758840488244802},    {0.9, 30, 1.3104150253913955},
    {0.95, 1, 6.313751514675028},    {0.95, 2, 2.919985580353723},    {0.95, 3, 2.353363434801821},
    {0.95, 4, 2.1318467863266495},   {0.95, 5, 2.0150483733330224},   {0.95, 7, 1.8945786050900062},
    {0.95, 10, 1.8124611228116754},  {0.95, 11, 1.7958848187040424},  {0.95, 20, 1.7247182429207863},
    {0.95, 30, 1.6972608865939578},  {0.95, 60, 1.670648864904634},   {0.95, 120, 1.6576508993552341},
    {0.95, 1000, 1.6463788172854352}, {0.975, 1, 12.706204736174676}, {0.975, 2, 4.302652729749459},
    {0.975, 5, 2.570581835636313},   {0.975, 10, 2.228138851986274},  {0.975, 30, 2.0422724563012418},
    {0.975, 120, 1.9799304050824458}, {0.99, 3, 4.540702858568121},   {0.99, 10, 2.7637694581126944},
    {0.99, 60, 2.3901194726249093},  {0.995, 11, 3.1058065155392685}, {0.999, 5, 5.893429531355917},
    {0.999, 10, 4.143700494046534},  {0.999, 1000, 3.09840216391349},
};

bool close(double got, double want, double tolerance) { return std::fabs(got - want) <= tolerance * std::fabs(want); }

}  // namespace

TEST_CASE("Student t quantile matches table values") {
    for (const TableValue& row : kTable) {
        INFO("p " << row.probability << " df " << row.df);
        CHECK(close(student_t_quantile(row.probability, row.df), row.t, kTableTolerance));
        CHECK(close(student_t_quantile(1.0 - row.probability, row.df), -row.t, 1e-8));
        CHECK(close(student_t_upper_tail(row.t, row.df), 1.0 - row.probability, 1e-9));
    }
}

TEST_CASE("Student t quantile: closed forms for 1 and 2 degrees of freedom") {
    for (double p = 0.501; p < 0.9999; p += 0.0123) {
        INFO("p " << p);
        CHECK(close(student_t_quantile(p, 1), std::tan(kPi * (p - 0.5)), 1e-12));                   // Cauchy
        CHECK(close(student_t_quantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-12));
    }
    CHECK(close(student_t_quantile(1.0 - 1e-9, 1), 1.0 / std::tan(kPi * 1e-9), 1e-6));  // far tail
}

TEST_CASE("Student t: median, symmetry, density, the normal limit") {
    CHECK(student_t_quantile(0.5, 7) == 0.0);
    CHECK(student_t_upper_tail(0.0, 3) == 0.5);
    CHECK(student_t_upper_tail(INFINITY, 3) == 0.0);
    CHECK(student_t_upper_tail(-INFINITY, 3) == 1.0);
    CHECK(close(student_t_upper_tail(-1.3, 9), 1.0 - student_t_upper_tail(1.3, 9), 1e-15));
    CHECK(close(student_t_density(0.0, 1), 1.0 / kPi, 1e-13));
    CHECK(close(student_t_density(1.0, 2), std::pow(3.0, -1.5), 1e-13));  // (2 + t^2)^(-3/2)
    // df -> infinity: the standard normal's 0.95 and 0.975 quantiles; for large df
    // t = z + (z^3 + z) / (4 df) + O(df^-2) (Cornish-Fisher).
    const double z95 = 1.6448536269514722, z975 = 1.959963984540054;
    CHECK(close(student_t_quantile(0.95, 1e12), z95, 1e-11));
    CHECK(close(student_t_quantile(0.975, 1e12), z975, 1e-11));
    const double df = 1e6;
    CHECK(close(student_t_quantile(0.95, df), z95 + (z95 * z95 * z95 + z95) / (4 * df), 1e-11));
    // Monotone in the degrees of freedom, on both sides of the incomplete beta's branch switch.
    double previous = student_t_quantile(0.95, 1);
    for (int k = 2; k < 3000; k = k * 3 / 2 + 1) {
        const double t = student_t_quantile(0.95, k);
        CHECK(t < previous);
        previous = t;
    }
}

TEST_CASE("Student t: bad arguments name themselves") {
    CHECK_THROWS_WITH_AS(student_t_quantile(1.0, 5), doctest::Contains("probability"), AccuracyError);
    CHECK_THROWS_WITH_AS(student_t_quantile(0.0, 5), doctest::Contains("probability"), AccuracyError);
    CHECK_THROWS_WITH_AS(student_t_quantile(0.9, 0), doctest::Contains("degrees of freedom"), AccuracyError);
    CHECK_THROWS_AS(student_t_upper_tail(1.0, -2), AccuracyError);
}
