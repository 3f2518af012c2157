// drift_report.h - renders a DriftReport (and a gate decision) as the human-readable text
// printed by `wideattn accuracy kl|gate`, and as the JSON report (schema in docs/accuracy.md).
#pragma once

#include <string>

#include "accuracy/gate.h"
#include "accuracy/kl_drift.h"

namespace wideattn::accuracy {

// The statistics in llama.cpp's --kl-divergence layout, for the candidate and the baseline.
std::string format_drift_text(const DriftReport& report);

// The verdict line (ACCEPT, REJECT or INCONCLUSIVE), then the comparison that decided.
std::string format_gate_text(const GateDecision& decision);

// JSON document; `command` is "kl" or "gate"; policy/decision are used when not null.
std::string drift_report_json(const DriftReport& report, const std::string& command, const GatePolicy* policy,
                              const GateDecision* decision);

}  // namespace wideattn::accuracy
