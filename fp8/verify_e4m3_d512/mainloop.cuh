// mainloop.cuh - the key loop of the few-token e4m3 decode kernel (verify_e4m3_d512), per 64-key
// tile (three block barriers and a pair barrier):
//   wait for K_i (barrier 1), issue V_i+1;
//   S^T partial: warp w = (key group g = w % 4, dim half h = w / 4) computes K Q^T of sub-tile g
//     over its 256 dims for every token (mma m16n8k16 f16, keys in m, a token's 8 heads in n);
//     the h = 1 warp stores its partial and both warps of the pair wait on the pair's named
//     barrier (bar.sync on both sides: with an arrive-only hand-off racecheck misreads the loop;
//     one bar.sync after the h = 1 stores, as bar.sync is .aligned: one instruction for all),
//     the h = 0 warp adds it, scales and masks, and stores its key group's row maxima (barrier 2 =
//     the pair barrier, barrier 3 = the block's);
//   every warp reads the four maxima of its rows and raises its running maxima (the same values
//     in every warp, so the rescale decision is block-uniform), rescaling its O^T;
//   the h = 0 warps write P^T = 2^(s - max + 8) as f16 [row][key] (movmatrix turns the S^T
//     accumulator into rows of keys) and keep the row sums of their keys;
//   wait for V_i (barrier 4: P complete too), issue K_i+2 into K_i's slot;
//   O^T += V^T P^T: warp w over its 64 dims, all 64 keys, every token.
// Fragment layouts are decode_e4m3_d512's (fp8/decode_e4m3_d512/mainloop.cuh header): K by a
// plain ldmatrix.x4 with Q^T read in the matching dim order, V by a transposed ldmatrix.x4 and a
// byte permute (even and odd m-tiles per 32 dims); P^T as the B operand by ldmatrix.x2 of P rows.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/verify_e4m3_d512/loads.cuh"
#include "fp8/verify_e4m3_d512/traits.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"

namespace wideattn::verify_e4m3 {

using decode_e4m3::kFullMask;
using decode_e4m3::load_k_block;
using decode_e4m3::load_v_block;
using decode_e4m3::movmatrix_trans;
using decode_e4m3::pack_f16x2;
using decode_e4m3::swizzled;

// The lane's part of the row sums of 2^(s - max + 8) over the h = 0 warps' keys; its rows are
// (token j, heads 2t, 2t + 1) for every j, both in the S^T and in the O^T accumulator layout.
// The running row maxima live in shared memory (the same for every warp).
template <class Traits, int32_t kTokens>
struct LaneRows {
    float sum[kTokens][2];
};

// How far the dim-block loop of the scores and the sub-tile loop of P V unroll: fully up to
// Traits::kUnrolledTokens tokens; beyond, rolled (unrolled, ptxas spilled 416 bytes at 8 tokens
// and 112 at 6, with the loops rolled none).
template <class Traits, int32_t kTokens>
struct LoopUnroll {
    static constexpr int32_t kDimBlocks = kTokens <= Traits::kUnrolledTokens ? Traits::kDimBlocksPerHalf : 1;
    static constexpr int32_t kKeySubTiles = kTokens <= Traits::kUnrolledTokens ? Traits::kKeyGroups : 1;
};

template <class Traits>
__device__ __forceinline__ uint32_t row_stat_address(uint32_t row_stats, int32_t row, int32_t group) {
    return row_stats + static_cast<uint32_t>((row * Traits::kKeyGroups + group) * 4);
}

template <class Traits>
__device__ __forceinline__ uint32_t partial_address(uint32_t partial, int32_t group, int32_t token, int32_t lane) {
    return partial + static_cast<uint32_t>(((group * Traits::kTileTokens + token) * Traits::kWarpSize + lane) * 16);
}

// The partial S^T of key sub-tile `k_sub` over dim blocks [half * 8, half * 8 + 8) for tokens
// [0, kTokens): acc[j] in the S^T accumulator layout of token j's n-tile.
template <class Traits, int32_t kTokens>
__device__ __forceinline__ void partial_scores(uint32_t k_sub, uint32_t q_shared, int32_t lane, int32_t half,
                                               float (&acc)[kTokens][4]) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t j = 0; j < kTokens; ++j)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll(LoopUnroll<Traits, kTokens>::kDimBlocks)
    for (int32_t cb = 0; cb < Traits::kDimBlocksPerHalf; ++cb) {
        const int32_t c = half * Traits::kDimBlocksPerHalf + cb;
        uint32_t lo[4], hi[4];
        load_k_block<Traits>(k_sub, lane, c, lo, hi);
#pragma unroll
        for (int32_t h = 0; h < 2; ++h) {
            const uint32_t a[4] = {lo[2 * h], lo[2 * h + 1], hi[2 * h], hi[2 * h + 1]};
            const int32_t vec = 4 * c + 2 * h + t / 2;  // Q dims 32c + 16h + 4t .. +3
#pragma unroll
            for (int32_t j = 0; j < kTokens; ++j) {
                const uint32_t address =
                    q_shared + swizzled<Traits::kQRowBytes, Traits>(j * Traits::kGroup + g, vec) + 8 * (t % 2);
                uint32_t b0, b1;
                asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(address));
                ptx::mma_f16_16816(acc[j], a, b0, b1);
            }
        }
    }
}

