// mainloop.cuh - the streaming loop of the BF16 mma.sync prefill kernel (mma_bf16_d512): Q K^T
// on the warp's half of the dims, the pair-wise partial-score exchange, the online softmax
// (exp2, lazy rescale) and P V, over K/V chunks that loads.cuh streams into the shared-memory
// ring.
//
// Shared memory (Traits::SmemPlan): ring of kRingSlots chunks, then the exchange buffer, float4
// [warp][key n-tile][lane].
//
// Chunk c of a block is K of key tile c/2 (c even) or V of key tile c/2 (c odd); it lives
// in slot c % kRingSlots. Step j waits for chunks <= 2j+1 (K_j, V_j), passes one block
// barrier, then issues two chunks into slots no warp reads in step j:
//   - with ping-pong (kPingPong): group 0 does Q K^T, softmax and P V of tile j; group 1
//     does P V of tile j-1, then Q K^T and softmax of tile j. V_j-1 stays live, so step j
//     issues K_j+1, V_j+1 into the slots of V_j-2 and K_j-1;
//   - without: every warp does tile j, and step j issues V_j+1, K_j+2 into the slots of
//     K_j-1 and V_j-1.
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pair_exchange.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/mma/bf16_d512/loads.cuh"
#include "wideattn.h"

namespace wideattn::mma_bf16 {

// ldmatrix lane addresses. K (B of Q K^T, non-transposed): matrices (keys 0-7, dims +0/+8),
// (keys 8-15, dims +0/+8). V (B of P V, transposed): (keys 0-7 / 8-15, dims +0), then
// dims +8. The 16-byte column index c = 8 * span + 2 * step + bit is stored at
// c ^ (row % 8); with row % 8 = lane % 8 that is 8 * span + 2 * (step ^ swap) + (bit ^ flip),
// swap = (lane % 8) / 2, flip = lane % 2, so one base per operand plus the per-step term
// 32 * (step ^ swap) bytes gives every address.
struct LaneOffsets {
    uint32_t k_base;
    uint32_t v_base;
    uint32_t swap;
};

template <class Traits>
__device__ __forceinline__ LaneOffsets lane_offsets(int32_t lane, int32_t half) {
    constexpr int32_t kRowBytes = Traits::kHeadDim * Traits::kElemBytes;
    constexpr int32_t kHalfBytes = Traits::kDimsPerWarp * Traits::kElemBytes;
    const int32_t lane_row8 = lane % 8;
    const int32_t k_row = (lane / 16) * 8 + lane_row8;
    const int32_t k_vec_bit = (lane / 8) % 2;
    const int32_t v_row = ((lane / 8) % 2) * 8 + lane_row8;
    const int32_t v_vec_bit = lane / 16;
    LaneOffsets offsets;
    offsets.k_base = k_row * kRowBytes + half * kHalfBytes + ((k_vec_bit ^ (lane_row8 % 2)) * Traits::kVecBytes);
    offsets.v_base = v_row * kRowBytes + half * kHalfBytes + ((v_vec_bit ^ (lane_row8 % 2)) * Traits::kVecBytes);
    offsets.swap = lane_row8 / 2;
    return offsets;
}

// Byte offset of pair-step `step` (0..kHeadDim/16-1 within the half) for this lane.
template <class Traits>
__device__ __forceinline__ uint32_t step_offset(const LaneOffsets& offsets, int32_t step) {
    return (((step % 4) ^ offsets.swap) * Traits::kPairVecBytes) + (step / 4) * Traits::kSwizzleSpanBytes;
}

// Scores of the warp's 16 rows against key tile `tile` (in log2 units, scaled, masked):
// partial Q K^T over the warp's half of the dims, then own + partner through shared memory.
template <class Traits>
__device__ __forceinline__ void tile_scores(const wideattn_prefill_params& p, const BlockGeometry& g,
                                            const uint32_t (&q)[Traits::kQkSteps][4], const LaneOffsets& offsets,
                                            uint32_t k_slot, uint32_t exchange, int32_t tile,
                                            float (&s)[Traits::kKeyNTiles][4]) {
    const int32_t warp = threadIdx.x / Traits::kWarpSize;
    const int32_t lane = threadIdx.x % Traits::kWarpSize;
    float chain[Traits::kQkChains][Traits::kKeyNTiles][4];
#pragma unroll
    for (int32_t c = 0; c < Traits::kQkChains; ++c)
#pragma unroll
        for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
            for (int32_t e = 0; e < 4; ++e) chain[c][n][e] = 0.0f;
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kQkSteps; ++kk) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, k_slot + offsets.k_base + step_offset<Traits>(offsets, kk));
        ptx::mma_bf16_16816(chain[kk % Traits::kQkChains][0], q[kk], b[0], b[1]);
        ptx::mma_bf16_16816(chain[kk % Traits::kQkChains][1], q[kk], b[2], b[3]);
    }
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            float sum = chain[0][n][e];
#pragma unroll
            for (int32_t c = 1; c < Traits::kQkChains; ++c) sum += chain[c][n][e];
            s[n][e] = sum;
        }

    // Pair exchange: both warps end with own + partner, bitwise identical sums.
    add_partner_scores<Traits>(exchange, warp, lane, s);
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[n][e] *= p.softmax_scale * kLog2e;

    mask_tile_scores<Traits::kTileKeys, Traits::kMmaN>(g, tile, lane, s);
}

