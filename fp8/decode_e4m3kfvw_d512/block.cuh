// block.cuh - one block of decode_e4m3kfvw_d512: the block's token and KV head, its keys (the
// split's under split-KV, whose first key sets the RoPE positions), each warpgroup's first tiles
// issued, the tables (decode_e4m3kfvb_d512's: k_norm's weight, the frequencies, the w v_scale
// products where they are exact), bf16 Q and Q' staged, the warpgroups' key loops and the end.
// Form is the entry's traits: DecodeE4m3KfvWD512Traits, or a form of it whose kPipelined picks the
// pipelined key loop (decode_e4m3kfvwp_d512); every other constant is Traits'.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3kfv_d512/block.cuh"
#include "fp8/decode_e4m3kfv_d512/keys.cuh"
#include "fp8/decode_e4m3kfvw_d512/epilogue.cuh"
#include "fp8/decode_e4m3kfvw_d512/loads.cuh"
#include "fp8/decode_e4m3kfvw_d512/mainloop.cuh"
#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"

namespace wideattn::kfvw {

template <class Form, bool kSplit>
__device__ __forceinline__ void decode_kfvw_block(const wideattn_prefill_params& p, const KFromV& kfv,
                                                  unsigned char* smem) {
    using Plan = Traits::SmemPlan;
    BlockWork work;
    BlockGeometry geometry;
    if (!head_order_block<Traits, kSplit>(p, &work, &geometry)) return;
    const int32_t first_position = first_key_position(p, work, geometry);

    const uint32_t base = hopper::aligned_shared_base<Traits>(smem);
    const int32_t block_warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    const int32_t lane = static_cast<int32_t>(threadIdx.x) % Traits::kWarpSize;
    const int32_t group = block_warp / Traits::kWarpsPerGroup;
    const int64_t token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    const int32_t tiles = (geometry.kv_end + Traits::kGroupTileKeys - 1) / Traits::kGroupTileKeys;

    // V only: k_cache is absent (NULL) in a K-from-V call and never read.
    GroupStream stream;
    stream.v_base = static_cast<const unsigned char*>(p.v_cache) + work.kv_head * p.v_head_stride;
    stream.table_row = p.block_table + geometry.table_offset;
    stream.ring = base + Plan::kRings + static_cast<uint32_t>(group * Traits::kGroupRingBytes);
    stream.kv_end = geometry.kv_end;
    stream.group = group;
    stream.warp = block_warp % Traits::kWarpsPerGroup;
    stream.lane = lane;
    stream.count = tiles > group ? (tiles - group + Traits::kWarpGroups - 1) / Traits::kWarpGroups : 0;
    stream.page_shift = page_shift_of(p.block_size);
#pragma unroll
    for (int32_t i = 0; i < Traits::kStagesInFlight; ++i) stream.issue(p, i);

    const float v_scale = __ldg(p.v_scale);
    const float2 w = stage_k_from_v_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq);
    // The product table's barrier makes the other tables visible, load_q_bf16's Q.
    const bool product = decode_e4m3::stage_weight_products<Traits>(w, v_scale, base + Plan::kWeightProducts);
    decode_e4m3::load_q_bf16<Traits>(p, base + Plan::kQ, token, 1, work.kv_head);
    const int32_t rotated_blocks = decode_e4m3::rotated_pair_blocks<Traits>(kfv);

    TileContext ctx;
    ctx.fold = base + Plan::kFold;
    ctx.q_shared = base + Plan::kQ;
    ctx.weight = product ? base + Plan::kWeightProducts : base + Plan::kWeight;
    ctx.freq = base + Plan::kFreq;
    ctx.p_tile = base + Plan::kPTiles + static_cast<uint32_t>(group * Traits::kPTileBytes);
    ctx.max_slots = base + Plan::kMaxSlots + static_cast<uint32_t>(group * Traits::kWarpsPerGroup * Traits::kGroup * 4);
    ctx.table = CosSinTable::of(kfv);
    ctx.rotated_blocks = rotated_blocks;
    ctx.first_position = first_position;
    ctx.v_scale = v_scale;
    ctx.unscale = stage_folded_q(base + Plan::kQ, base + Plan::kFold, base + Plan::kWeight, base + Plan::kAmax,
                                 v_scale, rotated_blocks);
    ctx.score_scale = p.softmax_scale * kLog2e;

    float o[Traits::kPvDimBlocks][2][4];
#pragma unroll
    for (int32_t d = 0; d < Traits::kPvDimBlocks; ++d)
#pragma unroll
        for (int32_t n = 0; n < 2; ++n)
#pragma unroll
            for (int32_t e = 0; e < 4; ++e) o[d][n][e] = 0.0f;
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    if constexpr (Form::kPipelined) {
        if (product)
            group_key_loop_pipelined<Form, true>(p, stream, ctx, rows, o);
        else
            group_key_loop_pipelined<Form, false>(p, stream, ctx, rows, o);
    } else {
        if (product)
            group_key_loop<Form, true>(p, stream, ctx, rows, o);
        else
            group_key_loop<Form, false>(p, stream, ctx, rows, o);
    }
    write_block<kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, group, stream.warp, lane, token,
                        work.kv_head);
}

}  // namespace wideattn::kfvw