// The h = 0 warp of a key group: adds the h = 1 warp's partial, scales to log2 units and masks
// (keys past a token's causal limit or kv_end at -inf); stores the scores over the partial (so
// they need no registers across the barrier) and the group's row maxima.
template <class Traits, int32_t kTokens>
__device__ __forceinline__ void complete_scores(uint32_t partial, uint32_t row_stats, int32_t group, int32_t lane,
                                                int32_t key0, int32_t row_key_end, int32_t kv_end,
                                                float score_scale, float (&s)[kTokens][4]) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t j = 0; j < kTokens; ++j) {
        const float4 other = ptx::load_shared_f32x4(partial_address<Traits>(partial, group, j, lane));
        const float added[4] = {s[j][0] + other.x, s[j][1] + other.y, s[j][2] + other.z, s[j][3] + other.w};
        const int32_t limit = min(row_key_end + j, kv_end);
        float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t key = key0 + g + 8 * (e / 2);
            s[j][e] = key < limit ? added[e] * score_scale : -INFINITY;
            tile_max[e % 2] = fmaxf(tile_max[e % 2], s[j][e]);
        }
#pragma unroll
        for (int32_t offset = 4; offset < Traits::kWarpSize; offset *= 2)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r)
                tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], offset));
        if (g == 0)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r)
                asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(row_stat_address<Traits>(
                                 row_stats, j * Traits::kGroup + 2 * t + r, group)),
                             "f"(tile_max[r])
                             : "memory");
        ptx::store_shared_f32x4(partial_address<Traits>(partial, group, j, lane), s[j][0], s[j][1], s[j][2],
                                s[j][3]);
    }
}