// Online softmax with lazy rescale (warp-uniform decision); returns P as the A fragment of
// P V (the accumulator layout of two key n-tiles is the A layout).
template <class Traits>
__device__ __forceinline__ void softmax_update(float (&s)[Traits::kKeyNTiles][4], float (&o)[Traits::kDimNTiles][4],
                                               RowState& state, uint32_t (&prob)[4]) {
    constexpr uint32_t kFullMask = 0xffffffffu;
    float tile_max[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float m = fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        tile_max[r] = m;
    }
    rescale_if_grown<Traits>(tile_max, o, state);
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r];
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            s[n][e] = fast_exp2(s[n][e] - base[e / 2]);
            state.sum[e / 2] += s[n][e];
        }
    prob[0] = ptx::pack_bf16x2(s[0][0], s[0][1]);
    prob[1] = ptx::pack_bf16x2(s[0][2], s[0][3]);
    prob[2] = ptx::pack_bf16x2(s[1][0], s[1][1]);
    prob[3] = ptx::pack_bf16x2(s[1][2], s[1][3]);
}

// o += P V over the warp's half of the dims for one key tile.
template <class Traits>
__device__ __forceinline__ void accumulate_pv(float (&o)[Traits::kDimNTiles][4], const uint32_t (&prob)[4],
                                              const LaneOffsets& offsets, uint32_t v_slot) {
#pragma unroll
    for (int32_t np = 0; np < Traits::kDimNTiles / 2; ++np) {
        uint32_t b[4];
        ptx::ldmatrix_x4_trans(b, v_slot + offsets.v_base + step_offset<Traits>(offsets, np));
        ptx::mma_bf16_16816(o[2 * np], prob, b[0], b[1]);
        ptx::mma_bf16_16816(o[2 * np + 1], prob, b[2], b[3]);
    }
}

// (slot + step) % kRingSlots for slot < kRingSlots and step <= kRingSlots.
template <class Traits>
__device__ __forceinline__ int32_t ring_add(int32_t slot, int32_t step) {
    const int32_t sum = slot + step;
    return sum >= Traits::kRingSlots ? sum - Traits::kRingSlots : sum;
}

// Runs the whole key loop for this warp: o accumulates unnormalised P V, state holds the
// running max and partial sums.
template <class Traits>
__device__ __forceinline__ void attention_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                   const uint32_t (&q)[Traits::kQkSteps][4],
                                                   float (&o)[Traits::kDimNTiles][4], RowState& state,
                                                   unsigned char* smem) {
    using Plan = typename Traits::SmemPlan;
    const int32_t warp = threadIdx.x / Traits::kWarpSize;
    const int32_t lane = threadIdx.x % Traits::kWarpSize;
    const bool lagging_group = Traits::kPingPong && warp >= Traits::kWarpsPerGroup;  // P V one tile behind
    const uint32_t base = ptx::shared_address(smem);
    const uint32_t ring = base + Plan::kRing;
    const uint32_t exchange = base + Plan::kExchange;
    const LaneOffsets offsets = lane_offsets<Traits>(lane, warp % Traits::kDimSplit);
    const int32_t* table_row = p.block_table + g.table_offset;
    // Chunks issued ahead of the step: K_j, V_j (and K_j+1 without ping-pong).
    constexpr int32_t kChunksAhead = Traits::kPingPong ? 2 : 3;

    // Each chunk is issued by one half of the block (kIssuers threads); step j's two chunks
    // are 2j + kChunksAhead (half 0) and the one after it (half 1), so a half always issues
    // the same tensor. Every thread commits one group per chunk (empty when the other half
    // issued it), in chunk order, so "all but the newest kChunksAhead - 2 groups" means the
    // same chunks on every thread.
    constexpr int32_t kIssuers = Traits::kThreads / 2;
    const int32_t half_of_block = threadIdx.x / kIssuers;
    const int32_t issued_parity = (kChunksAhead + half_of_block) % 2;  // 1: this half issues V
    ChunkStream<Traits, kIssuers> stream;
    stream.init(p, issued_parity == 1, g.kv_head, threadIdx.x % kIssuers);
#pragma unroll
    for (int32_t c = 0; c < kChunksAhead; ++c) {
        if (c % 2 == issued_parity)
            stream.issue(p, stream.next_page(p, table_row, g.num_tiles), g.num_tiles, g.kv_end,
                         ring + c * Traits::kChunkBytes);
        ptx::cp_async_commit();
    }

    uint32_t prob[4];
    int32_t k_slot = 0;  // ring slot of K_j: (2j) % kRingSlots
    for (int32_t j = 0; j < g.num_tiles; ++j) {
        const int32_t page = stream.next_page(p, table_row, g.num_tiles);
        const int32_t v_slot = ring_add<Traits>(k_slot, 1);
        ptx::cp_async_wait<kChunksAhead - 2>();
        __syncthreads();
        if (half_of_block == 1) ptx::cp_async_commit();
        stream.issue(p, page, g.num_tiles, g.kv_end,
                     ring + ring_add<Traits>(k_slot, kChunksAhead + half_of_block) * Traits::kChunkBytes);
        ptx::cp_async_commit();
        if (half_of_block == 0) ptx::cp_async_commit();
        if (lagging_group && j > 0)
            accumulate_pv<Traits>(o, prob, offsets,
                                  ring + ring_add<Traits>(k_slot, Traits::kRingSlots - 1) * Traits::kChunkBytes);
        float s[Traits::kKeyNTiles][4];
        tile_scores<Traits>(p, g, q, offsets, ring + k_slot * Traits::kChunkBytes, exchange, j, s);
        softmax_update<Traits>(s, o, state, prob);
        if (!lagging_group) accumulate_pv<Traits>(o, prob, offsets, ring + v_slot * Traits::kChunkBytes);
        k_slot = ring_add<Traits>(k_slot, 2);
    }
    if (lagging_group && g.num_tiles > 0)
        accumulate_pv<Traits>(o, prob, offsets,
                              ring + ring_add<Traits>(k_slot, Traits::kRingSlots - 1) * Traits::kChunkBytes);
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::mma_bf16
