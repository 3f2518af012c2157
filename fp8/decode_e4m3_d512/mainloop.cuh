// mainloop.cuh - one warp's key loop of the single-token e4m3 decode kernel: per 16-key
// sub-tile, S^T = K Q^T (keys in m: 32 mma m16n8k16 f16 over the 512 dims, K codes converted to
// f16 after an ldmatrix, Q^T read from shared memory), the online softmax of the warp's own keys,
// P^T by movmatrix, and O^T += V^T P^T (32 mma: an even-dim and an odd-dim m-tile per 32 dims,
// V codes by a transposed ldmatrix, a byte permute and the conversion). No barrier but the warp's
// own: each warp streams its sub-tiles through its cp.async ring (kRingChunks chunks of K or V,
// one commit group per chunk).
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .f16; g = lane / 4, t = lane % 4):
// - S^T accumulator: c0 = (key g, row 2t), c1 = (key g, row 2t+1), c2, c3 the same of key g + 8.
// - K as the A operand: a plain ldmatrix.x4 of keys 0-7 / 8-15 at vectors 2c, 2c + 1 gives lane
//   (g, t) codes 4t .. 4t+3 of key g (g + 8) in each 16-dim vector; the low f16 pair is logical k
//   2t, 2t+1 and the high pair k 2t+8, 2t+9, so k position 2t + e is dim 4t + e and 2t + 8 + e is
//   dim 4t + 2 + e. Q^T (the B operand) takes the same order: b0, b1 are Q dims 4t .. 4t+3 of row
//   g, one 8-byte load.
// - V^T as the A operand: a transposed ldmatrix.x4 (b16) gives lane (g, t) the codes of keys 2t,
//   2t+1 at dims 2g, 2g+1 of a vector; a byte permute pairs the keys per dim, so the even m-tile
//   holds dims 2g (rows g) and 16 + 2g (rows g + 8) of each 32-dim block, the odd one dims 2g + 1
//   and 17 + 2g.
// - O^T accumulator o[2c + odd]: e0 = row 2t, e1 = row 2t+1 at dim 32c + 2g + odd, e2, e3 the
//   same at dim 32c + 16 + 2g + odd.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3_d512/traits.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"

namespace wideattn::decode_e4m3 {

constexpr uint32_t kPairKeysPerDim = 0x3120;  // bytes 0, 2, 1, 3: (key 2t, key 2t+1) of dim 2g, then of 2g+1

// The transpose of an 8x8 b16 matrix held in the accumulator layout (lane (g, t): row g,
// columns 2t, 2t+1).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

// Online-softmax state of the lane's two rows (2t, 2t + 1) over the warp's keys.
struct WarpRows {
    float max_log2[2];  // running maxima of the scaled scores (log2 units)
    float sum[2];       // the lane's part of the row sums of 2^(s - max + kProbScaleLog2)
};

// The lane address of the ldmatrix.x4 over keys 0-15 and 16-byte vectors 2c, 2c + 1 of a
// half-stage: lane L gives the row of matrix L / 8 (keys 8 (L / 8 % 2) + L % 8, vector 2c + L / 16).
template <class Traits>
__device__ __forceinline__ uint32_t block_row_address(uint32_t half_stage, int32_t lane, int32_t c) {
    const int32_t key = (lane / 8 % 2) * 8 + lane % 8;
    const int32_t vec = 2 * c + lane / 16;
    return half_stage + swizzled<Traits::kRowBytes, Traits>(key, vec);
}

// The K codes of 16 keys x dim block c (32 dims) as two A fragments in f16: lo (k 0-7 of each
// 16-dim half) and hi (k 8-15), by one ldmatrix.x4 and the conversions.
template <class Traits>
__device__ __forceinline__ void load_k_block(uint32_t k_stage, int32_t lane, int32_t c, uint32_t (&lo)[4],
                                             uint32_t (&hi)[4]) {
    uint32_t r[4];
    ptx::ldmatrix_x4(r, block_row_address<Traits>(k_stage, lane, c));
#pragma unroll
    for (int32_t q = 0; q < 4; ++q) e4m3x4_to_f16x2x2(r[q], lo[q], hi[q]);
}

// The V codes of 16 keys x dim block c (32 dims) as the A fragments of the even-dim and the
// odd-dim m-tile of V^T, by a transposed ldmatrix.x4, a byte permute and the conversions.
template <class Traits>
__device__ __forceinline__ void load_v_block(uint32_t v_stage, int32_t lane, int32_t c, uint32_t (&a_even)[4],
                                             uint32_t (&a_odd)[4]) {
    uint32_t r[4];
    ptx::ldmatrix_x4_trans(r, block_row_address<Traits>(v_stage, lane, c));
    uint32_t even[4], odd[4];
#pragma unroll
    for (int32_t q = 0; q < 4; ++q) e4m3x4_to_f16x2x2(__byte_perm(r[q], 0u, kPairKeysPerDim), even[q], odd[q]);
    // Matrix q: keys 8 (q % 2) .., vector 2c + q / 2; A rows g / g + 8 = vector 2c / 2c + 1,
    // k 2t.. / 8+2t.. = key block 0 / 1.
    a_even[0] = even[0];
    a_even[1] = even[2];
    a_even[2] = even[1];
    a_even[3] = even[3];
    a_odd[0] = odd[0];
    a_odd[1] = odd[2];
    a_odd[2] = odd[1];
    a_odd[3] = odd[3];
}

// S^T of one sub-tile from its two accumulators (even and odd k-steps): scaled to log2 units,
// keys past kv_end at -inf, the lane's 4 values.
__device__ __forceinline__ void finish_scores(const float (&acc)[2][4], int32_t lane, float score_scale,
                                              int32_t keys_valid, float (&s)[4]) {
    const int32_t g = lane / 4;
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const int32_t key = g + 8 * (e / 2);
        s[e] = key < keys_valid ? (acc[0][e] + acc[1][e]) * score_scale : -INFINITY;
    }
}

