// gate.h - the accuracy gate: accept a candidate only when its mean KL to the reference is no
// worse than the budget. The budget is a stated number or the baseline dump's mean KL to the
// same reference, optionally widened by a margin:
//     budget = base * (1 + margin_relative) + margin_absolute
// and the candidate is accepted iff its mean KL is finite and <= budget.
#pragma once

#include <string>

namespace wideattn::accuracy {

enum class BudgetSource { kStated, kBaseline };

struct GatePolicy {
    BudgetSource source = BudgetSource::kStated;
    double stated_budget = 0.0;     // used with kStated (nats, >= 0)
    double margin_absolute = 0.0;   // nats, >= 0
    double margin_relative = 0.0;   // fraction of the base budget, >= 0
};

struct GateDecision {
    bool accept = false;
    double candidate_mean_kl = 0.0;
    double base_budget = 0.0;   // the stated number or the baseline's mean KL
    double budget = 0.0;        // after the margins
    std::string reason;         // one line: the comparison that decided
};

// Checks the policy's numbers; returns an empty string or a message naming the bad field.
std::string validate_gate_policy(const GatePolicy& policy);

// Decides for a candidate's mean KL; baseline_mean_kl is used with BudgetSource::kBaseline.
GateDecision decide_gate(const GatePolicy& policy, double candidate_mean_kl, double baseline_mean_kl);

}  // namespace wideattn::accuracy
