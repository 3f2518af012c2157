// test_row_kl.cpp - the per-row KL kernel against hand-computed values and an independent
// long-double computation; row scanning (max, argmax, NaN/inf detection).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "accuracy/row_kl.h"
#include "accuracy_test_util.h"

using namespace wideattn::accuracy;
using wideattn::accuracy::testing::naive_kl;
using wideattn::accuracy::testing::random_row;
using wideattn::accuracy::testing::relatively_close;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

double kl_of(const std::vector<float>& ref, const std::vector<float>& cand) {
    const int64_t n = static_cast<int64_t>(ref.size());
    const RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), n);
    REQUIRE(drift.ref_problem == RowProblem::kNone);
    REQUIRE(drift.cand_problem == RowProblem::kNone);
    return drift.kl;
}

}  // namespace

TEST_CASE("row KL: two-token distributions, hand computed") {
    // p = (1/2, 1/2), q = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3).
    const double expected = 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0);
    const double kl = kl_of({0.0f, 0.0f}, {static_cast<float>(std::log(0.25)), static_cast<float>(std::log(0.75))});
    // The float logits of q are rounded; compare with the exact value for those floats.
    const std::vector<float> cand = {static_cast<float>(std::log(0.25)), static_cast<float>(std::log(0.75))};
    const std::vector<float> ref = {0.0f, 0.0f};
    CHECK(relatively_close(kl, naive_kl(ref.data(), cand.data(), 2), 1e-12));
    CHECK(kl == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("row KL: zero probabilities (-inf logits)") {
    // p = (1/2, 0, 1/2), q uniform over 3: KL = ln(3/2).
    CHECK(kl_of({0.0f, kNegInf, 0.0f}, {1.0f, 1.0f, 1.0f}) == doctest::Approx(std::log(1.5)).epsilon(1e-14));
    // Both give the middle token zero: KL of (1/2, 1/2) vs (e/(1+e), 1/(1+e)).
    const double q0 = std::exp(1.0) / (1.0 + std::exp(1.0));
    const double expected = 0.5 * std::log(0.5 / q0) + 0.5 * std::log(0.5 / (1.0 - q0));
    CHECK(kl_of({0.0f, kNegInf, 0.0f}, {1.0f, kNegInf, 0.0f}) == doctest::Approx(expected).epsilon(1e-13));
    // The candidate gives zero to a token the reference does not: infinite KL.
    CHECK(std::isinf(kl_of({0.0f, 0.0f, 0.0f}, {0.0f, kNegInf, 0.0f})));
    // The candidate gives zero where the reference does too: finite.
    CHECK(std::isfinite(kl_of({0.0f, kNegInf}, {0.0f, kNegInf})));
    CHECK(kl_of({0.0f, kNegInf}, {0.0f, kNegInf}) == 0.0);
}

TEST_CASE("row KL: very peaked distribution, closed form") {
    // ref = (L, 0, ..., 0) with n tokens, cand uniform. p1 = 1 / (1 + (n-1) e^-L),
    // KL = ln n + sum p ln p = ln n + p1 ln p1 + (1 - p1) ln((1 - p1) / (n - 1)).
    const int n = 1000;
    for (float peak : {20.0f, 30.0f, 60.0f}) {
        std::vector<float> ref(n, 0.0f), cand(n, 0.0f);
        ref[7] = peak;
        const long double rest = (n - 1) * std::exp(-static_cast<long double>(peak));
        const long double p1 = 1.0L / (1.0L + rest);
        const long double tail = rest / (1.0L + rest);
        const long double expected = std::log(static_cast<long double>(n)) + p1 * std::log(p1) +
                                     tail * std::log(tail / (n - 1));
        const double kl = kl_of(ref, cand);
        CAPTURE(peak);
        CHECK(relatively_close(kl, expected, 1e-9));
        // Reversed: the candidate is the peaked one; KL(uniform || peaked) = -ln n - mean log q.
        const long double log_q_other = -std::log1p(std::exp(static_cast<long double>(peak)) + (n - 2));
        const long double log_q_peak = static_cast<long double>(peak) + log_q_other;
        const long double reversed = -std::log(static_cast<long double>(n)) -
                                     (log_q_peak + (n - 1) * log_q_other) / n;
        CHECK(relatively_close(kl_of(cand, ref), reversed, 1e-9));
    }
}

TEST_CASE("row KL: identical and shifted rows give zero") {
    const std::vector<float> row = random_row(3, 4099, -30.0, 30.0);
    CHECK(kl_of(row, row) == 0.0);
    std::vector<float> shifted(row);
    for (auto& x : shifted) x += 4.0f;  // not exact in float, so only approximately zero
    CHECK(std::fabs(kl_of(row, shifted)) < 1e-6);
}

TEST_CASE("row KL: agrees with an independent long-double computation to 1e-9 relative") {
    int64_t strictly_checked = 0;
    // Sizes with and without a vector tail; logit spreads from flat to extreme.
    for (int64_t n : {1, 2, 7, 8, 9, 1000, 4096, 262147}) {
        for (double spread : {0.1, 5.0, 30.0, 400.0}) {
            const std::vector<float> ref = random_row(static_cast<uint64_t>(n) * 31 + 1, n, -spread, spread);
            std::vector<float> cand = random_row(static_cast<uint64_t>(n) * 31 + 2, n, -0.05, 0.05);
            for (int64_t i = 0; i < n; ++i) cand[i] += ref[i];
            const long double expected = naive_kl(ref.data(), cand.data(), n);
            const double kl = kl_of(ref, cand);
            CAPTURE(n);
            CAPTURE(spread);
            CAPTURE(kl);
            CAPTURE(static_cast<double>(expected));
            if (n == 1) {
                CHECK(kl == 0.0);
            } else {
                CHECK(wideattn::accuracy::testing::kl_close(kl, expected));
            }
            if (expected > 1e-6) {
                CHECK(relatively_close(kl, expected, 1e-9));
                ++strictly_checked;
            }
        }
    }
    CHECK(strictly_checked >= 12);  // most cases have KL well above the float64 floor
}

TEST_CASE("row KL: log normalisers match log-sum-exp") {
    const std::vector<float> ref = random_row(11, 5003, -20.0, 20.0);
    const std::vector<float> cand = random_row(12, 5003, -20.0, 20.0);
    const RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), 5003);
    CHECK(relatively_close(drift.ref_log_normalizer, wideattn::accuracy::testing::naive_log_sum_exp(ref.data(), 5003), 1e-11));
    CHECK(relatively_close(drift.cand_log_normalizer, wideattn::accuracy::testing::naive_log_sum_exp(cand.data(), 5003), 1e-11));
}

