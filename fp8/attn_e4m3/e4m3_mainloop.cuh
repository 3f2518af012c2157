// e4m3_mainloop.cuh - the streaming loop of the 8-bit mma prefill kernel: Q quantisation
// into A fragments, K/V chunk loads into the shared-memory ring (cp.async, paged, swizzled,
// e4m3 bytes), Q K^T with mma m16n8k32 e4m3, the pair-wise partial-score exchange, the
// online softmax (exp2, P pre-scaled by 2^8) and P V with V transposed in registers.
//
// Shared memory: ring of kRingSlots chunks [kTileKeys][kHeadDim] e4m3, the 16-byte column
// index XOR-swizzled with (row % 8) so ldmatrix and ldmatrix.trans are conflict-free; then
// the exchange buffer, float4 [warp][key n-tile][lane].
//
// Chunk c is K of key tile c/2 (c even) or V of key tile c/2 (c odd), in slot c % 5. Step j
// waits for chunks <= 2j+1 (K_j, V_j), passes one block barrier, then issues V_j+1 (threads
// 0..127) and K_j+2 (threads 128..255) into the slots of K_j-1 and V_j-1 (the schedule of
// the BF16 kernel, kernels/mma/mma_mainloop.cuh).
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
#include <cuda_bf16.h>

#include "wideattn.h"
#include "fp8/attn_e4m3/e4m3_attn_traits.h"
#include "fp8/attn_e4m3/e4m3_primitives.cuh"
#include "kernels/mma/mma_block_geometry.cuh"
#include "kernels/mma/mma_online_softmax.cuh"
#include "kernels/mma/mma_pair_exchange.cuh"

