// gate.cpp - see gate.h.
#include "accuracy/gate.h"

#include <cmath>
#include <cstdio>

namespace wideattn::accuracy {

std::string validate_gate_policy(const GatePolicy& policy) {
    char message[160];
    if (policy.source == BudgetSource::kStated && !(std::isfinite(policy.stated_budget) && policy.stated_budget >= 0.0)) {
        std::snprintf(message, sizeof message, "--budget must be a finite number >= 0, got %g", policy.stated_budget);
        return message;
    }
    if (!(std::isfinite(policy.margin_absolute) && policy.margin_absolute >= 0.0)) {
        std::snprintf(message, sizeof message, "--margin must be a finite number >= 0, got %g", policy.margin_absolute);
        return message;
    }
    if (!(std::isfinite(policy.margin_relative) && policy.margin_relative >= 0.0)) {
        std::snprintf(message, sizeof message, "--margin-rel must be a finite number >= 0, got %g", policy.margin_relative);
        return message;
    }
    return {};
}

GateDecision decide_gate(const GatePolicy& policy, double candidate_mean_kl, double baseline_mean_kl) {
    GateDecision decision;
    decision.candidate_mean_kl = candidate_mean_kl;
    decision.base_budget = policy.source == BudgetSource::kStated ? policy.stated_budget : baseline_mean_kl;
    decision.budget = decision.base_budget * (1.0 + policy.margin_relative) + policy.margin_absolute;
    decision.accept = std::isfinite(candidate_mean_kl) && candidate_mean_kl <= decision.budget;
    char line[256];
    std::snprintf(line, sizeof line, "candidate mean KL %.9g %s budget %.9g (%s %.9g, margin %.9g + %.9g relative)",
                  candidate_mean_kl, decision.accept ? "<=" : "is not <=", decision.budget,
                  policy.source == BudgetSource::kStated ? "stated" : "baseline mean KL", decision.base_budget,
                  policy.margin_absolute, policy.margin_relative);
    decision.reason = line;
    return decision;
}

}  // namespace wideattn::accuracy
