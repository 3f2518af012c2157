// test_gate.cpp - the gate's decisions: the point rule at and around the budget with its
// margins; the paired rule's verdicts on series with known shifts in standard errors, its
// margins, too-few-token and non-finite cases; the policy's validation.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/gate.h"
#include "gate_test_util.h"

using namespace wideattn::accuracy;

TEST_CASE("gate with a stated budget: accept at and below, reject just above") {
    GatePolicy policy;
    policy.source = BudgetSource::kStated;
    policy.stated_budget = 0.01;
    CHECK(decide_gate(policy, 0.01, 123.0).accept);
    CHECK(decide_gate(policy, 0.0, 123.0).accept);
    CHECK(decide_gate(policy, std::nextafter(0.01, 0.0), 123.0).accept);
    CHECK_FALSE(decide_gate(policy, std::nextafter(0.01, 1.0), 123.0).accept);
    CHECK_FALSE(decide_gate(policy, 0.02, 0.0).accept);
    const GateDecision d = decide_gate(policy, 0.005, 123.0);
    CHECK(d.base_budget == 0.01);  // the baseline number is ignored with a stated budget
    CHECK(d.budget == 0.01);
    CHECK(d.reason.find("<=") != std::string::npos);
}

TEST_CASE("gate against the baseline with absolute and relative margins") {
    GatePolicy policy;
    policy.source = BudgetSource::kBaseline;
    const double baseline = 0.004;
    CHECK(decide_gate(policy, baseline, baseline).accept);
    CHECK_FALSE(decide_gate(policy, std::nextafter(baseline, 1.0), baseline).accept);

    policy.margin_absolute = 0.001;
    GateDecision d = decide_gate(policy, 0.005, baseline);
    CHECK(d.budget == doctest::Approx(0.005));
    CHECK(decide_gate(policy, 0.0049, baseline).accept);
    CHECK_FALSE(decide_gate(policy, 0.0051, baseline).accept);

    policy.margin_absolute = 0.0;
    policy.margin_relative = 0.05;
    d = decide_gate(policy, 0.0, baseline);
    CHECK(d.budget == doctest::Approx(0.0042).epsilon(1e-15));
    CHECK(decide_gate(policy, 0.00419, baseline).accept);
    CHECK_FALSE(decide_gate(policy, 0.00421, baseline).accept);

    policy.margin_absolute = 0.001;  // both: base * (1 + rel) + abs
    CHECK(decide_gate(policy, 0.0, baseline).budget == doctest::Approx(0.0052).epsilon(1e-15));
}

TEST_CASE("gate rejects non-finite drift") {
    GatePolicy policy;
    policy.stated_budget = 1e9;
    CHECK_FALSE(decide_gate(policy, std::numeric_limits<double>::infinity(), 0.0).accept);
    CHECK_FALSE(decide_gate(policy, std::numeric_limits<double>::quiet_NaN(), 0.0).accept);
}

TEST_CASE("gate policy validation names the bad option") {
    GatePolicy policy;
    CHECK(validate_gate_policy(policy).empty());
    policy.stated_budget = -1.0;
    CHECK(validate_gate_policy(policy).find("--budget") != std::string::npos);
    policy.stated_budget = 0.1;
    policy.margin_absolute = -0.5;
    CHECK(validate_gate_policy(policy).find("--margin") != std::string::npos);
    policy.margin_absolute = 0.0;
    policy.margin_relative = std::numeric_limits<double>::infinity();
    CHECK(validate_gate_policy(policy).find("--margin-rel") != std::string::npos);
}

