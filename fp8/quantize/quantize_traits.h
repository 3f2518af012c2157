// quantize_traits.h - launch constants of the e4m3 quantise-into-cache kernel.
//   grid.x = tokens, grid.y = ceil(heads * head_dim / (kThreads * kElemsPerThread)),
//   block = kThreads, no shared memory.
#pragma once

#include <cstdint>

namespace wideattn::fp8 {

struct QuantizeE4m3Traits {
    static constexpr int32_t kThreads = 128;
    static constexpr int32_t kElemsPerThread = 8;  // one 16-byte bf16 load, one 8-byte e4m3 store
    static constexpr int32_t kElemsPerBlock = kThreads * kElemsPerThread;
    static constexpr const char* kSymbol = "wideattn_quantize_e4m3_to_cache";
};

}  // namespace wideattn::fp8
