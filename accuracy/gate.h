// gate.h - the accuracy gate: decides whether a candidate's logit drift (per-token
// KL(reference || candidate), accuracy/kl_drift.h) is within what is allowed. Two rules
// (docs/accuracy.md section 3):
//   point:  budget = base * (1 + margin_relative) + margin_absolute, base = a stated number or
//           the baseline's mean KL; ACCEPT iff the candidate's mean KL is finite and <= budget.
//   paired: non-inferiority on the per-token differences d_t = KL_t(candidate) - KL_t(baseline)
//           (same tokens, same reference) with the margin
//               M = margin_absolute + margin_relative * mean KL(baseline)
//           and the one-sided bounds mean(d) +- t(confidence, k - 1) * se(mean d), se from batch
//           means over k blocks of consecutive tokens (accuracy/batch_means.h): ACCEPT iff the
//           upper bound <= M, REJECT iff the lower bound > M, otherwise INCONCLUSIVE.
// A baseline whose KL is infinite or NaN at some token is an error, never a budget; a
// candidate whose KL is +inf at some token is rejected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accuracy/batch_means.h"

namespace wideattn::accuracy {

enum class BudgetSource { kStated, kBaseline };
enum class GateRule { kPoint, kPaired };
enum class GateVerdict { kAccept, kReject, kInconclusive };

inline constexpr double kDefaultGateConfidence = 0.95;
// Rows named in messages about non-finite KL values.
inline constexpr size_t kRowsNamed = 5;

const char* gate_rule_name(GateRule rule);           // "point", "paired"
const char* gate_verdict_name(GateVerdict verdict);  // "ACCEPT", "REJECT", "INCONCLUSIVE"
// The CLI's exit status of a verdict: 0 accept, 1 reject, 3 inconclusive (2 is an error).
int gate_exit_status(GateVerdict verdict);

struct GatePolicy {
    GateRule rule = GateRule::kPoint;
    BudgetSource source = BudgetSource::kStated;  // point rule
    double stated_budget = 0.0;     // point rule with kStated (nats, >= 0)
    double margin_absolute = 0.0;   // nats, >= 0
    double margin_relative = 0.0;   // fraction of the base budget / of the baseline's mean KL, >= 0
    double confidence = kDefaultGateConfidence;  // paired rule: one-sided, in [0.5, 1)
    int64_t block_tokens = 0;       // paired rule: tokens per block, 0 = the default length
};

// The rows (token indices) of a per-token series whose value is not finite.
struct NonFiniteRows {
    int64_t count = 0;
    std::vector<int64_t> first;  // the first kRowsNamed of them, in row order
    bool any_nan = false;
    std::string text() const;    // "rows 3, 17 and 5 more"
};
NonFiniteRows find_nonfinite(const std::vector<double>& values);

// The paired rule's numbers (GateDecision::paired).
struct PairedStatistics {
    BatchMeans differences;           // d_t = KL_t(candidate) - KL_t(baseline)
    double baseline_mean_kl = 0.0;
    double candidate_mean_kl = 0.0;
    double margin = 0.0;              // margin_absolute + margin_relative * baseline_mean_kl
    double confidence = 0.0;
    int64_t degrees_of_freedom = 0;   // blocks - 1
    double t_quantile = 0.0;          // t(confidence, degrees_of_freedom)
    double lower_bound = 0.0;         // mean(d) - t * se; -inf with fewer than 2 blocks
    double upper_bound = 0.0;         // mean(d) + t * se; +inf with fewer than 2 blocks (or an infinite d_t)
    // INCONCLUSIVE only: tokens at which the bound would clear the margin if mean(d) and the
    // long-run variance held (batch_means.h tokens_to_decide), and the verdict it would give;
    // 0 when not known (fewer than 2 blocks, or mean(d) exactly at the margin).
    int64_t tokens_needed = 0;
    GateVerdict tokens_needed_verdict = GateVerdict::kInconclusive;
    NonFiniteRows candidate_infinite;  // rows where KL_t(candidate) = +inf (then REJECT)
};

struct GateDecision {
    GateRule rule = GateRule::kPoint;
    GateVerdict verdict = GateVerdict::kReject;
    bool accept = false;           // verdict == kAccept
    double candidate_mean_kl = 0.0;
    double base_budget = 0.0;      // point rule: the stated number or the baseline's mean KL
    double budget = 0.0;           // point rule: after the margins
    PairedStatistics paired;       // paired rule
    std::string reason;            // the comparison that decided (one or more lines, no final newline)
};

// Checks the policy's numbers; returns an empty string or a message naming the bad option.
std::string validate_gate_policy(const GatePolicy& policy);

// Throws AccuracyError when the baseline's KL is NaN or infinite at some token, naming the
// first rows and `path`: such a baseline would make any budget or margin infinite.
void check_baseline_kl(const std::vector<double>& baseline_kl, const std::string& path);

// Point rule for a candidate's mean KL; baseline_mean_kl is used with BudgetSource::kBaseline.
GateDecision decide_gate(const GatePolicy& policy, double candidate_mean_kl, double baseline_mean_kl);

// Paired rule on per-token KLs of the same tokens in row order (rows of one text contiguous).
// Throws AccuracyError for series of different or zero length, a non-finite baseline KL
// (check_baseline_kl), a NaN candidate KL, or a stated block length that leaves fewer than 2
// blocks.
GateDecision decide_paired_gate(const GatePolicy& policy, const std::vector<double>& candidate_kl,
                                const std::vector<double>& baseline_kl);

}  // namespace wideattn::accuracy
