// amax_traits.h - launch constants and manifest description of the per-tensor e4m3 scale
// (amax) kernel.
//   grid.x = ceil(tokens / kTokensPerBlock), grid.y = ceil(heads * head_dim / (kThreads *
//   kElemsPerThread)), block = kThreads, no dynamic shared memory. In the manifest,
//   tile.tokens = kTokensPerBlock and tile.keys = kElemsPerThread (elements per thread), which
//   is all the dispatcher needs to rebuild this grid.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn::fp8 {

struct AmaxE4m3Traits {
    static constexpr int32_t kThreads = 128;
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = kThreads / kWarpSize;
    static constexpr int32_t kElemsPerThread = 8;   // one 16-byte bf16 load per token
    static constexpr int32_t kTokensPerBlock = 16;  // tokens one thread walks: one atomic per 16 x 1024 inputs
    static constexpr int32_t kMaxHeadDim = 4096;
    static constexpr const char* kSymbol = "wideattn_amax_e4m3";

    static constexpr KernelDesc desc = {
        "amax_e4m3", kSymbol,
        kBF16, kE4M3, kF32,
        kElemsPerThread, kMaxHeadDim, kElemsPerThread,
        1, 1,
        kTokensPerBlock, kElemsPerThread, 1, kThreads, 0, 80,
        "slot_mapping,nonfinite_count,deterministic", kKindAmaxE4m3};
};

}  // namespace wideattn::fp8
