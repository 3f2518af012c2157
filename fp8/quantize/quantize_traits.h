// quantize_traits.h - launch constants and manifest description of the e4m3
// quantise-into-cache kernel.
//   grid.x = tokens, grid.y = ceil(heads * head_dim / (kThreads * kElemsPerThread)),
//   block = kThreads, no shared memory. In the manifest, tile.tokens = 1 token per grid.x
//   row and tile.keys = kElemsPerThread (elements per thread), which is all the dispatcher
//   needs to rebuild this grid.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn::fp8 {

struct QuantizeE4m3Traits {
    static constexpr int32_t kThreads = 128;
    static constexpr int32_t kElemsPerThread = 8;  // one 16-byte bf16 load, one 8-byte e4m3 store
    static constexpr int32_t kElemsPerBlock = kThreads * kElemsPerThread;
    static constexpr int32_t kMaxHeadDim = 4096;
    static constexpr const char* kSymbol = "wideattn_quantize_e4m3_to_cache";

    static constexpr KernelDesc desc = {
        "quantize_e4m3", kSymbol,
        kBF16, kE4M3, kE4M3,
        kElemsPerThread, kMaxHeadDim, kElemsPerThread,
        1, 1,
        1, kElemsPerThread, 1, kThreads, 0, 80,
        "paged,slot_mapping,flat_destination,nonfinite_count", kKindQuantizeE4m3};
};

}  // namespace wideattn::fp8
