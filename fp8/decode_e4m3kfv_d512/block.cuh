// block.cuh - one block of the single-token decode kernel that rebuilds K from V over an e4m3
// V-only cache (decode_e4m3kfv_d512): the block's token and KV head, its keys (the split's under
// split-KV, whose first key sets the RoPE positions), the tables and the Q load, each warp's key
// loop over V chunks (K built from each by keys.cuh), and decode_e4m3_d512's merge and output.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/decode_e4m3kfv_d512/keys.cuh"
#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/k_from_v.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/tile_order.cuh"

namespace wideattn::decode_e4m3 {

// Issues the V codes of the warp's sub-tile c (its chunk c, slot c % kRingChunks) when it exists,
// and commits a group either way (one group per chunk keeps the waits' counts fixed).
template <class Traits>
__device__ __forceinline__ void issue_v_chunk(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                              uint32_t ring, int32_t warp, int32_t count, int32_t c) {
    if (c < count)
        stream.template issue<true>(p, warp + c * Traits::kWarps, ring + (c % Traits::kRingChunks) * Traits::kChunkBytes);
    ptx::cp_async_commit();
}

// issue_v_chunk with the block-table entry of sub-tile c read earlier (`page`, valid when the
// sub-tile exists), by WarpStream::copy_value_rows_lean (`page_shift`: page_shift_of(block_size)).
template <class Traits>
__device__ __forceinline__ void issue_v_chunk_from_page(const wideattn_prefill_params& p,
                                                        const WarpStream<Traits>& stream, uint32_t ring, int32_t warp,
                                                        int32_t count, int32_t c, int32_t page, int32_t page_shift) {
    if (c < count) {
        const uint32_t chunk = ring + (c % Traits::kRingChunks) * Traits::kChunkBytes;
        stream.copy_value_rows_lean(p, (warp + c * Traits::kWarps) * Traits::kSubTileKeys, page, chunk, page_shift);
    }
    ptx::cp_async_commit();
}

// The block-table entry of the warp's sub-tile c, or 0 past its last one (`page_shift`:
// page_shift_of(block_size)).
template <class Traits>
__device__ __forceinline__ int32_t warp_page(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                             int32_t warp, int32_t count, int32_t c, int32_t page_shift) {
    return c < count ? stream.page_of(p, warp + c * Traits::kWarps, page_shift) : 0;
}

// The warp's key loop over sub-tiles warp, warp + kWarps, ... < num_tiles: wait for V_i, issue
// V_i+2 (into V_i-1's slot, read to the end in the previous step), S_i with K built from V_i, the
// softmax, P_i V_i. The block-table entry of V_i+2 was read in the previous step (in the prologue
// for V_2), right after that step's issue, so this issue does not wait for a table load (then the
// cos / sin table rows of sub-tile i + kCosSinRowsAhead are asked of the L2, traits.h); the
// prologue's chunks (kChunksInFlight, issued by the block) read theirs there. Those copies and
// loads take WarpStream's lean forms (a mask for a power-of-two page, no zero-fill selects on a
// full sub-tile).
template <class Traits, bool kProduct = false>
__device__ __forceinline__ void warp_key_loop_kfv(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                                  uint32_t ring, uint32_t q_shared, uint32_t weight, uint32_t freq,
                                                  const CosSinTable& table, int32_t warp, int32_t lane, int32_t num_tiles, int32_t kv_end,
                                                  int32_t first_position, int32_t rotated_blocks, float v_scale,
                                                  float score_scale,
                                                  float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
    const int32_t page_shift = page_shift_of(p.block_size);
    // The entry of sub-tile i + kChunksInFlight at step i.
    int32_t page_ahead = warp_page<Traits>(p, stream, warp, count, Traits::kChunksInFlight, page_shift);
    for (int32_t i = 0; i < count; ++i) {
        ptx::cp_async_wait<Traits::kChunksInFlight - 1>();
        __syncwarp();  // V_i landed for every lane; every lane is done with V_i-1
        issue_v_chunk_from_page<Traits>(p, stream, ring, warp, count, i + Traits::kChunksInFlight, page_ahead,
                                        page_shift);
        page_ahead = warp_page<Traits>(p, stream, warp, count, i + Traits::kChunksInFlight + 1, page_shift);
        prefetch_cos_sin_ahead<Traits>(table, first_position, warp, i, count, lane);
        const int32_t key0 = (warp + i * Traits::kWarps) * Traits::kSubTileKeys;
        const uint32_t stage = ring + (i % Traits::kRingChunks) * Traits::kChunkBytes;
        float s[4];
        subtile_scores_kfv<Traits, kProduct>(stage, q_shared, weight, freq, table, lane, rotated_blocks,
                                             first_position + key0, v_scale, score_scale, kv_end - key0, s);
        uint32_t p0, p1;
        subtile_softmax<Traits>(s, rows, o, p0, p1);
        subtile_pv<Traits>(stage, lane, p0, p1, o);
    }
    ptx::cp_async_wait<0>();
}

// Pair blocks holding a dim that may rotate: dims below rotary_dims / 2 (their partners 256 on).
template <class Traits>
__device__ __forceinline__ int32_t rotated_pair_blocks(const KFromV& kfv) {
    return min((kfv.rotary_dims / 2 + Traits::kDimBlock - 1) / Traits::kDimBlock, Traits::kPairBlockOffset);
}

// The tables, Q and the key loop of this kernel: f16 K scaled by the block's power of two against
// f16 Q scaled by its own.
template <class Traits>
__device__ __forceinline__ void f16_key_loop(const wideattn_prefill_params& p, const KFromV& kfv,
                                             const WarpStream<Traits>& stream, uint32_t base, uint32_t ring,
                                             int32_t warp, int32_t lane, int64_t token, int32_t kv_head,
                                             const BlockGeometry& geometry, int32_t first_position,
                                             float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    using Plan = typename Traits::SmemPlan;
    stage_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq, base + Plan::kWAmax);
    // load_q's barriers also make the tables visible.
    const float q_factor = load_block_q<Traits, false>(p, base + Plan::kQ, base + Plan::kAmax, token, 1, kv_head);
    float v_scale = 0.0f;
    const float k_factor = k_power_of_two<Traits>(base + Plan::kWAmax, __ldg(p.v_scale), &v_scale);
    const float score_scale = p.softmax_scale * kLog2e * q_factor * k_factor;
    const int32_t rotated_blocks = rotated_pair_blocks<Traits>(kfv);
    zero_output(o);
    warp_key_loop_kfv<Traits>(p, stream, ring, base + Plan::kQ, base + Plan::kWeight, base + Plan::kFreq,
                              CosSinTable::of(kfv), warp, lane, geometry.num_tiles, geometry.kv_end, first_position,
                              rotated_blocks, v_scale, score_scale, o, rows);
}

