// block.cuh - one block of the warp-pair form of the bf16-key K-from-V decode over an e4m3 V-only
// cache (decode_e4m3kfvp_d512): 8 key streams of decode_e4m3kfvb_d512's sub-tile order, each run
// by a pair of warps that split the dims by dim-block parity. Per sub-tile a warp copies its
// dims' codes (a 4 KB chunk through its own cp.async ring of three), builds K of its pair blocks
// with decode_e4m3kfv_d512's build_k_pair (keys.cuh there), adds its partial scores to its
// partner's (kernels/common/pair_exchange.cuh, a named barrier of the pair), runs the same online
// softmax as its partner on the same sums, and adds P V of its dims to its O^T; the block's end
// merges the 8 streams (decode_e4m3_d512's write_block_part, each warp storing its dims).
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/decode_e4m3kfv_d512/block.cuh"
#include "fp8/decode_e4m3kfv_d512/keys.cuh"
#include "fp8/decode_e4m3kfvp_d512/traits.h"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/k_from_v.h"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/pair_exchange.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/tile_order.cuh"

namespace wideattn::decode_e4m3 {

// Copies the codes of warp `half`'s dim blocks of the 16 keys key0 .. key0 + 15 (one page, whose
// block-table entry is `page`; `page_shift`: page_shift_of(block_size)) into `chunk`: lane l copies
// chunk vector l % 16 of keys l / 16, l / 16 + 2, ... (chunk block b is dim block 2b + half). A
// full sub-tile in the cache takes the lean form (the slot by page_slot_of, no selects); keys past
// kv_end and a page outside the cache land as zeros without a read.
template <class Traits>
__device__ __forceinline__ void copy_half_chunk(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                                int32_t half, int32_t key0, int32_t page, uint32_t chunk,
                                                int32_t page_shift) {
    constexpr int32_t kVecsPerDimBlock = Traits::kDimBlock / Traits::kVecBytes;
    const int32_t vec = stream.lane % Traits::kChunkVecsPerRow;
    const int32_t first_row = stream.lane / Traits::kChunkVecsPerRow;
    const int32_t dim_block = Traits::kDimSplit * (vec / kVecsPerDimBlock) + half;
    const int64_t row_offset = int64_t{kVecsPerDimBlock * dim_block + vec % kVecsPerDimBlock} * Traits::kVecBytes;
    const int64_t row_step = int64_t{Traits::kRowsPerCopy} * p.v_slot_stride;
    if (page_in_cache(page, p.num_blocks) && stream.kv_end - key0 >= Traits::kSubTileKeys) {
        const unsigned char* src = stream.v_base + int64_t{page} * p.v_block_stride +
                                   int64_t{page_slot_of(key0, p.block_size, page_shift) + first_row} * p.v_slot_stride +
                                   row_offset;
#pragma unroll
        for (int32_t key = first_row; key < Traits::kSubTileKeys; key += Traits::kRowsPerCopy) {
            ptx::cp_async_16_full(chunk + swizzled<Traits::kRowBytes, Traits>(key, vec), src);
            src += row_step;
        }
        return;
    }
    const int32_t page_index = key0 / p.block_size;
    const int32_t slot0 = key0 - page_index * p.block_size;
    const bool in_cache = page_in_cache(page, p.num_blocks);
    const int32_t keys = in_cache ? min(Traits::kSubTileKeys, stream.kv_end - key0) : 0;
    const int64_t page_safe = in_cache ? page : 0;
    const unsigned char* src =
        stream.v_base + page_safe * p.v_block_stride + int64_t{slot0 + first_row} * p.v_slot_stride + row_offset;
#pragma unroll
    for (int32_t key = first_row; key < Traits::kSubTileKeys; key += Traits::kRowsPerCopy) {
        const bool valid = key < keys;
        ptx::cp_async_16(chunk + swizzled<Traits::kRowBytes, Traits>(key, vec), valid ? src : stream.v_base,
                         valid ? Traits::kVecBytes : 0);
        src += row_step;
    }
}

// Issues warp `half`'s codes of its stream's sub-tile c (slot c % kRingChunks; `page` its
// block-table entry, valid when the sub-tile exists) when that sub-tile exists, and commits a group
// either way (one group per chunk keeps the waits' counts fixed).
template <class Traits>
__device__ __forceinline__ void issue_half_chunk(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                                 uint32_t ring, int32_t stream_index, int32_t half, int32_t count,
                                                 int32_t c, int32_t page, int32_t page_shift) {
    if (c < count)
        copy_half_chunk<Traits>(p, stream, half, (stream_index + c * Traits::kWarps) * Traits::kSubTileKeys, page,
                                ring + (c % Traits::kRingChunks) * Traits::kChunkBytes, page_shift);
    ptx::cp_async_commit();
}

// Adds to acc[kHalf] the scores of 16-dim half kHalf of rotated pair block c and its partner,
// K built with the table's cos / sin (kRotateTable: the words loaded here, 8 registers, not a
// block's 16) or the formula's (kRotate): one half at a time holds half the K fragments.
template <class Traits, KFromVBuild kBuild, bool kProduct, int32_t kHalf>
__device__ __forceinline__ void rotated_half_scores(uint32_t v_stage, uint32_t q_shared, uint32_t weight,
                                                    uint32_t freq, const CosSinTable& table, int32_t lane, int32_t c,
                                                    int32_t position0, float v_scale, float (&acc)[2][4]) {
    constexpr int32_t kQBegin = 2 * kHalf, kQEnd = kQBegin + 2;
    BlockCosSin words{};
    if constexpr (kBuild == KFromVBuild::kRotateTable)
        load_block_cos_sin<Traits, kQBegin, kQEnd>(table, lane, c, position0, &words);
    uint32_t lo[2][4], hi[2][4];
    build_k_pair<Traits, kBuild, kProduct, kQBegin, kQEnd>(v_stage, weight, freq, lane, c, position0, v_scale, words,
                                                           lo, hi);
#pragma unroll
    for (int32_t b = 0; b < 2; ++b)
        accumulate_dim_half<Traits, Traits::kBf16Keys>(acc[kHalf], lo[b], hi[b], q_shared,
                                                       c + b * Traits::kPairBlockOffset, kHalf, lane);
}

// rotated_half_scores of both halves of the rotated pair blocks c = half, half + 2, ... below
// rotated_blocks.
template <class Traits, KFromVBuild kBuild, bool kProduct>
__device__ __forceinline__ void rotated_scores(uint32_t v_stage, uint32_t q_shared, uint32_t weight, uint32_t freq,
                                               const CosSinTable& table, int32_t half, int32_t lane,
                                               int32_t rotated_blocks, int32_t position0, float v_scale,
                                               float (&acc)[2][4]) {
#pragma unroll 1
    for (int32_t c = half; c < rotated_blocks; c += Traits::kDimSplit) {
        rotated_half_scores<Traits, kBuild, kProduct, 0>(v_stage, q_shared, weight, freq, table, lane, c, position0,
                                                         v_scale, acc);
        rotated_half_scores<Traits, kBuild, kProduct, 1>(v_stage, q_shared, weight, freq, table, lane, c, position0,
                                                         v_scale, acc);
    }
}

// The partial scores of warp `half` over one sub-tile (the lane's 4 values of S^T before the
// scale, its pair blocks c = half, half + 2, ... and their partners): the unrotated blocks first,
// then the rotated ones (c < rotated_blocks) with the table's cos / sin when `table` holds the
// sub-tile's valid keys, else with the formula's (rotated_scores).
template <class Traits, bool kProduct>
__device__ __forceinline__ void half_partial_scores(uint32_t v_stage, uint32_t q_shared, uint32_t weight,
                                                    uint32_t freq, const CosSinTable& table, int32_t half,
                                                    int32_t lane, int32_t rotated_blocks, int32_t position0,
                                                    float v_scale, int32_t keys_valid, float (&part)[1][4]) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const BlockCosSin no_words{};  // the scaled and formula builds read no table words
    // The first pair block of this warp's parity at or past rotated_blocks.
    const int32_t first_unrotated = rotated_blocks + ((rotated_blocks ^ half) & 1);
#pragma unroll 1
    for (int32_t c = first_unrotated; c < Traits::kPairBlockOffset; c += Traits::kDimSplit)
        kfv_pair_scores<Traits, KFromVBuild::kScale, kProduct>(v_stage, q_shared, weight, freq, lane, c, position0,
                                                               v_scale, no_words, acc);
    if (table.holds(position0, min(keys_valid, Traits::kSubTileKeys)))
        rotated_scores<Traits, KFromVBuild::kRotateTable, kProduct>(v_stage, q_shared, weight, freq, table, half, lane,
                                                                    rotated_blocks, position0, v_scale, acc);
    else
        rotated_scores<Traits, KFromVBuild::kRotate, kProduct>(v_stage, q_shared, weight, freq, table, half, lane,
                                                               rotated_blocks, position0, v_scale, acc);
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) part[0][e] = acc[0][e] + acc[1][e];
}