namespace wideattn::mma_e4m3 {

using Tr = MmaE4m3D512Traits;
using mma::cp_async_16;
using mma::cp_async_commit;
using mma::cp_async_wait;
using mma::fast_exp2;
using mma::kLog2e;
using mma::ldmatrix_x4;
using mma::ldmatrix_x4_trans;
using mma::RowState;
using mma::rescale_if_grown;
using mma::shared_address;

constexpr uint32_t kFullMask = 0xffffffffu;

// Byte offset of (row, 16-byte column vec) inside a swizzled chunk.
__device__ __forceinline__ uint32_t chunk_offset(int32_t row, int32_t vec) {
    return static_cast<uint32_t>(row * Tr::kRowBytes + (vec ^ (row % Tr::kSwizzleRows)) * Tr::kVecBytes);
}

// Where the two 16-key page runs of key tile `tile` live (block_size is a multiple of 16, so
// a run never straddles a page; the second run is in the same page unless the first ends
// it). A run that starts at or past kv_end is never read (zero-filled): no table lookup.
struct TileLocation {
    int32_t page[Tr::kPageRunsPerTile];
    int32_t first_slot[Tr::kPageRunsPerTile];
};

__device__ __forceinline__ TileLocation locate_tile(const wideattn_prefill_params& p, const int32_t* table_row,
                                                    int32_t tile, int32_t kv_end) {
    TileLocation where{{0, 0}, {0, 0}};
    const int32_t first_key = tile * Tr::kTileKeys;
    if (first_key >= kv_end) return where;
    const int32_t index = first_key / p.block_size;
    where.page[0] = __ldg(table_row + index);
    where.first_slot[0] = first_key - index * p.block_size;
    if (first_key + Tr::kPageRunKeys < kv_end) {
        const int32_t next_slot = where.first_slot[0] + Tr::kPageRunKeys;
        const bool same_page = next_slot < p.block_size;  // block_size is a multiple of 16
        where.page[1] = same_page ? where.page[0] : __ldg(table_row + index + 1);
        where.first_slot[1] = same_page ? next_slot : 0;
    }
    return where;
}

// Issues (does not commit) the cp.async copies of one chunk from kIssuers threads; `issuer`
// is this thread's index among them. A thread only ever issues V chunks (is_value) or only K
// chunks, so everything derived from the tensor's pointer and strides is loop-invariant for
// it. Keys >= kv_end are zero-filled; a chunk past the last tile issues nothing.
template <int32_t kIssuers>
__device__ __forceinline__ void issue_chunk(const wideattn_prefill_params& p, int32_t chunk, int32_t num_tiles,
                                            int32_t kv_end, int32_t kv_head, const TileLocation& where,
                                            uint32_t ring, int32_t issuer, bool is_value) {
    constexpr int32_t kRowsPerPass = kIssuers / Tr::kVecsPerRow;
    constexpr int32_t kPasses = Tr::kTileKeys / kRowsPerPass;
    constexpr int32_t kPassesPerRun = Tr::kPageRunKeys / kRowsPerPass;
    static_assert(kIssuers % Tr::kVecsPerRow == 0 && Tr::kPageRunKeys % kRowsPerPass == 0,
                  "whole rows per pass, a pass never straddles a page run");
    const int32_t key_tile = chunk >> 1;
    if (key_tile >= num_tiles) return;
    const uint8_t* cache = static_cast<const uint8_t*>(is_value ? p.v_cache : p.k_cache);
    const int64_t slot_stride = is_value ? p.v_slot_stride : p.k_slot_stride;
    const int64_t block_stride = is_value ? p.v_block_stride : p.k_block_stride;
    const int64_t head_offset = kv_head * (is_value ? p.v_head_stride : p.k_head_stride);
    const int32_t first_key = key_tile * Tr::kTileKeys;
    const int32_t vec = issuer % Tr::kVecsPerRow;
    const int32_t first_row = issuer / Tr::kVecsPerRow;
    const uint32_t slot_base = ring + (chunk % Tr::kRingSlots) * Tr::kChunkBytes;
#pragma unroll
    for (int32_t run = 0; run < Tr::kPageRunsPerTile; ++run) {
        const uint8_t* run_base = cache + where.page[run] * block_stride +
                                  (where.first_slot[run] + first_row) * slot_stride + head_offset +
                                  vec * Tr::kVecBytes;
#pragma unroll
        for (int32_t i = 0; i < kPassesPerRun; ++i) {
            const int32_t row = run * Tr::kPageRunKeys + first_row + i * kRowsPerPass;
            const bool valid = first_key + row < kv_end;
            cp_async_16(slot_base + chunk_offset(row, vec), valid ? run_base + i * kRowsPerPass * slot_stride : cache,
                        valid ? Tr::kVecBytes : 0);
        }
    }
    static_assert(kPassesPerRun * Tr::kPageRunsPerTile == kPasses, "passes cover the tile");
}

__device__ __forceinline__ float bf16_low(uint32_t word) { return __uint_as_float(word << 16); }
__device__ __forceinline__ float bf16_high(uint32_t word) { return __uint_as_float(word & 0xffff0000u); }

// Loads the warp's Q rows (bf16, its half of the dims) straight from global memory and
// quantises them to e4m3 A fragments with one scale per (row, dim half): the quad of lanes
// holding a row covers the half's 256 dims, so its maximum is a two-step shuffle. Two passes
// over the (L1-resident) rows - maximum, then quantise - keep only one k-step of raw bf16
// live. Writes q_scale_out[r] = max |q| / 448 of row r (0 for an all-zero row). Rows past
// the tile read the last valid token (discarded).
constexpr int32_t kLaneDims = 4;  // a lane's 4 consecutive dims of one A register (m16n8k32)

__device__ __forceinline__ float max_abs_bf16x4(uint2 w) {
    return fmaxf(fmaxf(fabsf(bf16_low(w.x)), fabsf(bf16_high(w.x))), fmaxf(fabsf(bf16_low(w.y)), fabsf(bf16_high(w.y))));
}

__device__ __forceinline__ void load_q_fragments(const wideattn_prefill_params& p, uint32_t (&q)[Tr::kQkSteps][4],
                                                 float (&q_scale_out)[2], int64_t first_token, int32_t tile_len,
                                                 int32_t row_tile, int32_t head, int32_t half, int32_t lane) {
    const __nv_bfloat16* rows[2];
    mma::lane_q_rows<Tr, kLaneDims>(p, first_token, tile_len, row_tile, head, half, lane, rows);
    float inv_scale[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float amax = 0.0f;
#pragma unroll
        for (int32_t kk = 0; kk < Tr::kQkSteps; ++kk)
#pragma unroll
            for (int32_t h = 0; h < 2; ++h)
                amax = fmaxf(amax, max_abs_bf16x4(load_global_8(rows[r] + kk * Tr::kMmaK + h * Tr::kMmaK / 2)));
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, 2));
        q_scale_out[r] = amax / Tr::kQTargetMax;
        inv_scale[r] = amax > 0.0f ? Tr::kQTargetMax / amax : 0.0f;
    }
#pragma unroll
    for (int32_t kk = 0; kk < Tr::kQkSteps; ++kk)
#pragma unroll
        for (int32_t h = 0; h < 2; ++h)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r) {
                const uint2 w = load_global_8(rows[r] + kk * Tr::kMmaK + h * Tr::kMmaK / 2);
                const float s = inv_scale[r];
                q[kk][2 * h + r] = pack_e4m3x4(bf16_low(w.x) * s, bf16_high(w.x) * s, bf16_low(w.y) * s,
                                               bf16_high(w.y) * s);
            }
}

