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

// What the key loop and the output of a block need besides the params and the stream.
struct BlockKeys {
    uint32_t ring;
    uint32_t base;  // shared memory
    int32_t num_tiles;
    int32_t row_key_end;
    int32_t kv_end;
    float score_scale;
    int64_t first_token;
    int32_t kv_head;
    int32_t warp;
    int32_t lane;
};

// The key loop and the output for a tile of kTokens tokens.
template <bool kSplit, int32_t kTokens>
__device__ __forceinline__ void verify_tokens(const wideattn_prefill_params& p,
                                              const BlockStream<VerifyE4m3D512Traits>& stream, const BlockKeys& b) {
    using Traits = VerifyE4m3D512Traits;
    using Plan = Traits::SmemPlan;
    float o[Traits::kOMTiles][kTokens][4];
#pragma unroll
    for (int32_t m = 0; m < Traits::kOMTiles; ++m) zero_output(o[m]);
    LaneRows<Traits, kTokens> rows;
#pragma unroll
    for (int32_t j = 0; j < kTokens; ++j)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) rows.sum[j][r] = 0.0f;
    key_loop<Traits, kTokens>(p, stream, b.ring, b.base + Plan::kQ, b.base + Plan::kPartial, b.base + Plan::kRowStats,
                              b.base + Plan::kRowMax, b.base + Plan::kP, b.warp, b.lane, b.num_tiles, b.row_key_end,
                              b.kv_end, b.score_scale, o, rows);
    const uint32_t final_max = b.base + Plan::kRowMax + static_cast<uint32_t>((b.num_tiles % 2) * Traits::kRows * 4);
    write_block<Traits, kTokens, kSplit>(p, b.base + Plan::kOut, b.base + Plan::kRowStats, final_max, o, rows, b.warp,
                                         b.lane, b.first_token, b.kv_head);
}

template <bool kQIsE4m3, bool kSplit>
__device__ __forceinline__ void verify_block(const wideattn_prefill_params& p, unsigned char* smem) {
    using Traits = VerifyE4m3D512Traits;
    using Plan = Traits::SmemPlan;
    BlockWork work;
    BlockGeometry geometry;
    if (!head_order_block<Traits, kSplit>(p, &work, &geometry)) return;

    const uint32_t base = ptx::shared_address(smem);
    const int32_t warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    const int32_t lane = static_cast<int32_t>(threadIdx.x) % Traits::kWarpSize;
    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    const int32_t tokens = work.tile.tile_len;
    BlockStream<Traits> stream;
    stream.init(work.kv_head, p.block_table + geometry.table_offset, geometry.kv_end, warp, lane);
    const uint32_t ring = base + Plan::kRing;
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunksInFlight; ++c) issue_chunk<Traits>(p, stream, ring, geometry.num_tiles, c);

    if (threadIdx.x < Traits::kRows)  // the running maxima of tile 0 (load_q ends with a barrier)
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(base + Plan::kRowMax + 4 * threadIdx.x), "f"(-INFINITY)
                     : "memory");
    const float q_factor = decode_e4m3::load_block_q<Traits, kQIsE4m3>(p, base + Plan::kQ, base + Plan::kAmax,
                                                                       first_token, tokens, work.kv_head);
    const float score_scale = p.softmax_scale * kLog2e * q_factor * __ldg(p.k_scale);
    const BlockKeys keys{ring, base, geometry.num_tiles, geometry.row_key_end, geometry.kv_end, score_scale,
                         first_token, work.kv_head, warp, lane};
    switch (tokens) {
        case 1: verify_tokens<kSplit, 1>(p, stream, keys); break;
        case 2: verify_tokens<kSplit, 2>(p, stream, keys); break;
        case 3: verify_tokens<kSplit, 3>(p, stream, keys); break;
        case 4: verify_tokens<kSplit, 4>(p, stream, keys); break;
        case 5: verify_tokens<kSplit, 5>(p, stream, keys); break;
        case 6: verify_tokens<kSplit, 6>(p, stream, keys); break;
        case 7: verify_tokens<kSplit, 7>(p, stream, keys); break;
        default: verify_tokens<kSplit, Traits::kTileTokens>(p, stream, keys); break;
    }
}

}  // namespace wideattn::verify_e4m3