// One warp's key loop: its stream's sub-tiles stream_index, stream_index + kWarps, ... as
// decode_e4m3kfvb_d512's warp_key_loop_kfv runs them (wait for V_i, issue V_i+2 with the entry
// read a step ahead, the table rows of sub-tile i + 1 asked of the L2 by warp 0 of the pair), with
// the scores of the pair: this warp's part plus its partner's (the same sum in both warps), then
// scaled, keys past kv_end at -inf. `scores`: the block's exchange slots.
template <class Traits, bool kProduct>
__device__ __forceinline__ void pair_key_loop(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                              uint32_t ring, uint32_t q_shared, uint32_t weight, uint32_t freq,
                                              uint32_t scores, const CosSinTable& table, int32_t warp,
                                              int32_t lane, int32_t num_tiles, int32_t kv_end, int32_t first_position,
                                              int32_t rotated_blocks, float v_scale, float score_scale,
                                              float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    const int32_t stream_index = warp / Traits::kDimSplit, half = warp % Traits::kDimSplit;
    const int32_t count = warp_subtiles<Traits>(num_tiles, stream_index);
    const int32_t page_shift = page_shift_of(p.block_size);
    int32_t page_ahead = warp_page<Traits>(p, stream, stream_index, count, Traits::kChunksInFlight, page_shift);
    for (int32_t i = 0; i < count; ++i) {
        ptx::cp_async_wait<Traits::kChunksInFlight - 1>();  // V_i landed for every lane
        __syncwarp();                                       // every lane is done with V_i-1
        issue_half_chunk<Traits>(p, stream, ring, stream_index, half, count, i + Traits::kChunksInFlight, page_ahead,
                                 page_shift);
        page_ahead = warp_page<Traits>(p, stream, stream_index, count, i + Traits::kChunksInFlight + 1, page_shift);
        if (half == 0) prefetch_cos_sin_ahead<Traits>(table, first_position, stream_index, i, count, lane);
        const int32_t key0 = (stream_index + i * Traits::kWarps) * Traits::kSubTileKeys;
        const int32_t keys_valid = kv_end - key0;
        const uint32_t stage = ring + (i % Traits::kRingChunks) * Traits::kChunkBytes;
        float part[1][4];
        half_partial_scores<Traits, kProduct>(stage, q_shared, weight, freq, table, half, lane, rotated_blocks,
                                              first_position + key0, v_scale, keys_valid, part);
        add_partner_scores<Traits, 1>(scores + (i % Traits::kScoreParities) * Traits::kScoreParityBytes, warp, lane,
                                      part);
        float s[4];
        const int32_t g = lane / 4;
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[e] = g + 8 * (e / 2) < keys_valid ? part[0][e] * score_scale : -INFINITY;
        uint32_t p0, p1;
        subtile_softmax<Traits>(s, rows, o, p0, p1);
        subtile_pv<Traits>(stage, lane, p0, p1, o);
    }
    ptx::cp_async_wait<0>();
}