// acc[h] += the K A fragments lo / hi of dim block `block` (16 keys x 32 dims) times the Q^T
// fragments of the same dims read from q (the block's Q tile), h the 16-dim half; also the score
// loop of decode_e4m3kfv_d512 (fp8/decode_e4m3kfv_d512/keys.cuh). kBf16: the fragments and the Q
// tile hold bf16 (a bf16 mma), else f16.
template <class Traits, bool kBf16 = false>
__device__ __forceinline__ void accumulate_dim_block(float (&acc)[2][4], const uint32_t (&lo)[4], const uint32_t (&hi)[4],
                                                     uint32_t q, int32_t block, int32_t lane) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t h = 0; h < 2; ++h) {
        // Q dims 32 block + 16h + 4t .. +3 of row g: vector 4 block + 2h + t / 2, bytes 8 (t % 2).
        const int32_t vec = 4 * block + 2 * h + t / 2;
        const uint32_t address = q + swizzled<Traits::kQRowBytes, Traits>(g, vec) + 8 * (t % 2);
        uint32_t b0, b1;
        asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(address));
        const uint32_t a[4] = {lo[2 * h], lo[2 * h + 1], hi[2 * h], hi[2 * h + 1]};
        if constexpr (kBf16)
            ptx::mma_bf16_16816(acc[h], a, b0, b1);
        else
            ptx::mma_f16_16816(acc[h], a, b0, b1);
    }
}

// S^T of one sub-tile (scaled to log2 units, keys past kv_end at -inf), the lane's 4 values.
template <class Traits>
__device__ __forceinline__ void subtile_scores(uint32_t k_stage, uint32_t q_shared, int32_t lane, float score_scale,
                                               int32_t keys_valid, float (&s)[4]) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int32_t c = 0; c < Traits::kDimBlocks; ++c) {
        uint32_t lo[4], hi[4];
        load_k_block<Traits>(k_stage, lane, c, lo, hi);
        accumulate_dim_block<Traits>(acc, lo, hi, q_shared, c, lane);
    }
    finish_scores(acc, lane, score_scale, keys_valid, s);
}

// Two probabilities packed in the type of the P V mma (Traits::kBf16Probs: bf16, else f16).
template <class Traits>
__device__ __forceinline__ uint32_t pack_probs(float lo, float hi) {
    if constexpr (Traits::kBf16Probs)
        return ptx::pack_bf16x2(lo, hi);
    else
        return pack_f16x2(lo, hi);
}

