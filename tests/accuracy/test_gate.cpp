// test_gate.cpp - the gate's decisions at and around the budget, and its margins.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "accuracy/gate.h"

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
