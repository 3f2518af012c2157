// block.cuh - one block of decode_bf16kfvw_d512: the block's token and KV head, its keys (the
// split's under split-KV, whose first key sets the RoPE positions), the first tiles issued, the
// tables (decode_bf16kfv_d512's: k_norm's weight in fp32 and, when every weight is a bf16 value,
// as bf16 pairs; the frequencies), bf16 Q staged and folded into the Q' tile, the key loop and the end.
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/decode_bf16_d512/loads.cuh"
#include "kernels/decode_bf16kfv_d512/keys.cuh"
#include "kernels/decode_bf16kfvw_d512/epilogue.cuh"
#include "kernels/decode_bf16kfvw_d512/loads.cuh"
#include "kernels/decode_bf16kfvw_d512/mainloop.cuh"
#include "kernels/decode_bf16kfvw_d512/traits.h"

namespace wideattn::kfvw_bf16 {

template <bool kSplit>
__device__ __forceinline__ void decode_kfvw_bf16_block(const wideattn_prefill_params& p, const KFromV& kfv,
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
    const int32_t warp = block_warp % Traits::kWarpsPerGroup;
    const int64_t token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;

    // V only: k_cache is absent (NULL) in a K-from-V call and never read.
    TileStream stream;
    stream.v_base = static_cast<const unsigned char*>(p.v_cache) +
                    static_cast<int64_t>(work.kv_head) * p.v_head_stride * Traits::kElemBytes;
    stream.table_row = p.block_table + geometry.table_offset;
    stream.ring = base + Plan::kRing;
    stream.kv_end = geometry.kv_end;
    stream.count = (geometry.kv_end + Traits::kTileKeysW - 1) / Traits::kTileKeysW;
    stream.page_shift = page_shift_of(p.block_size);
    stream.sub = block_warp / Traits::kCopyWarpsPerSubTile;
    stream.vec = Traits::kCopyVecsPerWarp * (block_warp % Traits::kCopyWarpsPerSubTile) + lane;
#pragma unroll
    for (int32_t i = 0; i < Traits::kStagesInFlight; ++i) stream.issue(p, i);

    const float2 w = stage_k_from_v_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq);
    ptx::store_shared_u32(base + Plan::kWeightBf16 + 2 * decode_bf16::kBf16Bytes * threadIdx.x,
                          ptx::pack_bf16x2(w.x, w.y));
    const bool bf16_weights = __syncthreads_and(is_bf16_value(w.x) && is_bf16_value(w.y)) != 0;
    // load_q's barrier also makes the tables visible.
    decode_bf16::load_q<Traits>(p, base + Plan::kQStaging, token, work.kv_head);
    // Q loads holding a dim that may rotate: dims below rotary_dims / 2 (their partners 256 on).
    constexpr int32_t kDimsPerQLoad = Traits::kMmaK * Traits::kKStepsPerQLoad;
    const int32_t rotated_q_loads =
        min((kfv.rotary_dims / 2 + kDimsPerQLoad - 1) / kDimsPerQLoad, Traits::kQLoadsPerChunk);
    stage_folded_q(base + Plan::kQStaging, base + Plan::kFold, base + Plan::kWeight, rotated_q_loads);

    TileContext ctx;
    ctx.fold = base + Plan::kFold;
    ctx.weight = base + Plan::kWeight;
    ctx.weight_bf16 = base + Plan::kWeightBf16;
    ctx.freq = base + Plan::kFreq;
    ctx.p_tile = base + Plan::kPTiles + static_cast<uint32_t>(group * Traits::kPTileBytes);
    ctx.max_slots = base + Plan::kMaxSlots + static_cast<uint32_t>(group * Traits::kWarpsPerGroup * Traits::kGroup * 4);
    ctx.exchange = base + Plan::kExchange;
    ctx.table = CosSinTable::of(kfv);
    ctx.rotated_q_loads = rotated_q_loads;
    ctx.first_position = first_position;
    ctx.score_scale = p.softmax_scale * kLog2e;

    float o[Traits::kPvDimBlocks][4];
#pragma unroll
    for (int32_t d = 0; d < Traits::kPvDimBlocks; ++d)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) o[d][e] = 0.0f;
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    if (bf16_weights)
        key_loop<true>(p, stream, ctx, group, warp, lane, rows, o);
    else
        key_loop<false>(p, stream, ctx, group, warp, lane, rows, o);
    write_block<kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, group, warp, lane, token, work.kv_head);
}

}  // namespace wideattn::kfvw_bf16