namespace {

using wideattn::accuracy::testing::ar1_series;
using wideattn::accuracy::testing::long_double_batch_means;

GatePolicy paired_policy(int64_t block_tokens = 0) {
    GatePolicy policy;
    policy.rule = GateRule::kPaired;
    policy.source = BudgetSource::kBaseline;
    policy.block_tokens = block_tokens;
    return policy;
}

// Baseline KL values and candidate = baseline + shift + noise, the noise centred (mean 0 up to
// rounding) and independent, so that the shift is a known number of standard errors.
struct PairedCase {
    std::vector<double> baseline, candidate;
    double stderr_mean = 0.0;  // of the differences, blocks of kBlock
};
constexpr int64_t kTokens = 310, kBlock = 10;  // 31 blocks: t on 30 degrees of freedom
constexpr double kT95Df30 = 1.6972608865939578;

PairedCase shifted_case(double shift_in_stderrs) {
    PairedCase c;
    c.baseline = ar1_series(3, kTokens, 0.3, 0.05, 0.01);
    std::vector<double> noise = ar1_series(4, kTokens, 0.0, 0.0, 0.002);
    double mean = 0.0;
    for (double x : noise) mean += x / kTokens;
    for (double& x : noise) x -= mean;
    c.stderr_mean = static_cast<double>(long_double_batch_means(noise, kBlock).stderr_mean);
    for (int64_t t = 0; t < kTokens; ++t)
        c.candidate.push_back(c.baseline[t] + noise[t] + shift_in_stderrs * c.stderr_mean);
    return c;
}

}  // namespace

TEST_CASE("paired gate: identical candidate and baseline are accepted at margin 0") {
    const std::vector<double> kl = ar1_series(11, 500, 0.5, 0.1, 0.02);
    const GateDecision d = decide_paired_gate(paired_policy(), kl, kl);
    CHECK(d.verdict == GateVerdict::kAccept);
    CHECK(d.accept);
    CHECK(d.paired.differences.mean == 0.0);
    CHECK(d.paired.upper_bound == 0.0);
    CHECK(d.paired.margin == 0.0);
    CHECK(gate_exit_status(d.verdict) == 0);
}

TEST_CASE("paired gate: +3 standard errors reject, +0.5 are inconclusive, -3 accept (margin 0)") {
    const PairedCase reject = shifted_case(3.0);
    const GateDecision r = decide_paired_gate(paired_policy(kBlock), reject.candidate, reject.baseline);
    CHECK(r.verdict == GateVerdict::kReject);
    CHECK(gate_exit_status(r.verdict) == 1);
    CHECK(r.paired.degrees_of_freedom == 30);
    CHECK(r.paired.t_quantile == doctest::Approx(kT95Df30).epsilon(1e-12));
    CHECK(r.paired.differences.stderr_mean == doctest::Approx(reject.stderr_mean).epsilon(1e-9));
    CHECK(r.paired.lower_bound == doctest::Approx((3.0 - kT95Df30) * reject.stderr_mean).epsilon(1e-6));

    const PairedCase unsure = shifted_case(0.5);
    const GateDecision u = decide_paired_gate(paired_policy(kBlock), unsure.candidate, unsure.baseline);
    CHECK(u.verdict == GateVerdict::kInconclusive);
    CHECK(gate_exit_status(u.verdict) == 3);
    CHECK(u.paired.upper_bound == doctest::Approx((0.5 + kT95Df30) * unsure.stderr_mean).epsilon(1e-6));
    // At the observed variance about (t / 0.5)^2 = 11.5 times the tokens would reject.
    CHECK(u.paired.tokens_needed_verdict == GateVerdict::kReject);
    CHECK(u.paired.tokens_needed > 10 * kTokens);
    CHECK(u.paired.tokens_needed < 13 * kTokens);
    CHECK(u.reason.find("tokens would decide") != std::string::npos);

    const PairedCase better = shifted_case(-3.0);
    CHECK(decide_paired_gate(paired_policy(kBlock), better.candidate, better.baseline).verdict == GateVerdict::kAccept);
    // A margin of 4 standard errors lets the +0.5 candidate through.
    GatePolicy wide = paired_policy(kBlock);
    wide.margin_absolute = 4.0 * unsure.stderr_mean;
    CHECK(decide_paired_gate(wide, unsure.candidate, unsure.baseline).verdict == GateVerdict::kAccept);
}

