// mainloop.cuh - the streaming loop of the 8-bit mma prefill kernels: Q K^T with mma m16n8k32
// e4m3, the pair-wise partial-score exchange, the online softmax (exp2, P pre-scaled by 2^8)
// and P V with V transposed in registers, over e4m3 K/V chunks that loads.cuh streams into the
// shared-memory ring.
//
// Shared memory (Traits::SmemPlan): ring of kRingSlots chunks, then the exchange buffer, float4
// [warp][key n-tile][lane].
//
// Chunk c is K of key tile c/2 (c even) or V of key tile c/2 (c odd), in slot c % 5. Step j
// waits for chunks <= 2j+1 (K_j, V_j), passes one block barrier, then issues V_j+1 (threads
// 0..127) and K_j+2 (threads 128..255) into the slots of K_j-1 and V_j-1 (the schedule of
// the BF16 kernel, kernels/mma/bf16_d512/mainloop.cuh).
//
// Fragment layouts (PTX ISA, mma.m16n8k32 .e4m3; g = lane / 4, t = lane % 4):
//   A  a0: row g, k 4t..4t+3; a1: row g+8, same k; a2/a3: as a0/a1 with k + 16
//   B  b0: k 4t..4t+3 of column g; b1: k 16+4t..16+4t+3
//   C  c0,c1: row g, columns 2t, 2t+1; c2,c3: row g+8
// P V permutes its k index (the key) so that P needs no shuffle: k position 16h + 4t + i
// holds key 16h + 8 (i / 2) + 2t + (i % 2), exactly the keys a lane holds in its score
// accumulators. V's B fragments follow the same permutation (merge_even_dim / odd_dim), and
// the two n-tiles of a 16-dim block hold its even and odd dims, so lane t owns the output
// dims 16b + 4t .. 16b + 4t + 3 of block b.
#pragma once

#include <cstdint>

#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "fp8/mma_e4m3_d512/loads.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/pair_exchange.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "wideattn.h"

namespace wideattn::mma_e4m3 {

// Everything the main loop needs that is fixed for the block.
struct E4m3BlockGeometry : BlockGeometry {
    float score_factor[2];   // q_scale(row) * k_scale * softmax_scale * log2 e for the thread's rows
};

// ldmatrix lane addresses (byte offsets inside a chunk; bits 4..6 of an offset are the
// 16-byte column within its 128-byte swizzle span, i.e. the vec XOR (row % 8)).
// K (B of Q K^T, plain): lanes 8m..8m+7 address matrix m = (keys 8 (m / 2) + lane % 8 of
// the key half, logical vec 2 kk + m % 2); a second x4 covers keys 16-31. k_base holds the
// lane's row and (m % 2) ^ (row % 8) in bits 4..6; k-step kk XORs 2 (kk % 4) into them and
// adds span kk / 4.
// V (B of P V, transposed): lane L addresses key row L (matrices = keys 0-7, 8-15, 16-23,
// 24-31) at logical vec v of the half; v_base holds row L and L % 8 in bits 4..6; block v
// XORs v % 8 into them and adds span v / 8.
struct LaneOffsets {
    uint32_t k_base;
    uint32_t v_base;
};

template <class Traits>
__device__ __forceinline__ LaneOffsets lane_offsets(int32_t lane, int32_t half) {
    const int32_t lane_row8 = lane % Traits::kSwizzleRows;
    const int32_t k_row = (lane / 16) * 8 + lane_row8;
    const int32_t k_vec_bit = (lane / 8) % 2;
    LaneOffsets offsets;
    offsets.k_base =
        k_row * Traits::kRowBytes + half * Traits::kHalfRowBytes + ((k_vec_bit ^ lane_row8) * Traits::kVecBytes);
    offsets.v_base = lane * Traits::kRowBytes + half * Traits::kHalfRowBytes + lane_row8 * Traits::kVecBytes;
    return offsets;
}

// Byte offset of Q K^T k-step kk (logical vecs 2kk, 2kk+1 of the half), key rows 0-15.
template <class Traits>
__device__ __forceinline__ uint32_t k_step_offset(const LaneOffsets& offsets, int32_t kk) {
    return (offsets.k_base ^ ((kk % 4) * 2 * Traits::kVecBytes)) + (kk / 4) * Traits::kSwizzleSpanBytes;
}

// Byte offset of P V 16-dim block v (logical vec v of the half).
template <class Traits>
__device__ __forceinline__ uint32_t v_block_offset(const LaneOffsets& offsets, int32_t v) {
    return (offsets.v_base ^ ((v % Traits::kSwizzleRows) * Traits::kVecBytes)) +
           (v / Traits::kSwizzleRows) * Traits::kSwizzleSpanBytes;
}

// Scores of the warp's 16 rows against key tile `tile` (log2 units, scaled, masked): partial
// Q K^T over the warp's half, dequantised with the row's own factor, then own + partner.
template <class Traits>
__device__ __forceinline__ void tile_scores(const E4m3BlockGeometry& g, const uint32_t (&q)[Traits::kQkSteps][4],
                                            const LaneOffsets& offsets, uint32_t k_slot, uint32_t exchange,
                                            int32_t tile, float (&s)[Traits::kKeyNTiles][4]) {
    const int32_t warp = threadIdx.x / Traits::kWarpSize;
    const int32_t lane = threadIdx.x % Traits::kWarpSize;
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int32_t key_half = 0; key_half < 2; ++key_half) {
#pragma unroll
        for (int32_t kk = 0; kk < Traits::kQkSteps; ++kk) {
            uint32_t b[4];
            ptx::ldmatrix_x4(b, k_slot + key_half * Traits::kKeyHalfRows * Traits::kRowBytes +
                                    k_step_offset<Traits>(offsets, kk));
            ptx::mma_e4m3_16832(s[2 * key_half], q[kk], b[0], b[1]);
            ptx::mma_e4m3_16832(s[2 * key_half + 1], q[kk], b[2], b[3]);
        }
    }
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[n][e] *= g.score_factor[e / 2];
    add_partner_scores<Traits>(exchange, warp, lane, s);

