// block.cuh - one block of the single-token e4m3 decode kernels (kernel.cu: bf16 Q, kernel_q.cu:
// e4m3 Q; fp8/decode_e4m3vt_d512/: the transposed V layout, by its traits): the block's token and
// KV head, its keys (the split's under split-KV), the Q load, the warps' key loops and the merge
// and output.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/decode_e4m3_d512/traits.h"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/tile_order.cuh"

namespace wideattn::decode_e4m3 {

template <class Traits, bool kQIsE4m3, bool kSplit>
__device__ __forceinline__ void decode_block(const wideattn_prefill_params& p, unsigned char* smem) {
    using Plan = typename Traits::SmemPlan;
    BlockWork work;
    BlockGeometry geometry;
    if (!head_order_block<Traits, kSplit>(p, &work, &geometry)) return;

    const uint32_t base = ptx::shared_address(smem);
    const int32_t warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    const int32_t lane = static_cast<int32_t>(threadIdx.x) % Traits::kWarpSize;
    const int64_t token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    WarpStream<Traits> stream;
    stream.init(p, work.kv_head, p.block_table + geometry.table_offset, geometry.kv_end, lane);
    const uint32_t ring = base + Plan::kRings + static_cast<uint32_t>(warp * Traits::kWarpRingBytes);
    issue_prologue<Traits>(p, stream, ring, warp, geometry.num_tiles);

    const float q_factor =
        load_block_q<Traits, kQIsE4m3>(p, base + Plan::kQ, base + Plan::kAmax, token, 1, work.kv_head);
    const float score_scale = p.softmax_scale * kLog2e * q_factor * __ldg(p.k_scale);
    float o[Traits::kONTiles][4];
    zero_output(o);
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    warp_key_loop<Traits>(p, stream, ring, base + Plan::kQ, warp, lane, geometry.num_tiles, geometry.kv_end,
                          score_scale, o, rows);
    write_block<Traits, kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, warp, lane, token,
                                work.kv_head);
}

}  // namespace wideattn::decode_e4m3
