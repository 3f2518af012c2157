// block.cuh - one block of the few-token e4m3 decode kernels (kernel.cu: bf16 Q, kernel_q.cu:
// e4m3 Q): the block's token tile and KV head, its keys (the split's under split-KV), the first
// chunks of the K/V stream, the Q load, the key loop and the output.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/verify_e4m3_d512/epilogue.cuh"
#include "fp8/verify_e4m3_d512/loads.cuh"
#include "fp8/verify_e4m3_d512/mainloop.cuh"
#include "fp8/verify_e4m3_d512/traits.h"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/tile_order.cuh"

namespace wideattn::verify_e4m3 {

template <bool kQIsE4m3, bool kSplit>
__device__ __forceinline__ void verify_block(const wideattn_prefill_params& p, unsigned char* smem) {
    using Traits = VerifyE4m3D512Traits;
    using Plan = Traits::SmemPlan;
    const BlockWork work = find_block_work_by_head(p, Traits::kTileTokens);
    if (!work.tile.found) return;
    BlockGeometry geometry;
    block_geometry<Traits>(p, work, 0, &geometry);
    if constexpr (kSplit) restrict_to_split<Traits>(p, &geometry);

    const uint32_t base = ptx::shared_address(smem);
    const int32_t warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    const int32_t lane = static_cast<int32_t>(threadIdx.x) % Traits::kWarpSize;
    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    const int32_t tokens = work.tile.tile_len;
    BlockStream<Traits> stream;
    stream.init(p, work.kv_head, p.block_table + geometry.table_offset, geometry.kv_end, warp, lane);
    const uint32_t ring = base + Plan::kRing;
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunksInFlight; ++c) issue_chunk<Traits>(p, stream, ring, geometry.num_tiles, c);

    if (threadIdx.x < Traits::kRows)  // the running maxima of tile 0 (load_q ends with a barrier)
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(base + Plan::kRowMax + 4 * threadIdx.x), "f"(-INFINITY)
                     : "memory");
    float q_factor;
    if constexpr (kQIsE4m3)
        q_factor = decode_e4m3::load_q_codes<Traits>(p, base + Plan::kQ, first_token, tokens, work.kv_head);
    else
        q_factor =
            decode_e4m3::load_q<Traits>(p, base + Plan::kQ, base + Plan::kAmax, first_token, tokens, work.kv_head);
    const float score_scale = p.softmax_scale * kLog2e * q_factor * __ldg(p.k_scale);
    float o[Traits::kOMTiles][Traits::kTileTokens][4];
#pragma unroll
    for (int32_t m = 0; m < Traits::kOMTiles; ++m) zero_output(o[m]);
    LaneRows<Traits> rows;
#pragma unroll
    for (int32_t j = 0; j < Traits::kTileTokens; ++j)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) rows.sum[j][r] = 0.0f;
    key_loop<Traits>(p, stream, ring, base + Plan::kQ, base + Plan::kPartial, base + Plan::kRowStats,
                     base + Plan::kRowMax, base + Plan::kP, warp, lane, tokens, geometry.num_tiles,
                     geometry.row_key_end, geometry.kv_end, score_scale, o, rows);
    const uint32_t final_max = base + Plan::kRowMax + static_cast<uint32_t>((geometry.num_tiles % 2) * Traits::kRows * 4);
    write_block<Traits, kSplit>(p, base + Plan::kOut, base + Plan::kRowStats, final_max, o, rows, warp, lane,
                                first_token, tokens, work.kv_head);
}

}  // namespace wideattn::verify_e4m3
