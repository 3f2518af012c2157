// test_batch_means.cpp - batch means against a long-double computation, the default block
// length rule, the tokens-to-decide search, and a coverage simulation (fixed seeds): on AR(1)
// series with lag-1 correlation 0.9 the batch-means bound covers the true mean at about the
// stated rate while the i.i.d. bound (blocks of one token) undercovers.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/batch_means.h"
#include "accuracy/student_t.h"
#include "gate_test_util.h"

using namespace wideattn::accuracy;
using wideattn::accuracy::testing::ar1_series;
using wideattn::accuracy::testing::long_double_batch_means;

namespace {

bool close(double got, long double want, double tolerance) {
    return std::fabs(static_cast<long double>(got) - want) <= tolerance * std::fabs(want);
}

// Share of `replicates` AR(1) series of n values (true mean 0) whose one-sided upper bound at
// `confidence` lies at or above 0, with blocks of block_tokens (0: the default length).
double upper_bound_coverage(int replicates, int64_t n, double rho, double confidence, int64_t block_tokens,
                            uint64_t seed) {
    int covered = 0;
    for (int r = 0; r < replicates; ++r) {
        const BatchMeans stats = batch_means(ar1_series(seed + r, n, rho, 0.0, 1.0), block_tokens);
        const double t = student_t_quantile(confidence, static_cast<double>(stats.blocks - 1));
        covered += stats.mean + t * stats.stderr_mean >= 0.0;
    }
    return static_cast<double>(covered) / replicates;
}

}  // namespace

TEST_CASE("batch means agree with a long-double computation") {
    const std::vector<double> values = ar1_series(7, 1003, 0.6, 0.25, 0.01);
    for (int64_t b : {1, 10, 17, 100}) {
        INFO("block " << b);
        const BatchMeans got = batch_means(values, b);
        const auto want = long_double_batch_means(values, b);
        CHECK(got.count == 1003);
        CHECK(got.blocks == 1003 / b);
        CHECK(got.block.rule == BlockRule::kStated);
        CHECK(close(got.mean, want.mean, 1e-14));
        CHECK(close(got.stderr_mean, want.stderr_mean, 1e-12));
        CHECK(close(got.naive_stderr, want.naive_stderr, 1e-12));
        CHECK(close(got.lag1_autocorrelation, want.lag1, 1e-12));
        CHECK(close(got.long_run_variance, want.stderr_mean * want.stderr_mean * 1003, 1e-12));
    }
    // Blocks of one token: the batch-means standard error is the i.i.d. one.
    const BatchMeans single = batch_means(values, 1);
    CHECK(close(single.stderr_mean, single.naive_stderr, 1e-13));
    // The positively correlated series' batch-means error is larger than the naive one.
    CHECK(batch_means(values, 100).stderr_mean > 1.5 * single.naive_stderr);
}

TEST_CASE("batch means: constant, short and bad series") {
    const BatchMeans constant = batch_means(std::vector<double>(50, 0.125), 0);
    CHECK(constant.mean == 0.125);
    CHECK(constant.stderr_mean == 0.0);
    CHECK(constant.lag1_autocorrelation == 0.0);
    const BatchMeans one = batch_means({0.5}, 0);
    CHECK(one.blocks == 1);
    CHECK(std::isnan(one.stderr_mean));
    CHECK(std::isnan(batch_means({1.0, 2.0, 3.0}, 2).stderr_mean));  // one block of 2
    CHECK_THROWS_AS(batch_means({}, 0), AccuracyError);
    CHECK_THROWS_WITH_AS(batch_means({1.0, 2.0}, -1), doctest::Contains("--block-tokens"), AccuracyError);
}

