// epilogue.cuh - finishes a block of the Hopper-tier 8-bit kernel: O (in units of v codes) times
// the per-tensor v_scale, then the shared BF16 epilogue (kernels/common/epilogue.cuh: row sums,
// normalisation, bf16 rows of valid tokens, LSE), whose m16n8 layout a warp's share of the wgmma
// accumulator has; kSplit: the split-KV form (write_partials, fp32 partials into the workspace).
#pragma once

#include <cstdint>

#include "kernels/common/epilogue.cuh"
#include "kernels/common/online_softmax.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3q {

template <class Traits, bool kSplit>
__device__ __forceinline__ void write_scaled_output(const wideattn_prefill_params& p,
                                                    float (&o)[Traits::kDimNTiles][4], RowState& state,
                                                    int64_t first_token, int32_t tile_len, int32_t row_tile,
                                                    int32_t kv_head, int32_t group, int32_t lane) {
    const float value_scale = __ldg(p.v_scale);
#pragma unroll
    for (int32_t n = 0; n < Traits::kDimNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) o[n][e] *= value_scale;
    const int32_t head = kv_head * Traits::kGroup + lane / 4;
    if constexpr (kSplit)
        write_partials<Traits>(p, o, state, first_token, tile_len, row_tile, head, group, lane);
    else
        write_output<Traits>(p, o, state, first_token, tile_len, row_tile, head, group, lane);
}

}  // namespace wideattn::hopper::e4m3q
