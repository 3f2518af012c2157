// drift_report.cpp - see drift_report.h.
#include "accuracy/drift_report.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "accuracy/json_writer.h"

namespace wideattn::accuracy {
namespace {

constexpr double kPercent = 100.0;
constexpr size_t kRoleWidth = 10;  // the role column of the dump lines

void append(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void append(std::string* out, const char* format, ...) {
    char line[512];
    va_list args;
    va_start(args, format);
    std::vsnprintf(line, sizeof line, format, args);
    va_end(args);
    *out += line;
}

void append_dump_line(std::string* out, const char* role, const LogitDumpInfo& info) {
    // Built with += rather than one bounded printf: paths and attributes may be long.
    *out += std::string(role) + std::string(kRoleWidth > std::strlen(role) ? kRoleWidth - std::strlen(role) : 0, ' ') +
            " " + info.path + "  [" + std::to_string(info.tokens) + " x " + std::to_string(info.vocab) + " " +
            logit_type_name(info.type) + "] model=\"" + info.metadata.model + "\" variant=\"" + info.metadata.variant +
            "\" engine=\"" + info.metadata.engine + "\"\n";
    for (const std::string& warning : info.warnings) *out += "warning: " + warning + "\n";
}

// The rows where a dump's KL is +inf, said plainly (they make its mean +inf).
void append_infinite_kl(std::string* out, const char* dump, const std::vector<double>& kl, const char* consequence) {
    const NonFiniteRows rows = find_nonfinite(kl);
    if (rows.count == 0) return;
    *out += std::string("warning: KL(reference || ") + dump + ") is +inf at " + rows.text() + " of " +
            std::to_string(kl.size()) + " tokens: the " + dump +
            " gives probability 0 (a logit of -inf) to tokens the reference does not, so its mean KL is +inf" +
            consequence + "\n";
}

// Percentile rows in llama.cpp's order; `scale` turns fractions into percent for delta-p.
void append_percentiles(std::string* out, const char* name, const DistributionSummary& s, double scale,
                        const char* unit) {
    const struct {
        const char* label;
        double value;
    } rows[] = {{"Maximum", s.max}, {"99.9%  ", s.p99_9}, {"99.0%  ", s.p99}, {"95.0%  ", s.p95},
                {"90.0%  ", s.p90}, {"Median ", s.median}, {"10.0%  ", s.p10}, {" 5.0%  ", s.p5},
                {" 1.0%  ", s.p1},  {" 0.1%  ", s.p0_1},  {"Minimum", s.min}};
    for (const auto& row : rows) append(out, "%s %s: %10.6f%s\n", row.label, name, row.value * scale, unit);
}

void append_drift(std::string* out, const char* title, const DriftSummary& drift) {
    append(out, "\n====== KL divergence statistics: %s ======\n", title);
    append(out, "Mean    KLD: %10.6f ± %10.6f\n", drift.kl.mean, drift.kl.stderr_mean);
    append_percentiles(out, "KLD", drift.kl, 1.0, "");
    append(out, "\n====== Token probability statistics: %s ======\n", title);
    append(out, "Same top p: %6.3f ± %5.3f %%\n", drift.top1_agreement.mean * kPercent,
           drift.top1_agreement.stderr_mean * kPercent);
    if (!drift.has_tokens) {
        append(out, "(no token ids in the dumps: delta-p statistics skipped)\n");
        return;
    }
    append(out, "Mean    Δp: %6.3f ± %5.3f %%\n", drift.delta_p.mean * kPercent, drift.delta_p.stderr_mean * kPercent);
    append_percentiles(out, "Δp", drift.delta_p, kPercent, " %");
    append(out, "RMS Δp    : %6.3f ± %5.3f %%\n", drift.rms_delta_p.mean * kPercent,
           drift.rms_delta_p.stderr_mean * kPercent);
}

void write_dump(JsonWriter* json, const LogitDumpInfo& info) {
    json->begin_object();
    if (!info.warnings.empty()) {
        json->key("warnings");
        json->begin_array();
        for (const std::string& warning : info.warnings) json->value(warning);
        json->end_array();
    }
    json->key("path");
    json->value(info.path);
    json->key("model");
    json->value(info.metadata.model);
    json->key("variant");
    json->value(info.metadata.variant);
    json->key("engine");
    json->value(info.metadata.engine);
    json->key("dtype");
    json->value(logit_type_name(info.type));
    json->key("tokens");
    json->value(info.tokens);
    json->key("vocab");
    json->value(info.vocab);
    json->end_object();
}

void write_summary(JsonWriter* json, const DistributionSummary& s) {
    const struct {
        const char* name;
        double value;
    } fields[] = {{"mean", s.mean},     {"stderr", s.stderr_mean}, {"max", s.max},   {"p99_9", s.p99_9},
                  {"p99", s.p99},       {"p95", s.p95},            {"p90", s.p90},   {"median", s.median},
                  {"p10", s.p10},       {"p5", s.p5},              {"p1", s.p1},     {"p0_1", s.p0_1},
                  {"min", s.min}};
    json->begin_object();
    json->key("count");
    json->value(s.count);
    for (const auto& field : fields) {
        json->key(field.name);
        json->value(field.value);
    }
    json->end_object();
}

void write_rows(JsonWriter* json, const NonFiniteRows& rows) {
    json->begin_array();
    for (int64_t row : rows.first) json->value(row);
    json->end_array();
}

void write_drift(JsonWriter* json, const DriftSummary& drift, const std::vector<double>& kl) {
    json->begin_object();
    json->key("kl");
    write_summary(json, drift.kl);
    const NonFiniteRows infinite = find_nonfinite(kl);
    if (infinite.count > 0) {
        json->key("kl_infinite_count");
        json->value(infinite.count);
        json->key("kl_infinite_rows");
        write_rows(json, infinite);
    }
    json->key("top1_agreement_percent");
    json->value(drift.top1_agreement.mean * kPercent);
    json->key("top1_agreement_stderr_percent");
    json->value(drift.top1_agreement.stderr_mean * kPercent);
    if (drift.has_tokens) {
        json->key("delta_p");
        write_summary(json, drift.delta_p);
        json->key("rms_delta_p");
        json->value(drift.rms_delta_p.mean);
        json->key("rms_delta_p_stderr");
        json->value(drift.rms_delta_p.stderr_mean);
    }
    json->end_object();
}

// The paired rule's fields (docs/accuracy.md section 5).
void write_paired(JsonWriter* json, const PairedStatistics& p, const GateDecision& decision) {
    const BatchMeans& d = p.differences;
    const struct {
        const char* name;
        double value;
    } numbers[] = {{"confidence", p.confidence},
                   {"mean_difference", d.mean},
                   {"stderr_difference", d.stderr_mean},
                   {"naive_stderr_difference", d.naive_stderr},
                   {"long_run_variance", d.long_run_variance},
                   {"lag1_autocorrelation", d.lag1_autocorrelation},
                   {"t_quantile", p.t_quantile},
                   {"lower_bound", p.lower_bound},
                   {"upper_bound", p.upper_bound},
                   {"margin", p.margin},
                   {"baseline_mean_kl", p.baseline_mean_kl},
                   {"candidate_mean_kl", p.candidate_mean_kl}};
    for (const auto& number : numbers) {
        json->key(number.name);
        json->value(number.value);
    }
    const struct {
        const char* name;
        int64_t value;
    } counts[] = {{"tokens", d.count},
                  {"block_tokens", d.block.block_tokens},
                  {"block_tokens_wanted", d.block.wanted_tokens},
                  {"blocks", d.blocks},
                  {"degrees_of_freedom", p.degrees_of_freedom}};
    for (const auto& count : counts) {
        json->key(count.name);
        json->value(count.value);
    }
    json->key("block_rule");
    json->value(block_rule_name(d.block.rule));
    if (decision.verdict == GateVerdict::kInconclusive && p.tokens_needed > 0) {
        json->key("tokens_needed");
        json->value(p.tokens_needed);
        json->key("tokens_needed_verdict");
        json->value(gate_verdict_name(p.tokens_needed_verdict));
    }
    if (p.candidate_infinite.count > 0) {
        json->key("candidate_infinite_count");
        json->value(p.candidate_infinite.count);
        json->key("candidate_infinite_rows");
        write_rows(json, p.candidate_infinite);
    }
}

void write_gate(JsonWriter* json, const GatePolicy& policy, const GateDecision& decision) {
    json->begin_object();
    json->key("rule");
    json->value(gate_rule_name(decision.rule));
    json->key("verdict");
    json->value(gate_verdict_name(decision.verdict));
    json->key("accept");
    json->value(decision.accept);
    json->key("exit_status");
    json->value(static_cast<int64_t>(gate_exit_status(decision.verdict)));
    json->key("margin_absolute");
    json->value(policy.margin_absolute);
    json->key("margin_relative");
    json->value(policy.margin_relative);
    if (decision.rule == GateRule::kPaired) {
        write_paired(json, decision.paired, decision);
    } else {
        json->key("budget_source");
        json->value(policy.source == BudgetSource::kStated ? "stated" : "baseline");
        json->key("base_budget");
        json->value(decision.base_budget);
        json->key("budget");
        json->value(decision.budget);
        json->key("candidate_mean_kl");
        json->value(decision.candidate_mean_kl);
    }
    json->key("reason");
    json->value(decision.reason);
    json->end_object();
}

}  // namespace

std::string format_drift_text(const DriftReport& report) {
    std::string out;
    append_dump_line(&out, "reference", report.reference_info);
    append_dump_line(&out, "candidate", report.candidate_info);
    if (report.has_baseline) append_dump_line(&out, "baseline", report.baseline_info);
    append_drift(&out, "candidate vs reference", report.candidate_drift);
    append_infinite_kl(&out, "candidate", report.candidate_kl, " (gate rejects it)");
    if (report.has_baseline) {
        append_drift(&out, "baseline vs reference", report.baseline_drift);
        append_infinite_kl(&out, "baseline", report.baseline_kl,
                           "; such a baseline cannot set a gate's budget or margin (gate exits 2)");
        append(&out, "\n====== Paired per-token KLD difference (candidate - baseline) ======\n");
        append(&out, "Mean  ΔKLD: %10.6f ± %10.6f\n", report.paired_kl_difference.mean,
               report.paired_kl_difference.stderr_mean);
        if (std::isnan(report.paired_kl_difference.mean))
            out += "(not defined: the KL of both dumps is +inf at some token, and +inf - +inf has no value)\n";
    }
    return out;
}

std::string format_gate_text(const GateDecision& decision) {
    return std::string(gate_verdict_name(decision.verdict)) + "\n" + decision.reason + "\n";
}

std::string drift_report_json(const DriftReport& report, const std::string& command, const GatePolicy* policy,
                              const GateDecision* decision) {
    JsonWriter json;
    json.begin_object();
    json.key("tool");
    json.value("wideattn accuracy");
    json.key("command");
    json.value(command);
    json.key("tokens");
    json.value(report.tokens);
    json.key("vocab");
    json.value(report.vocab);
    json.key("has_token_ids");
    json.value(report.has_tokens);
    json.key("reference");
    write_dump(&json, report.reference_info);
    json.key("candidate");
    write_dump(&json, report.candidate_info);
    if (report.has_baseline) {
        json.key("baseline");
        write_dump(&json, report.baseline_info);
    }
    json.key("candidate_drift");
    write_drift(&json, report.candidate_drift, report.candidate_kl);
    if (report.has_baseline) {
        json.key("baseline_drift");
        write_drift(&json, report.baseline_drift, report.baseline_kl);
        json.key("paired_kl_difference");
        json.begin_object();
        json.key("mean");
        json.value(report.paired_kl_difference.mean);
        json.key("stderr");
        json.value(report.paired_kl_difference.stderr_mean);
        json.end_object();
    }
    if (policy && decision) {
        json.key("gate");
        write_gate(&json, *policy, *decision);
    }
    json.end_object();
    return json.text() + "\n";
}

}  // namespace wideattn::accuracy