// Every warp: the tile's row maxima from the four key groups and the running maxima (slot
// `parity` of row_max) give the updated maxima (`updated`, which warp 0 stores into the other
// slot for the next tile); O^T and the sums are rescaled where a maximum grew (the same decision
// in every warp).
template <class Traits, int32_t kTokens>
__device__ __forceinline__ void raise_maxima(uint32_t row_stats, uint32_t row_max, int32_t parity, int32_t warp,
                                             int32_t lane, LaneRows<Traits, kTokens>& rows,
                                             float (&o)[Traits::kOMTiles][kTokens][4],
                                             float (&updated)[kTokens][2]) {
    const int32_t g = lane / 4, t = lane % 4;
    const uint32_t old_slot = row_max + static_cast<uint32_t>(parity * Traits::kRows * 4);
    const uint32_t new_slot = row_max + static_cast<uint32_t>((1 - parity) * Traits::kRows * 4);
    float previous[kTokens][2];
    bool grows = false;
#pragma unroll
    for (int32_t j = 0; j < kTokens; ++j)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) {
            const int32_t row = j * Traits::kGroup + 2 * t + r;
            asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(previous[j][r]) : "r"(old_slot + 4 * row) : "memory");
            const float4 m = ptx::load_shared_f32x4(row_stat_address<Traits>(row_stats, row, 0));
            updated[j][r] = fmaxf(previous[j][r], fmaxf(fmaxf(m.x, m.y), fmaxf(m.z, m.w)));
            grows = grows || updated[j][r] > previous[j][r];
            if (warp == 0 && g == 0)
                asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(new_slot + 4 * row), "f"(updated[j][r]) : "memory");
        }
    if (__any_sync(kFullMask, grows)) {
#pragma unroll
        for (int32_t j = 0; j < kTokens; ++j) {
            float alpha[2];
#pragma unroll
            for (int32_t r = 0; r < 2; ++r) {
                alpha[r] = updated[j][r] == -INFINITY ? 1.0f : fast_exp2(previous[j][r] - updated[j][r]);
                rows.sum[j][r] *= alpha[r];
            }
#pragma unroll
            for (int32_t m = 0; m < Traits::kOMTiles; ++m) {
                o[m][j][0] *= alpha[0];
                o[m][j][1] *= alpha[1];
                o[m][j][2] *= alpha[0];
                o[m][j][3] *= alpha[1];
            }
        }
    }
}

// The h = 0 warp of key group `group`: P^T of its 16 keys (scores from the partial area) into
// p_shared ([row][key] f16), and the row sums.
template <class Traits, int32_t kTokens>
__device__ __forceinline__ void write_probabilities(uint32_t partial, uint32_t p_shared, int32_t group, int32_t lane,
                                                    const float (&updated)[kTokens][2],
                                                    LaneRows<Traits, kTokens>& rows) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t j = 0; j < kTokens; ++j) {
        const float4 v = ptx::load_shared_f32x4(partial_address<Traits>(partial, group, j, lane));
        const float s[4] = {v.x, v.y, v.z, v.w};
        float prob[4];
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const float m = updated[j][e % 2];
            const float base = (m == -INFINITY ? 0.0f : m) - Traits::kProbScaleLog2;
            prob[e] = fast_exp2(s[e] - base);
            rows.sum[j][e % 2] += prob[e];
        }
        const uint32_t p0 = movmatrix_trans(pack_f16x2(prob[0], prob[1]));  // row g, keys 2t, 2t+1
        const uint32_t p1 = movmatrix_trans(pack_f16x2(prob[2], prob[3]));  // row g, keys 8+2t, 9+2t
        const uint32_t row = p_shared + static_cast<uint32_t>((j * Traits::kGroup + g) * Traits::kPRowBytes);
        const uint32_t key = static_cast<uint32_t>((group * Traits::kSubTileKeys + 2 * t) * 2);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(row + key), "r"(p0) : "memory");
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(row + key + 16), "r"(p1) : "memory");
    }
}