TEST_CASE("paired gate: relative margin, confidence 0.5 is the point rule") {
    const PairedCase c = shifted_case(0.5);
    GatePolicy policy = paired_policy(kBlock);
    policy.margin_relative = 0.1;
    const GateDecision d = decide_paired_gate(policy, c.candidate, c.baseline);
    double base = 0.0;
    for (double x : c.baseline) base += x / kTokens;
    CHECK(d.paired.baseline_mean_kl == doctest::Approx(base).epsilon(1e-13));
    CHECK(d.paired.margin == doctest::Approx(0.1 * base).epsilon(1e-13));
    CHECK(d.verdict == GateVerdict::kAccept);  // 0.005 nats of margin, se ~1e-4
    for (double shift : {-0.5, 0.5, 3.0}) {
        const PairedCase s = shifted_case(shift);
        GatePolicy half = paired_policy(kBlock);
        half.confidence = 0.5;
        const GateDecision paired = decide_paired_gate(half, s.candidate, s.baseline);
        CHECK(paired.paired.t_quantile == 0.0);
        GatePolicy point;
        point.source = BudgetSource::kBaseline;
        double cand = 0.0;
        for (double x : s.candidate) cand += x / kTokens;
        CHECK(paired.accept == decide_gate(point, cand, base).accept);
    }
}

TEST_CASE("paired gate: too few tokens, and the block length stated") {
    const std::vector<double> base = {0.1, 0.2, 0.1};
    const std::vector<double> cand = {0.1, 0.25, 0.1};
    const GateDecision one = decide_paired_gate(paired_policy(), {0.3}, {0.1});
    CHECK(one.verdict == GateVerdict::kInconclusive);
    CHECK(one.paired.tokens_needed == 0);
    CHECK(one.reason.find("fewer than 2 blocks") != std::string::npos);
    CHECK(decide_paired_gate(paired_policy(1), cand, base).paired.differences.blocks == 3);
    CHECK_THROWS_WITH_AS(decide_paired_gate(paired_policy(2), cand, base), doctest::Contains("--block-tokens 2"),
                         AccuracyError);
    CHECK_THROWS_WITH_AS(decide_paired_gate(paired_policy(), {0.1, 0.2}, base), doctest::Contains("same tokens"),
                         AccuracyError);
}

TEST_CASE("paired gate: an infinite candidate KL rejects, naming the rows") {
    std::vector<double> base(40, 0.01), cand(40, 0.01);
    cand[3] = cand[17] = std::numeric_limits<double>::infinity();
    const GateDecision d = decide_paired_gate(paired_policy(), cand, base);
    CHECK(d.verdict == GateVerdict::kReject);
    CHECK(d.paired.candidate_infinite.count == 2);
    CHECK(d.reason.find("rows 3, 17") != std::string::npos);
    cand[5] = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH_AS(decide_paired_gate(paired_policy(), cand, base), doctest::Contains("NaN"), AccuracyError);
}

TEST_CASE("an infinite or NaN baseline KL is an error naming the rows, never a budget") {
    std::vector<double> base(40, 0.01), cand(40, 0.5);
    for (int row : {2, 9, 11, 20, 21, 30, 39}) base[row] = std::numeric_limits<double>::infinity();
    CHECK_THROWS_WITH_AS(check_baseline_kl(base, "b.h5"),
                         doctest::Contains("baseline 'b.h5': KL(reference || baseline) is infinite at rows 2, 9, "
                                           "11, 20, 21 and 2 more"),
                         AccuracyError);
    CHECK_THROWS_WITH_AS(decide_paired_gate(paired_policy(), cand, base), doctest::Contains("rows 2, 9"),
                         AccuracyError);
    base.assign(40, 0.01);
    base[7] = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH_AS(check_baseline_kl(base, "b.h5"), doctest::Contains("NaN or infinite at row 7"),
                         AccuracyError);
    // The point rule never accepts against an infinite budget.
    GatePolicy point;
    point.source = BudgetSource::kBaseline;
    CHECK_FALSE(decide_gate(point, 0.5, std::numeric_limits<double>::infinity()).accept);
}

TEST_CASE("gate policy validation: the paired rule's options") {
    GatePolicy policy = paired_policy();
    CHECK(validate_gate_policy(policy).empty());
    policy.confidence = 1.0;
    CHECK(validate_gate_policy(policy).find("--confidence") != std::string::npos);
    policy.confidence = 0.4;
    CHECK(validate_gate_policy(policy).find("--confidence") != std::string::npos);
    policy.confidence = 0.5;
    CHECK(validate_gate_policy(policy).empty());
    policy.block_tokens = -3;
    CHECK(validate_gate_policy(policy).find("--block-tokens") != std::string::npos);
    policy.block_tokens = 0;
    policy.source = BudgetSource::kStated;
    CHECK(validate_gate_policy(policy).find("--baseline") != std::string::npos);
}