TEST_CASE("default block length: cube root, lag-1 autocorrelation, cap at n / 10") {
    CHECK(default_block_length(1000, 0.0).block_tokens == 10);  // 10^3 = 1000
    CHECK(default_block_length(1001, 0.0).block_tokens == 11);
    CHECK(default_block_length(1001, 0.0).rule == BlockRule::kCubeRoot);
    CHECK(default_block_length(10000, -0.4).block_tokens == 22);  // negative r: the cube root
    // r = 0.5: 2 * 0.5 / (0.05 * 0.75) = 26.67 -> 27 > ceil(10000^(1/3)) = 22.
    const BlockChoice half = default_block_length(10000, 0.5);
    CHECK(half.block_tokens == 27);
    CHECK(half.rule == BlockRule::kAutocorrelation);
    // r = 0.9 asks for 190 tokens; 1000 tokens allow at most 100 (10 blocks).
    const BlockChoice capped = default_block_length(1000, 0.9);
    CHECK(capped.wanted_tokens == 190);
    CHECK(capped.block_tokens == 100);
    CHECK(capped.rule == BlockRule::kCapped);
    CHECK(default_block_length(24, 0.0).block_tokens == 2);  // cube root 3, cap 2
    CHECK(default_block_length(9, 0.0).block_tokens == 1);
    CHECK(default_block_length(1, 0.0).block_tokens == 1);
    CHECK(default_block_length(5000, 1.0).block_tokens == 500);
    CHECK(default_block_length(5000, std::nan("")).block_tokens == 18);
}

TEST_CASE("tokens to decide: the smallest N whose bound clears the gap") {
    const double variance = 4e-4, confidence = 0.95, gap = 1e-3;
    const int64_t b = 5, n = 100;
    const int64_t needed = tokens_to_decide(gap, variance, confidence, b, n);
    REQUIRE(needed > n);
    const auto bound = [&](int64_t tokens) {
        return student_t_quantile(confidence, static_cast<double>(tokens / b - 1)) * std::sqrt(variance / tokens);
    };
    CHECK(bound(needed) < gap);
    CHECK(bound(needed - 1) >= gap);
    // Large N: close to the normal-theory (z sigma / gap)^2.
    const double z = 1.6448536269514722;
    CHECK(std::fabs(needed - z * z * variance / (gap * gap)) < 0.01 * needed);
    CHECK(tokens_to_decide(0.0, variance, confidence, b, n) == 0);
    CHECK(tokens_to_decide(gap, INFINITY, confidence, b, n) == 0);
    CHECK(tokens_to_decide(1e3, variance, confidence, b, n) == n);  // already clears at n
}

TEST_CASE("coverage of the upper bound on AR(1) series, rho 0.9 (simulation, fixed seeds)") {
    // 4000 replicates: the Monte Carlo standard error of a coverage near 0.95 is 0.0034, so the
    // band [0.93, 0.97] is about +-6 of them around the nominal rate (the default block length
    // aims at <= 5 % variance bias, i.e. coverage >= ~0.945).
    constexpr int kReplicates = 4000;
    constexpr int64_t kTokens = 4096;
    const double batch = upper_bound_coverage(kReplicates, kTokens, 0.9, 0.95, 0, 1000);
    const double naive = upper_bound_coverage(kReplicates, kTokens, 0.9, 0.95, 1, 1000);
    MESSAGE("AR(1) rho 0.9, n 4096: batch-means coverage " << batch << ", i.i.d. coverage " << naive);
    CHECK(batch >= 0.93);
    CHECK(batch <= 0.97);
    // The i.i.d. standard error is sqrt((1 - rho) / (1 + rho)) = 0.23 of the true one: the
    // bound covers only with probability Phi(1.645 * 0.23) = 0.65.
    CHECK(naive < 0.75);
    // Uncorrelated series: both cover at the stated rate.
    const double independent = upper_bound_coverage(kReplicates, kTokens, 0.0, 0.95, 0, 5000);
    MESSAGE("independent series: batch-means coverage " << independent);
    CHECK(independent >= 0.93);
    CHECK(independent <= 0.97);
}