// O^T += V^T P^T: warp `warp`'s 64 dims over the tile's 64 keys, every token.
template <class Traits, int32_t kTokens>
__device__ __forceinline__ void accumulate_output(uint32_t v_tile, uint32_t p_shared, int32_t warp, int32_t lane,
                                                  float (&o)[Traits::kOMTiles][kTokens][4]) {
    // ldmatrix.x2 of P: lane L (< 16) gives row L % 8 of matrix L / 8 (keys +0 / +8 of a k-step).
    const int32_t p_row = lane % 8;
    const int32_t p_key = 8 * ((lane / 8) % 2);
#pragma unroll(LoopUnroll<Traits, kTokens>::kKeySubTiles)
    for (int32_t kk = 0; kk < Traits::kKeyGroups; ++kk) {
        const uint32_t v_sub = v_tile + static_cast<uint32_t>(kk * Traits::kSubTileBytes);
        uint32_t a[Traits::kOMTiles][4];
#pragma unroll
        for (int32_t cc = 0; cc < Traits::kDimBlocksPerWarp; ++cc)
            load_v_block<Traits>(v_sub, lane, warp * Traits::kDimBlocksPerWarp + cc, a[2 * cc], a[2 * cc + 1]);
#pragma unroll
        for (int32_t j = 0; j < kTokens; ++j) {
            uint32_t b[2];
            ptx::ldmatrix_x2(b, p_shared + static_cast<uint32_t>((j * Traits::kGroup + p_row) * Traits::kPRowBytes +
                                                                 (kk * Traits::kSubTileKeys + p_key) * 2));
#pragma unroll
            for (int32_t m = 0; m < Traits::kOMTiles; ++m) ptx::mma_f16_16816(o[m][j], a[m], b[0], b[1]);
        }
    }
}

// The block's key loop over tiles [0, num_tiles) (after the prologue issued the first
// kChunksInFlight chunks).
template <class Traits, int32_t kTokens>
__device__ __forceinline__ void key_loop(const wideattn_prefill_params& p, const BlockStream<Traits>& stream,
                                         uint32_t ring, uint32_t q_shared, uint32_t partial, uint32_t row_stats,
                                         uint32_t row_max, uint32_t p_shared, int32_t warp, int32_t lane,
                                         int32_t num_tiles, int32_t row_key_end, int32_t kv_end, float score_scale,
                                         float (&o)[Traits::kOMTiles][kTokens][4], LaneRows<Traits, kTokens>& rows) {
    const int32_t group = warp % Traits::kKeyGroups;
    const int32_t half = warp / Traits::kKeyGroups;
    for (int32_t i = 0; i < num_tiles; ++i) {
        const int32_t key_chunk = 2 * i;
        wait_oldest_chunk<Traits>();  // K_i; every warp is past P_i-1 V_i-1
        issue_chunk<Traits>(p, stream, ring, num_tiles, key_chunk + Traits::kChunksInFlight);
        const uint32_t k_tile = ring + static_cast<uint32_t>((key_chunk % Traits::kRingChunks) * Traits::kChunkBytes);
        float s[kTokens][4];
        partial_scores<Traits, kTokens>(k_tile + static_cast<uint32_t>(group * Traits::kSubTileBytes), q_shared, lane, half,
                               s);
        const uint32_t pair_barrier = static_cast<uint32_t>(Traits::kPairBarrierBase + group);
        if (half == 1) {
#pragma unroll
            for (int32_t j = 0; j < kTokens; ++j)
                ptx::store_shared_f32x4(partial_address<Traits>(partial, group, j, lane), s[j][0], s[j][1],
                                        s[j][2], s[j][3]);
        }
        ptx::named_barrier_sync(pair_barrier, Traits::kPairThreads);  // both warps, one instruction
        if (half == 0)
            complete_scores<Traits, kTokens>(partial, row_stats, group, lane, i * Traits::kTileKeys +
                                    group * Traits::kSubTileKeys, row_key_end, kv_end, score_scale, s);
        __syncthreads();  // every key group's maxima and scores
        float updated[kTokens][2];
        raise_maxima<Traits, kTokens>(row_stats, row_max, i % 2, warp, lane, rows, o, updated);
        if (half == 0) write_probabilities<Traits, kTokens>(partial, p_shared, group, lane, updated, rows);
        wait_oldest_chunk<Traits>();  // V_i; P_i complete; every warp is past S_i
        issue_chunk<Traits>(p, stream, ring, num_tiles, key_chunk + 1 + Traits::kChunksInFlight);
        accumulate_output<Traits, kTokens>(ring + static_cast<uint32_t>(((key_chunk + 1) % Traits::kRingChunks) *
                                                               Traits::kChunkBytes),
                                  p_shared, warp, lane, o);
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::verify_e4m3