    mask_tile_scores<Traits::kTileKeys, Traits::kMmaN>(g, tile, lane, s);
}

// Online softmax (exact rescale, warp-uniform decision); returns P * 2^8 as e4m3 A
// fragment of P V in the permuted key order described at the top of this file.
template <class Traits>
__device__ __forceinline__ void softmax_update(float (&s)[Traits::kKeyNTiles][4], float (&o)[Traits::kDimNTiles][4],
                                               RowState& state, uint32_t (&prob)[4]) {
    float tile_max[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float m = s[0][2 * r];
#pragma unroll
        for (int32_t n = 0; n < Traits::kKeyNTiles; ++n) m = fmaxf(m, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        tile_max[r] = m;
    }
    rescale_if_grown<Traits>(tile_max, o, state);
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r)
        base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r] - Traits::kProbScaleLog2;
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            s[n][e] = fast_exp2(s[n][e] - base[e / 2]);
            state.sum[e / 2] += s[n][e];
        }
    prob[0] = pack_e4m3x4(s[0][0], s[0][1], s[1][0], s[1][1]);
    prob[1] = pack_e4m3x4(s[0][2], s[0][3], s[1][2], s[1][3]);
    prob[2] = pack_e4m3x4(s[2][0], s[2][1], s[3][0], s[3][1]);
    prob[3] = pack_e4m3x4(s[2][2], s[2][3], s[3][2], s[3][3]);
}

// o += P V over the warp's half of the dims for one key tile. One ldmatrix.x4.trans per
// 16-dim block gives the 4 key blocks; byte permutes make the even-dim and odd-dim B
// fragments; o[2v] holds the even dims of block v, o[2v + 1] the odd ones.
template <class Traits>
__device__ __forceinline__ void accumulate_pv(float (&o)[Traits::kDimNTiles][4], const uint32_t (&prob)[4],
                                              const LaneOffsets& offsets, uint32_t v_slot) {
#pragma unroll
    for (int32_t v = 0; v < Traits::kPvDimBlocks; ++v) {
        uint32_t r[4];
        ptx::ldmatrix_x4_trans(r, v_slot + v_block_offset<Traits>(offsets, v));
        const uint32_t b_even[2] = {merge_even_dim(r[0], r[1]), merge_even_dim(r[2], r[3])};
        const uint32_t b_odd[2] = {merge_odd_dim(r[0], r[1]), merge_odd_dim(r[2], r[3])};
        if constexpr (Traits::kTwoLevelPv) {
#pragma unroll
            for (int32_t parity = 0; parity < 2; ++parity) {
                float tile_part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                ptx::mma_e4m3_16832(tile_part, prob, parity ? b_odd[0] : b_even[0], parity ? b_odd[1] : b_even[1]);
#pragma unroll
                for (int32_t e = 0; e < 4; ++e) o[2 * v + parity][e] += tile_part[e];
            }
        } else {
            ptx::mma_e4m3_16832(o[2 * v], prob, b_even[0], b_even[1]);
            ptx::mma_e4m3_16832(o[2 * v + 1], prob, b_odd[0], b_odd[1]);
        }
        // Caps how many V fragments ptxas loads ahead (register budget, see the traits).
        if (v % Traits::kPvBlocksPerWarpSync == Traits::kPvBlocksPerWarpSync - 1) __syncwarp();
    }
}

