// block.cuh - one block of the single-token BF16 decode kernels (kernel.cu, kernel_w4.cu): the
// block's token and KV head, its keys (the split's under split-KV), the Q load, the warps' key
// loops and the merge and output (decode_e4m3_d512's, fp8/decode_e4m3_d512/epilogue.cuh, by the
// kernel's traits: DecodeBf16D512Traits or DecodeBf16W4D512Traits, traits.h).
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/block_timeline.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/tile_order.cuh"
#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "kernels/decode_bf16_d512/loads.cuh"
#include "kernels/decode_bf16_d512/mainloop.cuh"
#include "kernels/decode_bf16_d512/traits.h"

namespace wideattn::decode_bf16 {

// One block: its token and KV head in the head-slowest order (kernels/common/tile_order.cuh), if
// any, and its keys (its split's under split-KV).
template <class Traits, bool kSplit>
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

    load_q<Traits>(p, base + Plan::kQ, token, work.kv_head);
    const float score_scale = p.softmax_scale * kLog2e;
    float o[Traits::kONTiles][4];
    zero_output(o);
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    warp_key_loop<Traits>(p, stream, ring, base + Plan::kQ, warp, lane, geometry.num_tiles, geometry.kv_end,
                          score_scale, o, rows);
    decode_e4m3::write_block<Traits, kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, warp, lane, token,
                                work.kv_head);
}

// The body of an entry point (kernel.cu, kernel_w4.cu): the dynamic shared memory, the block, and
// its line of the block timeline as `name` where that diagnostic is built in.
template <class Traits, bool kSplit>
__device__ __forceinline__ void decode_entry(const wideattn_prefill_params& p, const char* name) {
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    const BlockTimeline timeline;
    decode_block<Traits, kSplit>(p, smem);
    timeline.finish(name);
}

}  // namespace wideattn::decode_bf16
