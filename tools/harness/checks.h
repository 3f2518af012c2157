// checks.h - runs one random problem through a kernel of the bundle (via wideattn_prefill,
// outputs poisoned first) and compares it with an fp64 reference: the CPU reference (Eigen)
// or the bundle's fp64 GPU kernel. Shared by `wideattn selftest` and the GPU test suite.
#pragma once

#include <string>

#include "accuracy/error_stats.h"
#include "tools/harness/device_problem.h"
#include "tools/harness/problem.h"

namespace wideattn {

enum class ReferenceKind { kCpu, kGpuF64 };

struct CaseResult {
    std::string error;               // non-empty: the case could not run (launch failed, ...)
    std::string kernel;              // manifest name of the kernel that ran
    accuracy::ErrorStats stats;      // output vs reference
    double lse_max_abs = 0.0;        // max |lse - lse_ref| (0 when the problem has no lse)
    int64_t lse_nonfinite = 0;       // lse values that are NaN (-inf only where the reference has it)
    bool deterministic = true;       // a second run produced bit-identical output
    double flops = 0.0;
};

// Runs `spec` with output dtype `o_dtype` and compares with the reference.
CaseResult run_case(const GpuSession& gpu, wideattn_context* ctx, const ProblemSpec& spec, int32_t o_dtype,
                    ReferenceKind reference);

}  // namespace wideattn
