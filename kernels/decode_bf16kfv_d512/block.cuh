// block.cuh - one block of the single-token decode kernel that rebuilds K from V over a BF16
// V-only cache (decode_bf16kfv_d512): the block's token and KV head, its keys (the split's under
// split-KV, whose first key sets the RoPE positions), the tables and the Q load, each warp's key
// loop over V chunks (K built from them by keys.cuh), and decode_bf16_d512's merge and output.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/k_from_v.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/decode_bf16_d512/loads.cuh"
#include "kernels/decode_bf16_d512/mainloop.cuh"
#include "kernels/decode_bf16kfv_d512/keys.cuh"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn::decode_bf16 {

// Issues the warp's V chunk c (part c % 2 of its sub-tile c / 2, slot c % kRingChunks) when that
// sub-tile exists, by WarpStream::issue_value_lean with the sub-tile's block-table entry read
// earlier (`page`; `page_shift`: page_shift_of(block_size)), and commits a group either way (one
// group per chunk keeps the waits' counts fixed).
template <class Traits>
__device__ __forceinline__ void issue_v_chunk_from_page(const wideattn_prefill_params& p,
                                                        const WarpStream<Traits>& stream, uint32_t ring, int32_t warp,
                                                        int32_t count, int32_t c, int32_t page, int32_t page_shift) {
    const int32_t local = c / Traits::kVChunksPerSubTile;
    if (local < count) {
        const int32_t sub = warp + local * Traits::kWarps;
        const uint32_t chunk = ring + (c % Traits::kRingChunks) * Traits::kChunkBytes;
        stream.issue_value_lean(p, sub, c % Traits::kVChunksPerSubTile, chunk, page, page_shift);
    }
    ptx::cp_async_commit();
}

// The block-table entry of the warp's sub-tile `local` (its local index), or 0 past its last one
// (`page_shift`: page_shift_of(block_size)).
template <class Traits>
__device__ __forceinline__ int32_t warp_page(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                             int32_t warp, int32_t count, int32_t local, int32_t page_shift) {
    return local < count ? stream.page_of(p, warp + local * Traits::kWarps, page_shift) : 0;
}

// The warp's first chunks (both of sub-tile 0, the first of sub-tile 1) issued into its ring;
// returns sub-tile 1's block-table entry, which the key loop's first step issues from.
template <class Traits>
__device__ __forceinline__ int32_t kfv_issue_prologue(const wideattn_prefill_params& p,
                                                      const WarpStream<Traits>& stream, uint32_t ring, int32_t warp,
                                                      int32_t num_tiles) {
    static_assert(Traits::kPrologueChunks == 3 && Traits::kVChunksPerSubTile == 2,
                  "step i issues chunk 2i + 3 (sub-tile i + 1) and 2i + 4 (sub-tile i + 2)");
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
    const int32_t page_shift = page_shift_of(p.block_size);
    const int32_t page0 = warp_page<Traits>(p, stream, warp, count, 0, page_shift);
    const int32_t page1 = warp_page<Traits>(p, stream, warp, count, 1, page_shift);
    issue_v_chunk_from_page<Traits>(p, stream, ring, warp, count, 0, page0, page_shift);
    issue_v_chunk_from_page<Traits>(p, stream, ring, warp, count, 1, page0, page_shift);
    issue_v_chunk_from_page<Traits>(p, stream, ring, warp, count, 2, page1, page_shift);
    return page1;
}

