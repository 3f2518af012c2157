// pair_exchange.cuh - the partial-score exchange of the mma-tier prefill kernels (BF16 and
// 8-bit): the two warps that split a 16-row m-tile's head dims each hold partial Q K^T scores of
// the same rows and keys; each stores its part, meets its partner at the pair's named barrier and
// adds the partner's part, so both end with bitwise identical sums.
#pragma once

#include <cstdint>

#include "kernels/common/ptx_mma.cuh"

namespace wideattn {

// s += the partner warp's s (warp ^ 1), through `exchange` (kNTiles float4 per lane per warp).
// `Traits` supplies kWarpSize and kDimSplit (the pair's barrier id is 1 + warp / kDimSplit).
template <class Traits, int32_t kNTiles>
__device__ __forceinline__ void add_partner_scores(uint32_t exchange, int32_t warp, int32_t lane,
                                                   float (&s)[kNTiles][4]) {
#pragma unroll
    for (int32_t n = 0; n < kNTiles; ++n)
        ptx::store_shared_f32x4(exchange + ((warp * kNTiles + n) * Traits::kWarpSize + lane) * sizeof(float4),
                                s[n][0], s[n][1], s[n][2], s[n][3]);
    ptx::named_barrier_sync(1 + warp / Traits::kDimSplit, Traits::kDimSplit * Traits::kWarpSize);
#pragma unroll
    for (int32_t n = 0; n < kNTiles; ++n) {
        const float4 other = ptx::load_shared_f32x4(
            exchange + (((warp ^ 1) * kNTiles + n) * Traits::kWarpSize + lane) * sizeof(float4));
        s[n][0] += other.x;
        s[n][1] += other.y;
        s[n][2] += other.z;
        s[n][3] += other.w;
    }
}

}  // namespace wideattn
