// block.cuh - one block of the K-from-V decode kernels whose warps share sub-tiles
// (decode_bf16kfvw12_d512, decode_bf16kfvw16_d512; traits.h): the block's token and KV head, its
// keys (the split's under split-KV, whose first key sets the RoPE positions), the tables and Q;
// each set of kDimSplit warps streams its sub-tiles (set s: s, s + kSets, ...), each warp copying
// its own dims of a sub-tile into its ring, building K there and scoring it (keys.cuh), adding the
// set's partial scores in warp order (add_set_scores), running the softmax the set's warps share
// and O^T += V^T P^T over its own m-tiles; then the sets' O meet in shared memory and the block
// writes O and the LSE (or, in the split-KV entry, the split's partial rows), as decode_bf16_d512
// does.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/k_from_v.h"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "kernels/decode_bf16_d512/loads.cuh"
#include "kernels/decode_bf16_d512/mainloop.cuh"
#include "kernels/decode_bf16kfvw12_d512/keys.cuh"
#include "kernels/decode_bf16kfvw12_d512/traits.h"

namespace wideattn::decode_bf16 {

// Sub-tiles of set `set` among num_tiles.
template <class Traits>
__device__ __forceinline__ int32_t set_subtiles(int32_t num_tiles, int32_t set) {
    return num_tiles > set ? (num_tiles - set + Traits::kSets - 1) / Traits::kSets : 0;
}

// The block-table entry of the set's sub-tile `local` (its local index), or 0 past its last one
// (`page_shift`: page_shift_of(block_size)).
template <class Traits>
__device__ __forceinline__ int32_t set_page(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                            int32_t set, int32_t count, int32_t local, int32_t page_shift) {
    return local < count ? stream.page_of(p, set + local * Traits::kSets, page_shift) : 0;
}

// Issues the copies of the warp's dims of the set's sub-tile `local` into its ring slot
// (local % kRingSlots) from the sub-tile's block-table entry `page` when that sub-tile exists, and
// commits a group either way (one group a sub-tile keeps the waits' counts fixed). Lane l copies
// the 16-byte vector at `lane_offset` (Traits::global_vec of its local vector l %
// kVecsPerChunkRow) of key rows l / kVecsPerChunkRow, + kKeysPerCopy, ...; keys past kv_end and
// pages outside the cache are zero-filled without a read. The lean forms of
// decode_bf16kfvli_d512's copies: the first key's slot by a mask where the page holds a power of
// two of keys (`page_shift` >= 0, page_shift_of), a sub-tile whose 16 keys are all valid and in the
// cache copied without the per-key selects.
template <class Traits>
__device__ __forceinline__ void issue_set_subtile(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                                  uint32_t ring, int32_t set, int32_t count, int32_t local,
                                                  int64_t lane_offset, int32_t page, int32_t page_shift) {
    if (local < count) {
        const int32_t key0 = (set + local * Traits::kSets) * Traits::kSubTileKeys;
        const int32_t slot0 = page_slot_of(key0, p.block_size, page_shift);
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(Traits::kSubTileKeys, stream.kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const int64_t slot_stride = p.v_slot_stride * Traits::kElemBytes;
        const int32_t first_key = stream.lane / Traits::kVecsPerChunkRow;
        const int32_t vec = stream.lane % Traits::kVecsPerChunkRow;
        const unsigned char* src = stream.v_base + page_safe * (p.v_block_stride * Traits::kElemBytes) +
                                   int64_t{slot0 + first_key} * slot_stride + lane_offset;
        const uint32_t slot = ring + (local % Traits::kRingSlots) * Traits::kChunkBytes;
        if (keys == Traits::kSubTileKeys) {
#pragma unroll
            for (int32_t key = first_key; key < Traits::kSubTileKeys; key += Traits::kKeysPerCopy) {
                ptx::cp_async_16_full(slot + swizzled<Traits::kChunkRowBytes, Traits>(key, vec), src);
                src += Traits::kKeysPerCopy * slot_stride;
            }
        } else {
#pragma unroll
            for (int32_t key = first_key; key < Traits::kSubTileKeys; key += Traits::kKeysPerCopy) {
                const bool valid = key < keys;
                ptx::cp_async_16(slot + swizzled<Traits::kChunkRowBytes, Traits>(key, vec),
                                 valid ? src : stream.v_base, valid ? Traits::kVecBytes : 0);
                src += Traits::kKeysPerCopy * slot_stride;
            }
        }
    }
    ptx::cp_async_commit();
}

// The set's score of the lane's 4 S^T values: each warp's partial `part` stored for the others
// (buffer `exchange`, a float4 a lane), the set's warps met at its named barrier, and the parts
// added in warp order, so every warp of the set holds the same sums (in `part`).
template <class Traits>
__device__ __forceinline__ void add_set_scores(uint32_t exchange, int32_t warp, int32_t lane, float (&part)[4]) {
    constexpr uint32_t kLaneBytes = sizeof(float4);
    ptx::store_shared_f32x4(exchange + (warp * Traits::kWarpSize + lane) * kLaneBytes, part[0], part[1], part[2],
                            part[3]);
    const int32_t set = warp / Traits::kDimSplit;
    ptx::named_barrier_sync(1 + set, Traits::kDimSplit * Traits::kWarpSize);
    const uint32_t first = exchange + (set * Traits::kDimSplit * Traits::kWarpSize + lane) * kLaneBytes;
    float4 sum = ptx::load_shared_f32x4(first);
#pragma unroll
    for (int32_t w = 1; w < Traits::kDimSplit; ++w) {
        const float4 other = ptx::load_shared_f32x4(first + w * Traits::kWarpSize * kLaneBytes);
        sum.x += other.x;
        sum.y += other.y;
        sum.z += other.z;
        sum.w += other.w;
    }
    part[0] = sum.x;
    part[1] = sum.y;
    part[2] = sum.z;
    part[3] = sum.w;
}

// The warp's key loop over its set's sub-tiles. Step i: wait for sub-tile i (the next kRingSlots -
// 1 stay in flight; the entry of i + kRingSlots is read first), the warp's partial scores with K
// built from its slot, the set's parts added, the softmax, P V over the warp's m-tiles, then
// sub-tile i + kRingSlots issued into the slot. `rotated`: the warp's local k-steps holding a
// rotating dim; `bf16_weights`: every k_norm weight is a bf16 value (`weight_bf16` holds them).
template <class Traits>
__device__ __forceinline__ void kfvw_key_loop(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                              uint32_t ring, uint32_t exchange, uint32_t q_shared, uint32_t weight,
                                              uint32_t weight_bf16, bool bf16_weights, uint32_t freq,
                                              const CosSinTable& table, int32_t warp, int32_t lane, int32_t num_tiles,
                                              int32_t kv_end, int32_t first_position, int32_t rotated,
                                              float score_scale, float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    const int32_t set = warp / Traits::kDimSplit, rank = warp % Traits::kDimSplit;
    const int32_t count = set_subtiles<Traits>(num_tiles, set);
    const int64_t lane_offset =
        int64_t{Traits::global_vec(lane % Traits::kVecsPerChunkRow, rank)} * Traits::kVecBytes;
    const int32_t page_shift = page_shift_of(p.block_size);
#pragma unroll
    for (int32_t local = 0; local < Traits::kRingSlots; ++local)
        issue_set_subtile<Traits>(p, stream, ring, set, count, local, lane_offset,
                                  set_page<Traits>(p, stream, set, count, local, page_shift), page_shift);
    const int32_t g = lane / 4;
    for (int32_t i = 0; i < count; ++i) {
        const int32_t page_next = set_page<Traits>(p, stream, set, count, i + Traits::kRingSlots, page_shift);
        ptx::cp_async_wait<Traits::kRingSlots - 1>();
        __syncwarp();  // sub-tile i landed for every lane
        const uint32_t slot = ring + (i % Traits::kRingSlots) * Traits::kChunkBytes;
        const int32_t key0 = (set + i * Traits::kSets) * Traits::kSubTileKeys;
        const int32_t keys_valid = kv_end - key0;
        float part[4];
        if (bf16_weights)
            kfvw_partial_scores<Traits, true>(slot, q_shared, weight, weight_bf16, freq, table, lane, rank, rotated,
                                              first_position + key0, keys_valid, part);
        else
            kfvw_partial_scores<Traits, false>(slot, q_shared, weight, weight_bf16, freq, table, lane, rank, rotated,
                                               first_position + key0, keys_valid, part);
        add_set_scores<Traits>(exchange + (i % 2) * Traits::kExchangeBufferBytes, warp, lane, part);
        float s[4];
#pragma unroll
        for (int32_t e = 0; e < 4; ++e)
            s[e] = g + Traits::kMmaM / 2 * (e / 2) < keys_valid ? part[e] * score_scale : -INFINITY;
        uint32_t p0, p1;
        subtile_softmax<Traits>(s, rows, o, p0, p1);
#pragma unroll
        for (int32_t c = 0; c < Traits::kONTiles; ++c) {
            uint32_t r[4];
            ptx::ldmatrix_x4_trans(r, chunk_row_address<Traits>(slot, lane, c));
            const uint32_t a[4] = {r[0], r[2], r[1], r[3]};
            ptx::mma_bf16_16816(o[c], a, p0, p1);
        }
        __syncwarp();  // every lane is done with the slot
        issue_set_subtile<Traits>(p, stream, ring, set, count, i + Traits::kRingSlots, lane_offset, page_next,
                                  page_shift);
    }
    ptx::cp_async_wait<0>();
}

// The sets' statistics and O parts as decode_e4m3::block_row and merged_quad read them (one
// entry a set and row).
template <class Traits>
struct SetStats {
    static constexpr int32_t kWarps = Traits::kSets;
    static constexpr int32_t kRows = Traits::kRows;
    static constexpr int32_t kMergeRowBytes = Traits::kMergeRowBytes;
};

// The end of the block: each set's row maxima and sums (the set's warps hold the same ones) and
// its O^T, weighted by 2^(its max - the block max), meet in shared memory over the rings; then each
// thread adds the sets' parts of 4 outputs at a time and writes them normalised as bf16 with the
// natural-log LSE, or, in the split-KV entry, as the split's fp32 partial rows and LSE
// (kernels/common/split_partials.cuh). An empty row gets zeros and LSE -inf, a NaN row sum NaN.
template <class Traits, bool kSplit>
__device__ __forceinline__ void kfvw_write_block(const wideattn_prefill_params& p, uint32_t merge, uint32_t stats,
                                                 const float (&o)[Traits::kONTiles][4], WarpRows& rows,
                                                 int32_t warp, int32_t lane, int64_t token, int32_t kv_head) {
    using Stats = SetStats<Traits>;
    const int32_t g = lane / 4, t = lane % 4;
    const int32_t set = warp / Traits::kDimSplit, rank = warp % Traits::kDimSplit;
    if constexpr (kSplit) ptx::allow_dependent_launch();  // the merge may be scheduled (docs/design.md, split-KV)
    decode_e4m3::sum_warp_rows<Traits>(rows);
    __syncthreads();  // every warp is past its key loop: the rings are free
    if (rank == 0 && g == 0)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                             decode_e4m3::stats_address<Stats>(stats, set, 2 * t + r)),
                         "f"(rows.max_log2[r]), "f"(rows.sum[r])
                         : "memory");
    __syncthreads();
    float weight[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float top, sum;
        decode_e4m3::block_row<Stats>(stats, 2 * t + r, top, sum);
        weight[r] = decode_e4m3::warp_weight(rows.max_log2[r], top);
    }
    const uint32_t set_merge = merge + static_cast<uint32_t>(set * Traits::kRows * Traits::kMergeRowBytes);
#pragma unroll
    for (int32_t c = 0; c < Traits::kONTiles; ++c) {
        const int32_t dim = Traits::kMmaM * Traits::o_tile(c, rank) + g;
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t row = 2 * t + e % 2;
            ptx::store_shared_f32(set_merge + static_cast<uint32_t>(row * Traits::kMergeRowBytes +
                                                                    (dim + Traits::kOHalfDims * (e / 2)) * 4),
                                  o[c][e] * weight[e % 2]);
        }
    }
    __syncthreads();

    // Item i: row i / kRowItems, dims 4 (i % kRowItems) .. + 3.
    constexpr int32_t kRowItems = Traits::kHeadDim / 4;
    constexpr int32_t kItems = Traits::kRows * kRowItems;
    for (int32_t item = static_cast<int32_t>(threadIdx.x); item < kItems; item += Traits::kThreads) {
        const int32_t row = item / kRowItems;
        const int32_t dim = 4 * (item % kRowItems);
        float top, sum;
        decode_e4m3::block_row<Stats>(stats, row, top, sum);
        const float inv = inverse_row_sum(sum);
        const int32_t head = kv_head * Traits::kGroup + row;
        const int64_t part = kSplit ? split_row(p, token, head) : 0;
        decode_e4m3::store_output_quad<kSplit>(p, token, head, part, dim,
                                               decode_e4m3::merged_quad<Stats>(merge, row, dim), inv);
        if (dim == 0)
            decode_e4m3::store_row_lse<kSplit>(p, token, head, part, row_lse(top - Traits::kProbScaleLog2, sum));
    }
}

