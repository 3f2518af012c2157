// test_distribution_stats.cpp - summary statistics against closed forms.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "accuracy/distribution_stats.h"

using namespace wideattn::accuracy;

TEST_CASE("summarize: 1..n has closed-form mean, standard error and percentiles") {
    const int n = 1001;
    std::vector<double> values;
    for (int i = n; i >= 1; --i) values.push_back(i);  // unsorted on purpose
    const DistributionSummary s = summarize(values);
    CHECK(s.count == n);
    CHECK(s.mean == doctest::Approx((n + 1) / 2.0).epsilon(1e-15));
    // Sample variance of 1..n is n (n + 1) / 12.
    const double expected_stderr = std::sqrt(n * (n + 1) / 12.0) / std::sqrt(static_cast<double>(n));
    CHECK(s.stderr_mean == doctest::Approx(expected_stderr).epsilon(1e-13));
    CHECK(s.min == 1.0);
    CHECK(s.max == n);
    // Position fraction * (n - 1) on the sorted values 1..1001 is exact: value = 1 + 1000 f.
    CHECK(s.median == doctest::Approx(501.0).epsilon(1e-15));
    CHECK(s.p90 == doctest::Approx(901.0).epsilon(1e-15));
    CHECK(s.p99 == doctest::Approx(991.0).epsilon(1e-15));
    CHECK(s.p99_9 == doctest::Approx(1000.0).epsilon(1e-15));
    CHECK(s.p10 == doctest::Approx(101.0).epsilon(1e-15));
    CHECK(s.p5 == doctest::Approx(51.0).epsilon(1e-15));
    CHECK(s.p1 == doctest::Approx(11.0).epsilon(1e-15));
    CHECK(s.p0_1 == doctest::Approx(2.0).epsilon(1e-15));
}

TEST_CASE("percentile_of_sorted interpolates linearly between ranks") {
    const std::vector<double> sorted = {0.0, 10.0, 20.0, 40.0};
    CHECK(percentile_of_sorted(sorted, 0.0) == 0.0);
    CHECK(percentile_of_sorted(sorted, 1.0) == 40.0);
    CHECK(percentile_of_sorted(sorted, 0.5) == doctest::Approx(15.0));         // position 1.5
    CHECK(percentile_of_sorted(sorted, 0.9) == doctest::Approx(20.0 + 0.7 * 20.0));  // position 2.7
    CHECK(percentile_of_sorted({7.0}, 0.3) == 7.0);
}

TEST_CASE("summarize: single value, empty, and infinite values") {
    const DistributionSummary one = summarize({2.5});
    CHECK(one.mean == 2.5);
    CHECK(one.stderr_mean == 0.0);
    CHECK(one.median == 2.5);
    CHECK(summarize({}).count == 0);
    const DistributionSummary with_inf = summarize({1.0, std::numeric_limits<double>::infinity()});
    CHECK(std::isinf(with_inf.mean));
    CHECK(std::isnan(with_inf.stderr_mean));
    CHECK(std::isinf(with_inf.max));
}

TEST_CASE("proportion and root mean square") {
    const MeanWithError p = proportion(3, 4);
    CHECK(p.mean == 0.75);
    CHECK(p.stderr_mean == doctest::Approx(std::sqrt(0.75 * 0.25 / 3.0)).epsilon(1e-15));
    CHECK(proportion(5, 5).stderr_mean == 0.0);
    CHECK(proportion(0, 0).mean == 0.0);

    const MeanWithError rms = root_mean_square({3.0, -4.0});
    CHECK(rms.mean == doctest::Approx(std::sqrt(12.5)).epsilon(1e-15));
    // squares 9, 16: mean 12.5, sample sd 7 / sqrt(2), standard error 3.5; delta method / (2 rms).
    CHECK(rms.stderr_mean == doctest::Approx(3.5 / (2.0 * std::sqrt(12.5))).epsilon(1e-14));
}