// The warp's key loop over sub-tiles warp, warp + kWarps, ... < num_tiles (traits.h, the ring):
// wait for both chunks of sub-tile i, S_i with K built from them, the softmax, P V over the first
// chunk, issue chunk 2i + 3 into its slot, P V over the second, issue chunk 2i + 4.
// The block-table entry of sub-tile i + 2 is loaded at the top of step i (and the cos / sin table
// rows of sub-tile i + kCosSinRowsAhead asked of the L2, traits.h), so the copies issued at
// its end (chunk 2i + 3 of sub-tile i + 1, whose entry the previous step loaded, and chunk 2i + 4
// of sub-tile i + 2) do not wait for a table load; the copies and table loads take WarpStream's
// lean forms (a mask for a power-of-two page, no zero-fill selects on a full sub-tile).
// `bf16_weights`: every k_norm weight is a bf16 value (the block's check; `weight_bf16` holds them).
template <class Traits>
__device__ __forceinline__ void kfv_key_loop(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                             uint32_t ring, uint32_t q_shared, uint32_t weight, uint32_t weight_bf16,
                                             bool bf16_weights, uint32_t freq, const CosSinTable& table,
                                             int32_t warp, int32_t lane,
                                             int32_t num_tiles, int32_t kv_end, int32_t first_position,
                                             int32_t rotated_q_loads, float score_scale,
                                             float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    int32_t page_ahead = kfv_issue_prologue<Traits>(p, stream, ring, warp, num_tiles);
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
    const int32_t page_shift = page_shift_of(p.block_size);
    for (int32_t i = 0; i < count; ++i) {
        const int32_t first = Traits::kVChunksPerSubTile * i;
        const int32_t page_next = warp_page<Traits>(p, stream, warp, count, i + 2, page_shift);
        prefetch_cos_sin_ahead<Traits>(table, first_position, warp, i, count, lane);
        ptx::cp_async_wait<Traits::kChunksPendingAtSubTile>();
        __syncwarp();  // both chunks of sub-tile i landed for every lane
        const uint32_t lo_chunk = ring + (first % Traits::kRingChunks) * Traits::kChunkBytes;
        const uint32_t hi_chunk = ring + ((first + 1) % Traits::kRingChunks) * Traits::kChunkBytes;
        const int32_t key0 = (warp + i * Traits::kWarps) * Traits::kSubTileKeys;
        float s[4];
        if (bf16_weights)
            kfv_subtile_scores<Traits, true>(lo_chunk, hi_chunk, q_shared, weight, weight_bf16, freq, table, lane,
                                             rotated_q_loads, first_position + key0, score_scale, kv_end - key0, s);
        else
            kfv_subtile_scores<Traits, false>(lo_chunk, hi_chunk, q_shared, weight, weight_bf16, freq, table,
                                              lane, rotated_q_loads, first_position + key0, score_scale, kv_end - key0, s);
        uint32_t p0, p1;
        subtile_softmax<Traits>(s, rows, o, p0, p1);
        chunk_pv<Traits>(lo_chunk, lane, 0, p0, p1, o);
        __syncwarp();  // every lane is done with chunk 2i
        issue_v_chunk_from_page<Traits>(p, stream, ring, warp, count, first + Traits::kPrologueChunks, page_ahead,
                                        page_shift);
        chunk_pv<Traits>(hi_chunk, lane, 1, p0, p1, o);
        __syncwarp();  // every lane is done with chunk 2i + 1
        issue_v_chunk_from_page<Traits>(p, stream, ring, warp, count, first + Traits::kPrologueChunks + 1, page_next,
                                        page_shift);
        page_ahead = page_next;
    }
    ptx::cp_async_wait<0>();
}

// One block of the kernel whose traits are Traits (DecodeBf16KfvD512Traits or a form of it).
template <class Traits, bool kSplit>
__device__ __forceinline__ void decode_bf16kfv_block(const wideattn_prefill_params& p, const KFromV& kfv,
                                                     unsigned char* smem) {
    using Plan = typename Traits::SmemPlan;
    BlockWork work;
    BlockGeometry geometry;
    if (!head_order_block<Traits, kSplit>(p, &work, &geometry)) return;
    const int32_t first_position = first_key_position(p, work, geometry);

    const uint32_t base = ptx::shared_address(smem);
    const int32_t warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    const int32_t lane = static_cast<int32_t>(threadIdx.x) % Traits::kWarpSize;
    const int64_t token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    WarpStream<Traits> stream;
    stream.init_v_only(p, work.kv_head, p.block_table + geometry.table_offset, geometry.kv_end, lane);
    const uint32_t ring = base + Plan::kRings + static_cast<uint32_t>(warp * Traits::kWarpRingBytes);

    const float2 w = stage_k_from_v_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq);
    ptx::store_shared_u32(base + Plan::kWeightBf16 + 2 * kBf16Bytes * threadIdx.x, ptx::pack_bf16x2(w.x, w.y));
    const bool bf16_weights = __syncthreads_and(is_bf16_value(w.x) && is_bf16_value(w.y)) != 0;
    // load_q's barrier also makes the tables visible.
    load_q<Traits>(p, base + Plan::kQ, token, work.kv_head);
    // Q loads holding a dim that may rotate: dims below rotary_dims / 2 (their partners 256 on).
    constexpr int32_t kDimsPerQLoad = Traits::kMmaK * Traits::kKStepsPerQLoad;
    const int32_t rotated_q_loads = min((kfv.rotary_dims / 2 + kDimsPerQLoad - 1) / kDimsPerQLoad,
                                        Traits::kQLoadsPerChunk);
    const float score_scale = p.softmax_scale * kLog2e;
    float o[Traits::kONTiles][4];
    zero_output(o);
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    kfv_key_loop<Traits>(p, stream, ring, base + Plan::kQ, base + Plan::kWeight, base + Plan::kWeightBf16,
                         bf16_weights, base + Plan::kFreq, CosSinTable::of(kfv), warp, lane, geometry.num_tiles, geometry.kv_end,
                         first_position, rotated_q_loads, score_scale, o, rows);
    decode_e4m3::write_block<Traits, kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, warp, lane, token,
                                             work.kv_head);
}

}  // namespace wideattn::decode_bf16
