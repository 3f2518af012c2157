// scale_check.h - the per-tensor scale (wideattn_compute_scale, wideattn_compute_scale_pow2) and the flat Q destination of
// wideattn_quantize_to_cache on the GPU, bit for bit against the CPU reference
// (fp8/codec/quantize_reference.h). Outputs are poisoned before every launch. Shared by
// `wideattn selftest` and the GPU test suite.
//   1. amax -> quantise with no host round trip: compute_scale then quantize_to_cache on one
//      stream with the same device scale pointer; strided K with NaN/inf inputs, padding
//      tokens holding an outlier and a NaN that must not count, a scale buffer poisoned to NaN.
//   2. Q's amax (every token; a partly empty last block along grid.y), and Q into a flat
//      strided destination (slot_mapping NULL) with a given scale that makes inputs saturate,
//      and with the smallest scale (2^-126) where x / scale overflows float and must still
//      saturate; gaps between rows must keep their poison.
//   3. compute_scale edge cases: an all-zero tensor, an empty one (tokens = 0: memset only),
//      an all-NaN one; all get the floor 2^-126, the NaN one counts every input.
// Where the bundle has a power-of-two amax kernel (feature power_of_two), parts 1 and 3 also run
// wideattn_compute_scale_pow2: the reference scale rounded up to a power of two, bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/harness/device_problem.h"
#include "wideattn.h"

namespace wideattn {

struct ScaleCaseResult {
    std::string error;                  // non-empty: the case could not run
    std::string kernel;                 // manifest name of the amax kernel (wideattn_compute_scale's)
    std::string pow2_kernel;            // of the power-of-two one (compute_scale_pow2's); "": none, not checked
    int32_t comparisons = 0;            // device-vs-reference comparisons made
    std::vector<std::string> failures;  // one line per comparison that differed
    uint32_t scale_bits = 0;            // the device scale of part 1
    int64_t nonfinite_inputs = 0;       // NaN/inf inputs the reference counted in part 1
    int64_t saturated_q = 0;            // Q inputs the reference saturated in part 2
};

ScaleCaseResult run_scale_case(const GpuDevice& gpu, wideattn_context* ctx, uint64_t seed);

}  // namespace wideattn