// The row rule of the kProduct path: its K build reads a NaN code as a finite value
// (e4m3x4_to_scaled_bf16x2x2), where the reference's K is NaN and so are the scores of that key for
// every row, its row sums, O and LSE. P V still reads the code as NaN, so every row's O^T holds a
// NaN at the code's dim (p >= 0 times NaN); a lane whose O^T part of a row holds a NaN makes its
// part of that row's sum NaN, which the epilogue turns into a NaN O and LSE (epilogue.cuh), as
// the reference's NaN scores do. Rows of a warp that met no NaN code keep their sums.
template <class Traits>
__device__ __forceinline__ void nan_code_rows(const float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    constexpr int32_t kCanonicalNaN = 0x7fffffff;  // the NaN the GPU's fp32 arithmetic gives
    bool nan_row[2] = {false, false};
#pragma unroll
    for (int32_t n = 0; n < Traits::kONTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) nan_row[e % 2] = nan_row[e % 2] || isnan(o[n][e]);
#pragma unroll
    for (int32_t r = 0; r < 2; ++r)
        if (nan_row[r]) rows.sum[r] = __int_as_float(kCanonicalNaN);
}

// Traits::kBf16Keys: K as the reference's bf16 values (x = bf16((v v_scale) w) with the call's
// v_scale, no power of two) against bf16 Q as the call gives it, in a bf16 mma; x by one
// mul.rn.bf16x2 a pair where stage_weight_products allows it (v_scale a power of two, every w
// v_scale a bf16 value), else by the fp32 steps. The product table's barrier makes the other
// tables visible, load_q_bf16's Q.
template <class Traits>
__device__ __forceinline__ void bf16_key_loop(const wideattn_prefill_params& p, const KFromV& kfv,
                                              const WarpStream<Traits>& stream, uint32_t base, uint32_t ring,
                                              int32_t warp, int32_t lane, int64_t token, int32_t kv_head,
                                              const BlockGeometry& geometry, int32_t first_position,
                                              float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    using Plan = typename Traits::SmemPlan;
    const float v_scale = __ldg(p.v_scale);
    const float2 w = stage_k_from_v_tables<Traits>(kfv, base + Plan::kWeight, base + Plan::kFreq);
    const bool product = stage_weight_products<Traits>(w, v_scale, base + Plan::kWeightProducts);
    load_q_bf16<Traits>(p, base + Plan::kQ, token, 1, kv_head);
    const float score_scale = p.softmax_scale * kLog2e;
    const int32_t rotated_blocks = rotated_pair_blocks<Traits>(kfv);
    zero_output(o);
    if (product) {
        warp_key_loop_kfv<Traits, true>(p, stream, ring, base + Plan::kQ, base + Plan::kWeightProducts,
                                        base + Plan::kFreq, CosSinTable::of(kfv), warp, lane, geometry.num_tiles,
                                        geometry.kv_end, first_position, rotated_blocks, v_scale, score_scale, o, rows);
        nan_code_rows<Traits>(o, rows);
    } else
        warp_key_loop_kfv<Traits, false>(p, stream, ring, base + Plan::kQ, base + Plan::kWeight, base + Plan::kFreq,
                                         CosSinTable::of(kfv), warp, lane, geometry.num_tiles, geometry.kv_end,
                                         first_position, rotated_blocks, v_scale, score_scale, o, rows);
}