// The softmax step of one sub-tile: raises the row maxima (O^T rescaled, warp-uniform decision),
// returns P^T = 2^(s - max + kProbScaleLog2) as the two B registers of the P V mma.
template <class Traits>
__device__ __forceinline__ void subtile_softmax(float (&s)[4], WarpRows& rows, float (&o)[Traits::kONTiles][4],
                                                uint32_t& p0, uint32_t& p1) {
    float tile_max[2] = {fmaxf(s[0], s[2]), fmaxf(s[1], s[3])};
#pragma unroll
    for (int32_t offset = 4; offset < Traits::kWarpSize; offset *= 2)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], offset));
    const bool grows = tile_max[0] > rows.max_log2[0] || tile_max[1] > rows.max_log2[1];
    if (__any_sync(kFullMask, grows)) {
        float alpha[2];
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) {
            const float updated = fmaxf(rows.max_log2[r], tile_max[r]);
            alpha[r] = updated == -INFINITY ? 1.0f : fast_exp2(rows.max_log2[r] - updated);
            rows.max_log2[r] = updated;
            rows.sum[r] *= alpha[r];
        }
#pragma unroll
        for (int32_t n = 0; n < Traits::kONTiles; ++n) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[1];
            o[n][2] *= alpha[0];
            o[n][3] *= alpha[1];
        }
    }
    float prob[4];
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const float m = rows.max_log2[e % 2];
        const float base = (m == -INFINITY ? 0.0f : m) - Traits::kProbScaleLog2;
        prob[e] = fast_exp2(s[e] - base);
        rows.sum[e % 2] += prob[e];
    }
    p0 = movmatrix_trans(pack_probs<Traits>(prob[0], prob[1]));  // keys 2t, 2t+1 of row g
    p1 = movmatrix_trans(pack_probs<Traits>(prob[2], prob[3]));  // keys 8+2t, 9+2t of row g
}

// O^T += V^T P^T over one sub-tile.
template <class Traits>
__device__ __forceinline__ void subtile_pv(uint32_t v_stage, int32_t lane, uint32_t p0, uint32_t p1,
                                           float (&o)[Traits::kONTiles][4]) {
#pragma unroll
    for (int32_t c = 0; c < Traits::kDimBlocks; ++c) {
        uint32_t a_even[4], a_odd[4];
        load_v_block<Traits>(v_stage, lane, c, a_even, a_odd);
        ptx::mma_f16_16816(o[2 * c], a_even, p0, p1);
        ptx::mma_f16_16816(o[2 * c + 1], a_odd, p0, p1);
    }
}

// O^T += V^T P^T over one sub-tile whose V codes are in the transposed layout ([dims][16
// positions], copy_transposed_v): lane (g, t)'s 4 bytes at position 4t of dim row 16n + g are the
// codes of keys 2t, 2t + 1, 8 + 2t, 9 + 2t (v_transposed.h), i.e. its A fragments a0 (low pair)
// and a2 (high pair) of m-tile n, row g; dim row 16n + g + 8 gives a1 and a3. O^T m-tile n holds
// dims 16n .. 16n + 15 (Traits::o_dim). Codes of keys at or past keys_valid are zeroed: their P is
// 0, but a NaN code in a page's unused slot would still poison O.
template <class Traits>
__device__ __forceinline__ void subtile_pv_transposed(uint32_t v_stage, int32_t lane, int32_t keys_valid, uint32_t p0,
                                                      uint32_t p1, float (&o)[Traits::kONTiles][4]) {
    constexpr int32_t kTileDims = Traits::kMmaM;
    constexpr int32_t kHalfDims = kTileDims / 2;
    constexpr int32_t kBitsPerByte = 8;
    const int32_t g = lane / 4, t = lane % 4;
    uint32_t keep = 0;
#pragma unroll
    for (int32_t b = 0; b < 4; ++b) {
        const int32_t key = (b / 2) * 8 + 2 * t + b % 2;
        if (key < keys_valid) keep |= 0xffu << (kBitsPerByte * b);
    }
    const uint32_t row = v_stage + static_cast<uint32_t>(g * Traits::kVecBytes + 4 * t);
#pragma unroll
    for (int32_t n = 0; n < Traits::kONTiles; ++n) {
        uint32_t x0, x1;
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x0) : "r"(row + n * kTileDims * Traits::kVecBytes));
        asm volatile("ld.shared.b32 %0, [%1];\n"
                     : "=r"(x1)
                     : "r"(row + (n * kTileDims + kHalfDims) * Traits::kVecBytes));
        uint32_t a[4];
        e4m3x4_to_f16x2x2(x0 & keep, a[0], a[2]);
        e4m3x4_to_f16x2x2(x1 & keep, a[1], a[3]);
        ptx::mma_f16_16816(o[n], a, p0, p1);
    }
}

