// gate.cpp - see gate.h.
#include "accuracy/gate.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>

#include "accuracy/accuracy_error.h"
#include "accuracy/student_t.h"

namespace wideattn::accuracy {
namespace {

constexpr double kPercent = 100.0;
constexpr double kLowestConfidence = 0.5;

std::string format(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* pattern, ...) {
    char line[512];
    va_list args;
    va_start(args, pattern);
    std::vsnprintf(line, sizeof line, pattern, args);
    va_end(args);
    return line;
}

// "0.002 + 0.1 x baseline mean KL 0.0198"
std::string margin_text(const GatePolicy& policy, double baseline_mean_kl) {
    return format("%.6g + %.6g x baseline mean KL %.6g", policy.margin_absolute, policy.margin_relative,
                  baseline_mean_kl);
}

std::string batch_text(const BatchMeans& stats) {
    return format("%lld tokens in %lld blocks of %lld (%s), lag-1 autocorrelation %.3f",
                  static_cast<long long>(stats.count), static_cast<long long>(stats.blocks),
                  static_cast<long long>(stats.block.block_tokens), block_rule_name(stats.block.rule),
                  stats.lag1_autocorrelation);
}

void explain_paired(const GatePolicy& policy, GateDecision* decision) {
    const PairedStatistics& p = decision->paired;
    const BatchMeans& d = p.differences;
    const double confidence = p.confidence * kPercent;
    std::string& reason = decision->reason;
    switch (decision->verdict) {
        case GateVerdict::kAccept:
            reason = format("paired rule, %g%% one-sided: upper bound %.6g of the mean KL difference (candidate - "
                            "baseline) <= margin %.6g", confidence, p.upper_bound, p.margin);
            break;
        case GateVerdict::kReject:
            reason = format("paired rule, %g%% one-sided: lower bound %.6g of the mean KL difference (candidate - "
                            "baseline) > margin %.6g", confidence, p.lower_bound, p.margin);
            break;
        case GateVerdict::kInconclusive:
            reason = format("paired rule, %g%% one-sided: the bounds [%.6g, %.6g] of the mean KL difference "
                            "(candidate - baseline) straddle the margin %.6g", confidence, p.lower_bound,
                            p.upper_bound, p.margin);
            break;
    }
    reason += format("\nmean difference %.6g +- %.6g (batch means; %.6g if tokens were independent), t %.6g on "
                     "%lld degrees of freedom; ", d.mean, d.stderr_mean, d.naive_stderr, p.t_quantile,
                     static_cast<long long>(p.degrees_of_freedom)) +
              batch_text(d) + "; margin " + margin_text(policy, p.baseline_mean_kl);
    if (decision->verdict != GateVerdict::kInconclusive) return;
    if (d.blocks < 2)
        reason += "\nfewer than 2 blocks: no standard error, so nothing is decided (more tokens needed)";
    else if (p.tokens_needed > 0)
        reason += format("\nabout %lld tokens would decide it at this variance (%s if the mean difference holds)",
                         static_cast<long long>(p.tokens_needed), gate_verdict_name(p.tokens_needed_verdict));
    else
        reason += "\nthe mean difference lies on the margin: no number of tokens decides it at this mean";
}

// The candidate gives probability 0 to a token the reference does not: REJECT.
void reject_infinite_candidate(const GatePolicy& policy, const NonFiniteRows& rows, int64_t count,
                               GateDecision* decision) {
    PairedStatistics& p = decision->paired;
    const double inf = std::numeric_limits<double>::infinity();
    p.candidate_infinite = rows;
    p.candidate_mean_kl = decision->candidate_mean_kl = inf;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    p.lower_bound = p.upper_bound = inf;
    p.t_quantile = nan;
    p.differences.count = count;
    p.differences.blocks = 0;
    p.differences.mean = inf;
    p.differences.stderr_mean = p.differences.naive_stderr = p.differences.long_run_variance = nan;
    p.differences.lag1_autocorrelation = nan;
    decision->verdict = GateVerdict::kReject;
    decision->reason = "paired rule: the candidate's KL is +inf at " + rows.text() +
                       " (it gives probability 0 to tokens the reference does not); margin " +
                       margin_text(policy, p.baseline_mean_kl);
}

// Bounds, verdict and tokens needed from the batch-means statistics of the differences.
void decide_from_bounds(const GatePolicy& policy, PairedStatistics* p, GateDecision* decision) {
    const BatchMeans& d = p->differences;
    if (d.blocks < 2) {
        p->t_quantile = std::numeric_limits<double>::quiet_NaN();
        p->lower_bound = -std::numeric_limits<double>::infinity();
        p->upper_bound = std::numeric_limits<double>::infinity();
        decision->verdict = GateVerdict::kInconclusive;
        return;
    }
    p->degrees_of_freedom = d.blocks - 1;
    p->t_quantile = student_t_quantile(policy.confidence, static_cast<double>(p->degrees_of_freedom));
    p->upper_bound = d.mean + p->t_quantile * d.stderr_mean;
    p->lower_bound = d.mean - p->t_quantile * d.stderr_mean;
    if (p->upper_bound <= p->margin) {
        decision->verdict = GateVerdict::kAccept;
    } else if (p->lower_bound > p->margin) {
        decision->verdict = GateVerdict::kReject;
    } else {
        decision->verdict = GateVerdict::kInconclusive;
        p->tokens_needed = tokens_to_decide(std::fabs(p->margin - d.mean), d.long_run_variance, policy.confidence,
                                            d.block.block_tokens, d.count);
        p->tokens_needed_verdict = d.mean < p->margin ? GateVerdict::kAccept : GateVerdict::kReject;
    }
}

}  // namespace

const char* gate_rule_name(GateRule rule) { return rule == GateRule::kPoint ? "point" : "paired"; }

const char* gate_verdict_name(GateVerdict verdict) {
    switch (verdict) {
        case GateVerdict::kAccept: return "ACCEPT";
        case GateVerdict::kReject: return "REJECT";
        case GateVerdict::kInconclusive: return "INCONCLUSIVE";
    }
    return "unknown";
}

int gate_exit_status(GateVerdict verdict) {
    constexpr int kAccept = 0, kReject = 1, kInconclusive = 3;
    switch (verdict) {
        case GateVerdict::kAccept: return kAccept;
        case GateVerdict::kReject: return kReject;
        case GateVerdict::kInconclusive: return kInconclusive;
    }
    return kReject;
}

std::string NonFiniteRows::text() const {
    std::string out = first.size() == 1 ? "row " : "rows ";
    for (size_t i = 0; i < first.size(); ++i) out += (i ? ", " : "") + std::to_string(first[i]);
    const int64_t more = count - static_cast<int64_t>(first.size());
    if (more > 0) out += " and " + std::to_string(more) + " more";
    return out;
}

NonFiniteRows find_nonfinite(const std::vector<double>& values) {
    NonFiniteRows rows;
    for (size_t i = 0; i < values.size(); ++i) {
        if (std::isfinite(values[i])) continue;
        ++rows.count;
        rows.any_nan = rows.any_nan || std::isnan(values[i]);
        if (rows.first.size() < kRowsNamed) rows.first.push_back(static_cast<int64_t>(i));
    }
    return rows;
}

std::string validate_gate_policy(const GatePolicy& policy) {
    if (policy.rule == GateRule::kPoint && policy.source == BudgetSource::kStated &&
        !(std::isfinite(policy.stated_budget) && policy.stated_budget >= 0.0))
        return format("--budget must be a finite number >= 0, got %g", policy.stated_budget);
    if (!(std::isfinite(policy.margin_absolute) && policy.margin_absolute >= 0.0))
        return format("--margin must be a finite number >= 0, got %g", policy.margin_absolute);
    if (!(std::isfinite(policy.margin_relative) && policy.margin_relative >= 0.0))
        return format("--margin-rel must be a finite number >= 0, got %g", policy.margin_relative);
    if (!(policy.confidence >= kLowestConfidence && policy.confidence < 1.0))
        return format("--confidence must lie in [0.5, 1), got %g", policy.confidence);
    if (policy.block_tokens < 0)
        return format("--block-tokens must be >= 1, got %lld", static_cast<long long>(policy.block_tokens));
    if (policy.rule == GateRule::kPaired && policy.source != BudgetSource::kBaseline)
        return "--rule paired needs --baseline BASE (and no --budget)";
    return {};
}

void check_baseline_kl(const std::vector<double>& baseline_kl, const std::string& path) {
    const NonFiniteRows rows = find_nonfinite(baseline_kl);
    if (rows.count == 0) return;
    throw AccuracyError("baseline '" + path + "': KL(reference || baseline) is " + (rows.any_nan ? "NaN or " : "") +
                        "infinite at " + rows.text() +
                        " (the baseline gives probability 0 to tokens the reference does not); an infinite "
                        "baseline cannot set a budget or a margin");
}

GateDecision decide_gate(const GatePolicy& policy, double candidate_mean_kl, double baseline_mean_kl) {
    GateDecision decision;
    decision.rule = GateRule::kPoint;
    decision.candidate_mean_kl = candidate_mean_kl;
    decision.base_budget = policy.source == BudgetSource::kStated ? policy.stated_budget : baseline_mean_kl;
    decision.budget = decision.base_budget * (1.0 + policy.margin_relative) + policy.margin_absolute;
    decision.accept = std::isfinite(candidate_mean_kl) && std::isfinite(decision.budget) &&
                      candidate_mean_kl <= decision.budget;
    decision.verdict = decision.accept ? GateVerdict::kAccept : GateVerdict::kReject;
    decision.reason = format("point rule: candidate mean KL %.9g %s budget %.9g (%s %.9g, margin %.9g + %.9g relative)",
                             candidate_mean_kl, decision.accept ? "<=" : "is not <=", decision.budget,
                             policy.source == BudgetSource::kStated ? "stated" : "baseline mean KL",
                             decision.base_budget, policy.margin_absolute, policy.margin_relative);
    return decision;
}

GateDecision decide_paired_gate(const GatePolicy& policy, const std::vector<double>& candidate_kl,
                                const std::vector<double>& baseline_kl) {
    if (candidate_kl.size() != baseline_kl.size())
        throw AccuracyError("paired gate: " + std::to_string(candidate_kl.size()) + " candidate KL values but " +
                            std::to_string(baseline_kl.size()) + " baseline values (the same tokens are needed)");
    if (candidate_kl.empty()) throw AccuracyError("paired gate: no tokens");
    check_baseline_kl(baseline_kl, "baseline");
    const int64_t n = static_cast<int64_t>(candidate_kl.size());
    if (policy.block_tokens > 0 && n / policy.block_tokens < 2)
        throw AccuracyError("--block-tokens " + std::to_string(policy.block_tokens) + " leaves fewer than 2 blocks of " +
                            std::to_string(n) + " tokens");

    GateDecision decision;
    decision.rule = GateRule::kPaired;
    PairedStatistics& p = decision.paired;
    p.confidence = policy.confidence;
    p.baseline_mean_kl = accurate_mean(baseline_kl);
    p.margin = policy.margin_absolute + policy.margin_relative * p.baseline_mean_kl;
    const NonFiniteRows candidate_rows = find_nonfinite(candidate_kl);
    if (candidate_rows.any_nan)
        throw AccuracyError("paired gate: the candidate's KL is NaN at " + candidate_rows.text());
    if (candidate_rows.count > 0) {
        reject_infinite_candidate(policy, candidate_rows, n, &decision);
        return decision;
    }
    p.candidate_mean_kl = decision.candidate_mean_kl = accurate_mean(candidate_kl);
    std::vector<double> differences(candidate_kl.size());
    for (size_t i = 0; i < differences.size(); ++i) differences[i] = candidate_kl[i] - baseline_kl[i];
    p.differences = batch_means(differences, policy.block_tokens);
    decide_from_bounds(policy, &p, &decision);
    decision.accept = decision.verdict == GateVerdict::kAccept;
    explain_paired(policy, &decision);
    return decision;
}

}  // namespace wideattn::accuracy