TEST_CASE("row_pair_drift: argmax is the first maximum, in the vector body and the tail") {
    for (int64_t n : {5, 64, 1031}) {
        for (int64_t first : {int64_t{0}, n / 3, n - 2}) {
            std::vector<float> ref = random_row(static_cast<uint64_t>(n + first), n, -10.0, 10.0);
            std::vector<float> cand = random_row(static_cast<uint64_t>(n + first + 1), n, -10.0, 10.0);
            ref[first] = 40.0f;
            ref[n - 1] = 40.0f;  // a later tie must not win
            cand[first + 1] = 41.0f;
            const RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), n);
            CAPTURE(n);
            CAPTURE(first);
            CHECK(drift.ref_argmax == first);
            CHECK(drift.cand_argmax == first + 1);
        }
    }
}

TEST_CASE("row_pair_drift: ascending rows (a new max in every vector) still match") {
    const int64_t n = 3001;
    std::vector<float> ref(n), cand(n);
    for (int64_t i = 0; i < n; ++i) {
        ref[i] = static_cast<float>(-30.0 + 60.0 * i / n);
        cand[i] = ref[i] + static_cast<float>(0.01 * std::sin(0.1 * i));
    }
    CHECK(relatively_close(kl_of(ref, cand), naive_kl(ref.data(), cand.data(), n), 1e-9));
}

