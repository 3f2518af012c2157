// warpgroup_max.cuh - the named barrier of one warpgroup of a two-warpgroup block and the per-head
// maxima of a tile over the warpgroup's four warps (each warp's 16 keys reduced by shuffles, then
// exchanged through shared memory): the wgmma decode kernels decode_e4m3kfvw_d512 and
// decode_bf16kfvw_d512, whose score accumulator gives a thread keys g, g + 8 of its warp and heads
// 2t, 2t + 1 (elements e: key g + 8 (e / 2), head 2t + e % 2).
#pragma once

#include <cstdint>

#include "kernels/common/ptx_mma.cuh"

namespace wideattn {

// Named barrier of warpgroup `group` (0 is __syncthreads).
constexpr uint32_t kWarpgroupBarrierBase = 1;

template <class Traits>
__device__ __forceinline__ void warpgroup_barrier(int32_t group) {
    ptx::named_barrier_sync(kWarpgroupBarrierBase + group, Traits::kWarpGroupThreads);
}

// The maxima of heads 2t, 2t + 1 over the warpgroup's keys of the tile whose scores the thread
// holds in s: `max_slots` is the warpgroup's [warp][head] fp32 area (Traits::kGroup heads a warp).
// Ends after the warpgroup barrier; the caller's next barrier of the warpgroup must come before the
// slots are written again.
template <class Traits>
__device__ __forceinline__ void warpgroup_tile_max(const float (&s)[4], uint32_t max_slots, int32_t group,
                                                   int32_t warp, int32_t lane, float (&tile_max)[2]) {
    constexpr uint32_t kFullMask = 0xffffffffu;
    constexpr int32_t kSlotBytes = 4;
    const int32_t g = lane / 4, t = lane % 4;
    tile_max[0] = fmaxf(s[0], s[2]);
    tile_max[1] = fmaxf(s[1], s[3]);
#pragma unroll
    for (int32_t offset = 4; offset < Traits::kWarpSize; offset *= 2)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r)
            tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], offset));
    const uint32_t slot = max_slots + static_cast<uint32_t>(warp * Traits::kGroup * kSlotBytes);
    if (g == 0)
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(slot + 2 * kSlotBytes * t), "f"(tile_max[0]),
                     "f"(tile_max[1])
                     : "memory");
    warpgroup_barrier<Traits>(group);
#pragma unroll
    for (int32_t w = 0; w < Traits::kWarpsPerGroup; ++w) {
        float m0, m1;
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
                     : "=f"(m0), "=f"(m1)
                     : "r"(max_slots + static_cast<uint32_t>(w * Traits::kGroup * kSlotBytes + 2 * kSlotBytes * t))
                     : "memory");
        tile_max[0] = fmaxf(tile_max[0], m0);
        tile_max[1] = fmaxf(tile_max[1], m1);
    }
}

}  // namespace wideattn
