// amax_traits.h - launch constants and manifest descriptions of the per-tensor e4m3 scale
// (amax) kernels: amax_e4m3 (wideattn_compute_scale) and amax_e4m3_pow2 (the scale rounded up
// to a power of two, wideattn_compute_scale_pow2; feature "power_of_two"), one grid.
//   grid.x = ceil(tokens / kTokensPerBlock), grid.y = ceil(heads * head_dim / (kThreads *
//   kElemsPerThread)), block = kThreads, no dynamic shared memory. In the manifest,
//   tile.tokens = kTokensPerBlock and tile.keys = kElemsPerThread (elements per thread), which
//   is all the dispatcher needs to rebuild this grid.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn::fp8 {

// The launch constants both amax kernels share, and their manifest description.
struct AmaxE4m3Launch {
    static constexpr int32_t kThreads = 128;
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = kThreads / kWarpSize;
    static constexpr int32_t kElemsPerThread = 8;   // one 16-byte bf16 load per token
    static constexpr int32_t kTokensPerBlock = 16;  // tokens one thread walks: one atomic per 16 x 1024 inputs
    static constexpr int32_t kMaxHeadDim = 4096;
    static constexpr int32_t kMinSm = 80;

    static constexpr KernelDesc describe(const char* name, const char* symbol, const char* features) {
        return {name, symbol,
                kBF16, kE4M3, kF32,
                kElemsPerThread, kMaxHeadDim, kElemsPerThread,
                1, 1,
                kTokensPerBlock, kElemsPerThread, 1, kThreads, 0, kMinSm,
                features, kKindAmaxE4m3};
    }
};

struct AmaxE4m3Traits : AmaxE4m3Launch {
    static constexpr const char* kSymbol = "wideattn_amax_e4m3";
    static constexpr KernelDesc desc = describe("amax_e4m3", kSymbol, "slot_mapping,nonfinite_count,deterministic");
};

struct AmaxE4m3Pow2Traits : AmaxE4m3Launch {
    static constexpr const char* kSymbol = "wideattn_amax_e4m3_pow2";
    static constexpr KernelDesc desc =
        describe("amax_e4m3_pow2", kSymbol, "slot_mapping,nonfinite_count,deterministic,power_of_two");
};

}  // namespace wideattn::fp8