// Sub-tiles of warp `warp` among num_tiles.
template <class Traits>
__device__ __forceinline__ int32_t warp_subtiles(int32_t num_tiles, int32_t warp) {
    return num_tiles > warp ? (num_tiles - warp + Traits::kWarps - 1) / Traits::kWarps : 0;
}

// Issues the warp's chunk c (K of its sub-tile c / 2 for even c, V for odd) when that sub-tile
// exists, and commits a group either way (one group per chunk keeps the waits' counts fixed).
template <class Traits>
__device__ __forceinline__ void issue_chunk(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                            uint32_t ring, int32_t warp, int32_t count, int32_t c) {
    const int32_t local = c / 2;
    if (local < count) {
        const int32_t sub = warp + local * Traits::kWarps;
        const uint32_t chunk = ring + (c % Traits::kRingChunks) * Traits::kChunkBytes;
        if (c % 2 == 0)
            stream.template issue<false>(p, sub, chunk);
        else
            stream.template issue<true>(p, sub, chunk);
    }
    ptx::cp_async_commit();
}

// The first chunks of the warp's stream, K_0 and V_0 (issued before the block reads Q, so their
// latency overlaps it).
template <class Traits>
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                               uint32_t ring, int32_t warp, int32_t num_tiles) {
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunksInFlight; ++c) issue_chunk<Traits>(p, stream, ring, warp, count, c);
}

// Waits for the warp's oldest chunk in flight (kChunksInFlight - 1 younger ones may stay).
template <class Traits>
__device__ __forceinline__ void wait_oldest_chunk() {
    ptx::cp_async_wait<Traits::kChunksInFlight - 1>();
    __syncwarp();  // landed for every lane; every lane is done with the chunk read before it
}

// The warp's key loop over sub-tiles warp, warp + kWarps, ... < num_tiles (after issue_prologue).
// Sub-tile i: wait for K_i, issue K_i+1 (into V_i-1's slot), S_i and the softmax, wait for V_i,
// issue V_i+1 (into K_i's slot), P_i V_i.
template <class Traits>
__device__ __forceinline__ void warp_key_loop(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                              uint32_t ring, uint32_t q_shared, int32_t warp, int32_t lane,
                                              int32_t num_tiles, int32_t kv_end, float score_scale,
                                              float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
    for (int32_t i = 0; i < count; ++i) {
        const int32_t key_chunk = 2 * i;
        wait_oldest_chunk<Traits>();  // K_i
        issue_chunk<Traits>(p, stream, ring, warp, count, key_chunk + Traits::kChunksInFlight);
        const int32_t key0 = (warp + i * Traits::kWarps) * Traits::kSubTileKeys;
        float s[4];
        subtile_scores<Traits>(ring + (key_chunk % Traits::kRingChunks) * Traits::kChunkBytes, q_shared, lane,
                               score_scale, kv_end - key0, s);
        uint32_t p0, p1;
        subtile_softmax<Traits>(s, rows, o, p0, p1);
        wait_oldest_chunk<Traits>();  // V_i
        issue_chunk<Traits>(p, stream, ring, warp, count, key_chunk + 1 + Traits::kChunksInFlight);
        const uint32_t v_stage = ring + ((key_chunk + 1) % Traits::kRingChunks) * Traits::kChunkBytes;
        if constexpr (Traits::kVTransposed)
            subtile_pv_transposed<Traits>(v_stage, lane, kv_end - key0, p0, p1, o);
        else
            subtile_pv<Traits>(v_stage, lane, p0, p1, o);
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::decode_e4m3