TEST_CASE("row_pair_drift reports NaN and +inf with their column") {
    std::vector<float> ref = random_row(1, 100, -1.0, 1.0), cand = random_row(2, 100, -1.0, 1.0);
    cand[42] = std::numeric_limits<float>::quiet_NaN();
    RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), 100);
    CHECK(drift.ref_problem == RowProblem::kNone);
    CHECK(drift.cand_problem == RowProblem::kNaN);
    CHECK(drift.cand_problem_column == 42);
    cand[42] = 0.0f;
    ref[99] = std::numeric_limits<float>::infinity();  // in the scalar tail
    drift = row_pair_drift(ref.data(), cand.data(), 100);
    CHECK(drift.ref_problem == RowProblem::kPositiveInfinity);
    CHECK(drift.ref_problem_column == 99);
}

TEST_CASE("scan_row: max, first argmax, and input problems with their column") {
    std::vector<float> row = random_row(5, 1031, -10.0, 10.0);
    row[700] = 50.0f;
    row[900] = 50.0f;
    RowScan scan = scan_row(row.data(), 1031);
    CHECK(scan.problem == RowProblem::kNone);
    CHECK(scan.max == 50.0f);
    CHECK(scan.argmax == 700);
    CHECK_FALSE(scan.has_negative_infinity);

    row[1030] = kNegInf;
    scan = scan_row(row.data(), 1031);
    CHECK(scan.problem == RowProblem::kNone);
    CHECK(scan.has_negative_infinity);

    row[513] = std::numeric_limits<float>::quiet_NaN();
    scan = scan_row(row.data(), 1031);
    CHECK(scan.problem == RowProblem::kNaN);
    CHECK(scan.problem_column == 513);

    row[513] = 1.0f;
    row[12] = std::numeric_limits<float>::infinity();
    scan = scan_row(row.data(), 1031);
    CHECK(scan.problem == RowProblem::kPositiveInfinity);
    CHECK(scan.problem_column == 12);

    const std::vector<float> all_zero_probability(9, kNegInf);
    CHECK(scan_row(all_zero_probability.data(), 9).problem == RowProblem::kAllNegativeInfinity);
}

TEST_CASE("row_pair_drift: blocks after the first (summed at the running max) handle inf, NaN and big jumps") {
    const int64_t n = 3000;
    const std::vector<float> base = random_row(21, n, -20.0, 20.0);
    for (int64_t column : {int64_t{700}, int64_t{2999}}) {
        std::vector<float> ref = base, cand = random_row(22, n, -20.0, 20.0);
        ref[column] = std::numeric_limits<float>::quiet_NaN();
        RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), n);
        CHECK(drift.ref_problem == RowProblem::kNaN);
        CHECK(drift.ref_problem_column == column);
        ref[column] = 1.0f;
        cand[column] = std::numeric_limits<float>::infinity();
        drift = row_pair_drift(ref.data(), cand.data(), n);
        CHECK(drift.cand_problem == RowProblem::kPositiveInfinity);
        CHECK(drift.cand_problem_column == column);
        cand[column] = kNegInf;  // zero probability where the reference has some: infinite KL
        CHECK(std::isinf(kl_of(ref, cand)));
        ref[column] = kNegInf;  // zero in both: finite, and the same as the long-double KL
        CHECK(wideattn::accuracy::testing::kl_close(kl_of(ref, cand), naive_kl(ref.data(), cand.data(), n)));
    }
    // The first block far below a later one (a jump beyond any single-pass shift) and a later
    // block far below the running max (clamped exponents).
    std::vector<float> ref = base, cand = random_row(23, n, -20.0, 20.0);
    for (int64_t i = 0; i < 512; ++i) {
        ref[i] -= 2000.0f;
        cand[i] -= 900.0f;
    }
    for (int64_t i = 1536; i < 2048; ++i) ref[i] -= 1500.0f;
    CHECK(wideattn::accuracy::testing::kl_close(kl_of(ref, cand), naive_kl(ref.data(), cand.data(), n)));
    const RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), n);
    CHECK(relatively_close(drift.ref_log_normalizer, wideattn::accuracy::testing::naive_log_sum_exp(ref.data(), n), 1e-13));
    CHECK(relatively_close(drift.cand_log_normalizer, wideattn::accuracy::testing::naive_log_sum_exp(cand.data(), n), 1e-13));
}