// One block of the kernel whose traits are Traits (DecodeE4m3KfvPD512Traits).
template <class Traits, bool kSplit>
__device__ __forceinline__ void decode_kfvp_block(const wideattn_prefill_params& p, const KFromV& kfv,
                                                  unsigned char* smem) {
    static_assert(Traits::kDimSplit == 2, "half_partial_scores takes a warp's blocks by parity");
    using Plan = typename Traits::SmemPlan;
    BlockWork work;
    BlockGeometry geometry;
    if (!head_order_block<Traits, kSplit>(p, &work, &geometry)) return;
    const int32_t first_position = first_key_position(p, work, geometry);

    const uint32_t base = ptx::shared_address(smem);
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t warp = thread / Traits::kWarpSize;
    const int32_t lane = thread % Traits::kWarpSize;
    const int32_t stream_index = warp / Traits::kDimSplit, half = warp % Traits::kDimSplit;
    const int64_t token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    // V only: k_cache is absent (NULL) in a K-from-V call and never read.
    WarpStream<Traits> stream;
    stream.k_base = nullptr;
    stream.v_base = static_cast<const unsigned char*>(p.v_cache) + work.kv_head * p.v_head_stride;
    stream.table_row = p.block_table + geometry.table_offset;
    stream.kv_end = geometry.kv_end;
    stream.lane = lane;
    const uint32_t ring = base + Plan::kRings + static_cast<uint32_t>(warp * Traits::kWarpRingBytes);
    const int32_t count = warp_subtiles<Traits>(geometry.num_tiles, stream_index);
    const int32_t page_shift = page_shift_of(p.block_size);
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunksInFlight; ++c)
        issue_half_chunk<Traits>(p, stream, ring, stream_index, half, count, c,
                                 warp_page<Traits>(p, stream, stream_index, count, c, page_shift), page_shift);

    // The tables (the first head_dim / 2 threads, two dims each) and the product table's vote; the
    // barrier also makes the tables visible.
    const float v_scale = __ldg(p.v_scale);
    bool products_allowed = true;
    if (thread < Traits::kHalfDim) {
        const float2 w = stage_k_from_v_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq);
        products_allowed = stage_weight_product_pair(w, v_scale, base + Plan::kWeightProducts);
    }
    const bool product = __syncthreads_and(products_allowed) != 0;
    load_q_bf16<Traits>(p, base + Plan::kQ, token, 1, work.kv_head);
    const float score_scale = p.softmax_scale * kLog2e;
    const int32_t rotated_blocks = rotated_pair_blocks<Traits>(kfv);

    float o[Traits::kONTiles][4];
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    zero_output(o);
    if (product)
        pair_key_loop<Traits, true>(p, stream, ring, base + Plan::kQ, base + Plan::kWeightProducts, base + Plan::kFreq,
                                    base + Plan::kScores, CosSinTable::of(kfv), warp, lane, geometry.num_tiles,
                                    geometry.kv_end, first_position, rotated_blocks, v_scale, score_scale, o, rows);
    else
        pair_key_loop<Traits, false>(p, stream, ring, base + Plan::kQ, base + Plan::kWeight, base + Plan::kFreq,
                                     base + Plan::kScores, CosSinTable::of(kfv), warp, lane, geometry.num_tiles,
                                     geometry.kv_end, first_position, rotated_blocks, v_scale, score_scale, o, rows);
    write_block_part<Traits, kSplit>(
        p, base + Plan::kMerge, base + Plan::kStats, o, rows, stream_index, half == 0,
        [half](int32_t n, int32_t g) { return Traits::o_dim_of_half(n, g, half); }, lane, token, work.kv_head);
}

}  // namespace wideattn::decode_e4m3