// One block of decode_bf16kfvw12_d512 or decode_bf16kfvw16_d512 (Traits).
template <class Traits, bool kSplit>
__device__ __forceinline__ void decode_bf16kfvw12_block(const wideattn_prefill_params& p, const KFromV& kfv,
                                                        unsigned char* smem) {
    using Plan = typename Traits::SmemPlan;
    BlockWork work;
    BlockGeometry geometry;
    if (!head_order_block<Traits, kSplit>(p, &work, &geometry)) return;
    const int32_t first_position = first_key_position(p, work, geometry);

    const uint32_t base = ptx::shared_address(smem);
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t warp = thread / Traits::kWarpSize;
    const int32_t lane = thread % Traits::kWarpSize;
    const int64_t token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    WarpStream<Traits> stream;
    stream.init_v_only(p, work.kv_head, p.block_table + geometry.table_offset, geometry.kv_end, lane);
    const uint32_t ring = base + Plan::kRings + static_cast<uint32_t>(warp * Traits::kWarpRingBytes);

    const float2 w = stage_k_from_v_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq);
    if (2 * thread < Traits::kHeadDim)
        ptx::store_shared_u32(base + Plan::kWeightBf16 + 2 * kBf16Bytes * thread, ptx::pack_bf16x2(w.x, w.y));
    const bool bf16_weights = __syncthreads_and(is_bf16_value(w.x) && is_bf16_value(w.y)) != 0;
    // load_q's barrier also makes the tables visible.
    load_q<Traits>(p, base + Plan::kQ, token, work.kv_head);
    const int32_t rotated = Traits::rotated_local_steps(kfv.rotary_dims, warp % Traits::kDimSplit);
    const float score_scale = p.softmax_scale * kLog2e;
    float o[Traits::kONTiles][4];
    zero_output(o);
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    kfvw_key_loop<Traits>(p, stream, ring, base + Plan::kExchange, base + Plan::kQ, base + Plan::kWeight,
                          base + Plan::kWeightBf16, bf16_weights, base + Plan::kFreq, CosSinTable::of(kfv), warp, lane,
                          geometry.num_tiles, geometry.kv_end, first_position, rotated, score_scale, o, rows);
    kfvw_write_block<Traits, kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, warp, lane, token,
                                     work.kv_head);
}

}  // namespace wideattn::decode_bf16