template <class Traits>
__device__ __forceinline__ uint32_t slot_address(uint32_t ring, int32_t chunk) {
    return ring + (chunk % Traits::kRingSlots) * Traits::kChunkBytes;
}

// Runs the whole key loop for this warp: o accumulates unnormalised P V (in units of
// 2^kProbScaleLog2 * v code), state holds the running max and partial sums.
template <class Traits>
__device__ __forceinline__ void attention_mainloop(const wideattn_prefill_params& p, const E4m3BlockGeometry& g,
                                                   const uint32_t (&q)[Traits::kQkSteps][4],
                                                   float (&o)[Traits::kDimNTiles][4], RowState& state,
                                                   unsigned char* smem) {
    using Plan = typename Traits::SmemPlan;
    const int32_t warp = threadIdx.x / Traits::kWarpSize;
    const int32_t lane = threadIdx.x % Traits::kWarpSize;
    const uint32_t base = ptx::shared_address(smem);
    const uint32_t ring = base + Plan::kRing;
    const uint32_t exchange = base + Plan::kExchange;
    const LaneOffsets offsets = lane_offsets<Traits>(lane, warp % Traits::kDimSplit);
    const int32_t* table_row = p.block_table + g.table_offset;
    constexpr int32_t kChunksAhead = 3;  // K_j, V_j, K_j+1 in flight when step j starts

    // Threads 0..127 issue every V chunk (odd), threads 128..255 every K chunk (even); every
    // thread commits one group per chunk (empty when the other half issued it), in chunk
    // order, so "all but the newest group" means the same chunks on every thread.
    constexpr int32_t kIssuers = Traits::kThreads / 2;
    const int32_t half_of_block = threadIdx.x / kIssuers;
    const bool issues_values = half_of_block == 0;
    const int32_t issuer = threadIdx.x % kIssuers;
#pragma unroll
    for (int32_t c = 0; c < kChunksAhead; ++c) {
        if ((c % 2 == 1) == issues_values)
            issue_chunk<Traits, kIssuers>(p, c, g.num_tiles, g.kv_end, g.kv_head,
                                          locate_tile<Traits>(p, table_row, c / 2, g.kv_end), ring, issuer,
                                          issues_values);
        ptx::cp_async_commit();
    }

    for (int32_t j = 0; j < g.num_tiles; ++j) {
        const int32_t chunk = 2 * j + kChunksAhead + half_of_block;  // V_j+1 (half 0) or K_j+2 (half 1)
        const TileLocation<Traits> where = locate_tile<Traits>(p, table_row, chunk / 2, g.kv_end);
        ptx::cp_async_wait<kChunksAhead - 2>();
        __syncthreads();
        if (half_of_block == 1) ptx::cp_async_commit();
        issue_chunk<Traits, kIssuers>(p, chunk, g.num_tiles, g.kv_end, g.kv_head, where, ring, issuer,
                                      issues_values);
        ptx::cp_async_commit();
        if (half_of_block == 0) ptx::cp_async_commit();
        float s[Traits::kKeyNTiles][4];
        tile_scores<Traits>(g, q, offsets, slot_address<Traits>(ring, 2 * j), exchange, j, s);
        uint32_t prob[4];
        softmax_update<Traits>(s, o, state, prob);
        accumulate_pv<Traits>(o, prob, offsets, slot_address<Traits>(ring, 2 * j + 1));
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::mma_e4m3