// One block of the kernel whose traits are Traits (DecodeE4m3KfvD512Traits or a form of it).
template <class Traits, bool kSplit>
__device__ __forceinline__ void decode_kfv_block(const wideattn_prefill_params& p, const KFromV& kfv,
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
    // V only: k_cache is absent (NULL) in a K-from-V call and never read.
    WarpStream<Traits> stream;
    stream.k_base = nullptr;
    stream.v_base = static_cast<const unsigned char*>(p.v_cache) + work.kv_head * p.v_head_stride;
    stream.table_row = p.block_table + geometry.table_offset;
    stream.kv_end = geometry.kv_end;
    stream.lane = lane;
    const uint32_t ring = base + Plan::kRings + static_cast<uint32_t>(warp * Traits::kWarpRingBytes);
    const int32_t count = warp_subtiles<Traits>(geometry.num_tiles, warp);
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunksInFlight; ++c) issue_v_chunk<Traits>(p, stream, ring, warp, count, c);

    float o[Traits::kONTiles][4];
    WarpRows rows{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    if constexpr (Traits::kBf16Keys)
        bf16_key_loop<Traits>(p, kfv, stream, base, ring, warp, lane, token, work.kv_head, geometry, first_position, o,
                              rows);
    else
        f16_key_loop<Traits>(p, kfv, stream, base, ring, warp, lane, token, work.kv_head, geometry, first_position, o,
                             rows);
    write_block<Traits, kSplit>(p, base + Plan::kMerge, base + Plan::kStats, o, rows, warp, lane, token,
                                work.kv_head);
}

}  // namespace wideattn::decode_e4m3
