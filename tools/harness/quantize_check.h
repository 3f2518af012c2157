// quantize_check.h - runs wideattn_quantize_to_cache on a random paged problem (shuffled slot
// mapping, padding tokens, NaN/inf inputs, values that saturate; cache poisoned first) and
// compares the cache bytes (engine layout, or the transposed V layout) with the CPU reference
// (fp8/codec/quantize_reference.h) bit for bit.
// Shared by `wideattn selftest` and the GPU test suite.
#pragma once

#include <cstdint>
#include <string>

#include "tools/harness/device_problem.h"
#include "wideattn.h"

namespace wideattn {

struct QuantizeCaseResult {
    std::string error;            // non-empty: the case could not run
    std::string kernel;           // manifest name of the kernel that ran
    int64_t cache_bytes = 0;      // bytes compared (the whole cache, untouched slots included)
    int64_t mismatches = 0;       // bytes that differ from the reference
    int64_t nonfinite_reference = 0;
    int32_t nonfinite_device = -1;  // the kernel's counter
    int64_t saturated = 0;        // inputs beyond +-448 after scaling (reference's count)
};

// v_transposed: the cache in the transposed V layout (WIDEATTN_FLAG_V_TRANSPOSED).
QuantizeCaseResult run_quantize_case(const GpuDevice& gpu, wideattn_context* ctx, uint64_t seed,
                                     bool v_transposed = false);

}  // namespace wideattn