// Loads the warp's Q rows when Q is already e4m3 (per-tensor scale, applied by the caller
// through score_factor): each A register is 4 consecutive codes of one row, read as one
// 4-byte word (q strides are multiples of 16 bytes, validated). Rows past the tile read the
// last valid token (discarded).
__device__ __forceinline__ void load_q_fragments_e4m3(const wideattn_prefill_params& p,
                                                      uint32_t (&q)[Tr::kQkSteps][4], int64_t first_token,
                                                      int32_t tile_len, int32_t row_tile, int32_t head,
                                                      int32_t half, int32_t lane) {
    const uint8_t* rows[2];
    mma::lane_q_rows<Tr, kLaneDims>(p, first_token, tile_len, row_tile, head, half, lane, rows);
#pragma unroll
    for (int32_t kk = 0; kk < Tr::kQkSteps; ++kk)
#pragma unroll
        for (int32_t h = 0; h < 2; ++h)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r)
                q[kk][2 * h + r] =
                    __ldg(reinterpret_cast<const uint32_t*>(rows[r] + kk * Tr::kMmaK + h * Tr::kMmaK / 2));
}

// Everything the main loop needs that is fixed for the block.
struct BlockGeometry : mma::BlockGeometry {
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

__device__ __forceinline__ LaneOffsets lane_offsets(int32_t lane, int32_t half) {
    const int32_t lane_row8 = lane % Tr::kSwizzleRows;
    const int32_t k_row = (lane / 16) * 8 + lane_row8;
    const int32_t k_vec_bit = (lane / 8) % 2;
    LaneOffsets offsets;
    offsets.k_base = k_row * Tr::kRowBytes + half * Tr::kHalfRowBytes + ((k_vec_bit ^ lane_row8) * Tr::kVecBytes);
    offsets.v_base = lane * Tr::kRowBytes + half * Tr::kHalfRowBytes + lane_row8 * Tr::kVecBytes;
    return offsets;
}

// Byte offset of Q K^T k-step kk (logical vecs 2kk, 2kk+1 of the half), key rows 0-15.
__device__ __forceinline__ uint32_t k_step_offset(const LaneOffsets& offsets, int32_t kk) {
    return (offsets.k_base ^ ((kk % 4) * 2 * Tr::kVecBytes)) + (kk / 4) * Tr::kSwizzleSpanBytes;
}

// Byte offset of P V 16-dim block v (logical vec v of the half).
__device__ __forceinline__ uint32_t v_block_offset(const LaneOffsets& offsets, int32_t v) {
    return (offsets.v_base ^ ((v % Tr::kSwizzleRows) * Tr::kVecBytes)) + (v / Tr::kSwizzleRows) * Tr::kSwizzleSpanBytes;
}

// Scores of the warp's 16 rows against key tile `tile` (log2 units, scaled, masked): partial
// Q K^T over the warp's half, dequantised with the row's own factor, then own + partner.
__device__ __forceinline__ void tile_scores(const BlockGeometry& g, const uint32_t (&q)[Tr::kQkSteps][4],
                                            const LaneOffsets& offsets, uint32_t k_slot, uint32_t exchange,
                                            int32_t tile, float (&s)[Tr::kKeyNTiles][4]) {
    const int32_t warp = threadIdx.x / Tr::kWarpSize;
    const int32_t lane = threadIdx.x % Tr::kWarpSize;
#pragma unroll
    for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[n][e] = 0.0f;
#pragma unroll
    for (int32_t key_half = 0; key_half < 2; ++key_half) {
#pragma unroll
        for (int32_t kk = 0; kk < Tr::kQkSteps; ++kk) {
            uint32_t b[4];
            ldmatrix_x4(b, k_slot + key_half * Tr::kKeyHalfRows * Tr::kRowBytes + k_step_offset(offsets, kk));
            mma_e4m3_16832(s[2 * key_half], q[kk], b[0], b[1]);
            mma_e4m3_16832(s[2 * key_half + 1], q[kk], b[2], b[3]);
        }
    }
#pragma unroll
    for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[n][e] *= g.score_factor[e / 2];
    mma::add_partner_scores<Tr>(exchange, warp, lane, s);

    mma::mask_tile_scores<Tr::kTileKeys, Tr::kMmaN>(g, tile, lane, s);
}

// Online softmax (exact rescale, warp-uniform decision); returns P * 2^8 as e4m3 A
// fragment of P V in the permuted key order described at the top of this file.
__device__ __forceinline__ void softmax_update(float (&s)[Tr::kKeyNTiles][4], float (&o)[Tr::kDimNTiles][4],
                                               RowState& state, uint32_t (&prob)[4]) {
    float tile_max[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float m = s[0][2 * r];
#pragma unroll
        for (int32_t n = 0; n < Tr::kKeyNTiles; ++n) m = fmaxf(m, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        tile_max[r] = m;
    }
    rescale_if_grown<Tr>(tile_max, o, state);
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r)
        base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r] - Tr::kProbScaleLog2;
#pragma unroll
    for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
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
__device__ __forceinline__ void accumulate_pv(float (&o)[Tr::kDimNTiles][4], const uint32_t (&prob)[4],
                                              const LaneOffsets& offsets, uint32_t v_slot) {
#pragma unroll
    for (int32_t v = 0; v < Tr::kPvDimBlocks; ++v) {
        uint32_t r[4];
        ldmatrix_x4_trans(r, v_slot + v_block_offset(offsets, v));
        const uint32_t b_even[2] = {merge_even_dim(r[0], r[1]), merge_even_dim(r[2], r[3])};
        const uint32_t b_odd[2] = {merge_odd_dim(r[0], r[1]), merge_odd_dim(r[2], r[3])};
        if constexpr (Tr::kTwoLevelPv) {
#pragma unroll
            for (int32_t parity = 0; parity < 2; ++parity) {
                float tile_part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                mma_e4m3_16832(tile_part, prob, parity ? b_odd[0] : b_even[0], parity ? b_odd[1] : b_even[1]);
#pragma unroll
                for (int32_t e = 0; e < 4; ++e) o[2 * v + parity][e] += tile_part[e];
            }
        } else {
            mma_e4m3_16832(o[2 * v], prob, b_even[0], b_even[1]);
            mma_e4m3_16832(o[2 * v + 1], prob, b_odd[0], b_odd[1]);
        }
        // Caps how many V fragments ptxas loads ahead (register budget, see the traits).
        if (v % Tr::kPvBlocksPerWarpSync == Tr::kPvBlocksPerWarpSync - 1) __syncwarp();
    }
}

__device__ __forceinline__ uint32_t slot_address(uint32_t ring, int32_t chunk) {
    return ring + (chunk % Tr::kRingSlots) * Tr::kChunkBytes;
}

// Runs the whole key loop for this warp: o accumulates unnormalised P V (in units of
// 2^kProbScaleLog2 * v code), state holds the running max and partial sums.
__device__ __forceinline__ void attention_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                   const uint32_t (&q)[Tr::kQkSteps][4],
                                                   float (&o)[Tr::kDimNTiles][4], RowState& state,
                                                   unsigned char* smem) {
    const int32_t warp = threadIdx.x / Tr::kWarpSize;
    const int32_t lane = threadIdx.x % Tr::kWarpSize;
    const uint32_t ring = shared_address(smem);
    const uint32_t exchange = ring + Tr::kRingBytes;
    const LaneOffsets offsets = lane_offsets(lane, warp % Tr::kDimSplit);
    const int32_t* table_row = p.block_table + g.table_offset;
    constexpr int32_t kChunksAhead = 3;  // K_j, V_j, K_j+1 in flight when step j starts

    // Threads 0..127 issue every V chunk (odd), threads 128..255 every K chunk (even); every
    // thread commits one group per chunk (empty when the other half issued it), in chunk
    // order, so "all but the newest group" means the same chunks on every thread.
    constexpr int32_t kIssuers = Tr::kThreads / 2;
    const int32_t half_of_block = threadIdx.x / kIssuers;
    const bool issues_values = half_of_block == 0;
    const int32_t issuer = threadIdx.x % kIssuers;
#pragma unroll
    for (int32_t c = 0; c < kChunksAhead; ++c) {
        if ((c % 2 == 1) == issues_values)
            issue_chunk<kIssuers>(p, c, g.num_tiles, g.kv_end, g.kv_head, locate_tile(p, table_row, c / 2, g.kv_end),
                                  ring, issuer, issues_values);
        cp_async_commit();
    }

    for (int32_t j = 0; j < g.num_tiles; ++j) {
        const int32_t chunk = 2 * j + kChunksAhead + half_of_block;  // V_j+1 (half 0) or K_j+2 (half 1)
        const TileLocation where = locate_tile(p, table_row, chunk / 2, g.kv_end);
        cp_async_wait<kChunksAhead - 2>();
        __syncthreads();
        if (half_of_block == 1) cp_async_commit();
        issue_chunk<kIssuers>(p, chunk, g.num_tiles, g.kv_end, g.kv_head, where, ring, issuer, issues_values);
        cp_async_commit();
        if (half_of_block == 0) cp_async_commit();
        float s[Tr::kKeyNTiles][4];
        tile_scores(g, q, offsets, slot_address(ring, 2 * j), exchange, j, s);
        uint32_t prob[4];
        softmax_update(s, o, state, prob);
        accumulate_pv(o, prob, offsets, slot_address(ring, 2 * j + 1));
    }
    cp_async_wait<0>();
}

}  // namespace wideattn::mma_e4m3