namespace {

// Whether row_pair_drift takes the conditioned form (x86-64 with AVX2 and FMA); elsewhere the
// exact path with its ~1e-16 absolute floor runs, and the tiny-KL checks use kl_close.
bool conditioned_form_available() {
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

RowPairDrift drift_of(const std::vector<float>& ref, const std::vector<float>& cand) {
    const RowPairDrift drift = row_pair_drift(ref.data(), cand.data(), static_cast<int64_t>(ref.size()));
    REQUIRE(drift.ref_problem == RowProblem::kNone);
    REQUIRE(drift.cand_problem == RowProblem::kNone);
    return drift;
}

// KL and both log normalisers against the long-double references: KL to 1e-9 relative of the
// centred computation (and of the textbook one where that is accurate), normalisers to 1e-11
// relative (the conditioned form's weights are good to 4e-11).
void check_against_long_double(const std::vector<float>& ref, const std::vector<float>& cand) {
    const int64_t n = static_cast<int64_t>(ref.size());
    const RowPairDrift drift = drift_of(ref, cand);
    const long double careful = wideattn::accuracy::testing::careful_kl(ref.data(), cand.data(), n);
    CAPTURE(n);
    CAPTURE(drift.kl);
    CAPTURE(static_cast<double>(careful));
    CHECK(wideattn::accuracy::testing::kl_close(drift.kl, naive_kl(ref.data(), cand.data(), n)));
    if (conditioned_form_available() || careful > 1e-6) {
        CHECK(relatively_close(drift.kl, careful, 1e-9));
    } else {
        CHECK(wideattn::accuracy::testing::kl_close(drift.kl, careful));
    }
    CHECK(relatively_close(drift.ref_log_normalizer, wideattn::accuracy::testing::naive_log_sum_exp(ref.data(), n), 1e-11));
    CHECK(relatively_close(drift.cand_log_normalizer, wideattn::accuracy::testing::naive_log_sum_exp(cand.data(), n), 1e-11));
}

std::vector<float> plus_noise(const std::vector<float>& row, uint64_t seed, double amplitude) {
    std::vector<float> out = random_row(seed, static_cast<int64_t>(row.size()), -amplitude, amplitude);
    for (size_t i = 0; i < row.size(); ++i) out[i] += row[i];
    return out;
}

}  // namespace

TEST_CASE("row KL, conditioned form: small differences, any vocab size (vector and block tails)") {
    for (int64_t n : {2, 3, 5, 511, 512, 513, 1029, 4099, 262147}) {
        const std::vector<float> ref = random_row(static_cast<uint64_t>(n) + 100, n, -8.0, 8.0);
        check_against_long_double(ref, plus_noise(ref, static_cast<uint64_t>(n) + 101, 0.06));
    }
    const std::vector<float> one = {3.5f};
    CHECK(drift_of(one, {-2.0f}).kl == 0.0);
}

TEST_CASE("row KL, conditioned form: vectors with some |cand - ref| > 1/8 (blended lanes)") {
    const int64_t n = 20011;
    const std::vector<float> ref = random_row(31, n, -10.0, 10.0);
    std::vector<float> cand = plus_noise(ref, 32, 0.05);
    const std::vector<float> jumps = random_row(33, n, -3.0, 3.0);
    for (int64_t i = 0; i < n; i += 37) cand[i] = ref[i] + jumps[i];  // |d| from 0 to 3
    check_against_long_double(ref, cand);
    // Every lane large: wholly different rows.
    check_against_long_double(ref, random_row(34, n, -10.0, 10.0));
}

TEST_CASE("row KL, conditioned form: rows it declines still match (exact path)") {
    const int64_t n = 6000;
    const std::vector<float> ref = random_row(41, n, -6.0, 6.0);
    // cand - ref above 64 somewhere (p e^v could overflow): exact path.
    std::vector<float> cand = plus_noise(ref, 42, 0.05);
    cand[3000] = ref[3000] + 100.0f;
    check_against_long_double(ref, cand);
    // The first block's mean difference (the row shift) far above the rest's: B < -1.
    std::vector<float> low_first = ref, shifted_first = plus_noise(ref, 43, 0.05);
    for (int64_t i = 0; i < 512; ++i) {
        low_first[i] -= 8.0f;
        shifted_first[i] = low_first[i] + 3.0f;
    }
    check_against_long_double(low_first, shifted_first);
    // A logit beyond 2^40: exact path (all the mass on that token, where both rows agree).
    std::vector<float> huge = random_row(45, n, -6.0, 6.0), huge_cand = random_row(46, n, -6.0, 6.0);
    huge[5] = huge_cand[5] = 2.0e12f;
    huge_cand[9] = 2.0e12f - 1.0e6f;
    const RowPairDrift huge_drift = drift_of(huge, huge_cand);
    CHECK(wideattn::accuracy::testing::kl_close(huge_drift.kl, naive_kl(huge.data(), huge_cand.data(), n)));
    CHECK(huge_drift.ref_argmax == 5);
    CHECK(huge_drift.cand_argmax == 5);
    // -inf entries: exact path; zero where both are -inf.
    std::vector<float> with_zero = ref, cand_zero = plus_noise(ref, 44, 0.05);
    with_zero[4321] = kNegInf;
    cand_zero[4321] = kNegInf;
    CHECK(wideattn::accuracy::testing::kl_close(drift_of(with_zero, cand_zero).kl,
                                                naive_kl(with_zero.data(), cand_zero.data(), n)));
}

TEST_CASE("row KL, conditioned form: very peaked rows, the peak in a later block") {
    const int64_t n = 100003;
    for (float peak : {12.0f, 25.0f, 45.0f}) {
        std::vector<float> ref = random_row(51, n, -10.0, 10.0);
        ref[70001] = peak;  // a new max far into the row: the sums are rescaled there
        std::vector<float> cand = plus_noise(ref, 52, 0.03);
        cand[70001] += 0.05f;
        CAPTURE(peak);
        check_against_long_double(ref, cand);
        CHECK(drift_of(ref, cand).ref_argmax == 70001);
    }
}

TEST_CASE("row KL, conditioned form: nearly identical rows (KL 1e-12 to 1e-8) to 1e-9 relative") {
    const int64_t n = 32771;
    const std::vector<float> ref = random_row(61, n, -8.0, 8.0);
    for (double amplitude : {3e-6, 3e-5, 3e-4}) {
        const std::vector<float> cand = plus_noise(ref, 62, amplitude);
        const long double careful = wideattn::accuracy::testing::careful_kl(ref.data(), cand.data(), n);
        CAPTURE(amplitude);
        CHECK(careful > 1e-13);
        CHECK(careful < 1e-7);
        check_against_long_double(ref, cand);
    }
}

TEST_CASE("row KL, conditioned form: candidate = reference + a constant gives zero") {
    const int64_t n = 4099;
    std::vector<float> ref(n);
    const std::vector<float> base = random_row(71, n, -16.0, 16.0);
    for (int64_t i = 0; i < n; ++i) ref[i] = std::round(base[i] * 64.0f) / 64.0f;  // exact after + 2 or + 0.75
    for (float constant : {2.0f, 0.75f}) {
        std::vector<float> cand(ref);
        for (auto& x : cand) x += constant;
        const RowPairDrift drift = drift_of(ref, cand);
        CAPTURE(constant);
        if (conditioned_form_available()) {
            CHECK(std::fabs(drift.kl) < 1e-30);
        } else {
            CHECK(std::fabs(drift.kl) < 1e-15);
        }
        CHECK(relatively_close(drift.cand_log_normalizer, static_cast<long double>(drift.ref_log_normalizer) + constant, 1e-15));
        CHECK(drift.cand_argmax == drift.ref_argmax);
    }
}
