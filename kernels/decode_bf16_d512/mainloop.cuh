// mainloop.cuh - one warp's key loop of the single-token BF16 decode kernel: per 16-key sub-tile,
// S^T = K Q^T (keys in m: 32 mma m16n8k16 bf16 over the 512 dims, K and Q^T fragments by plain
// ldmatrix), the online softmax of the warp's own keys, P^T by movmatrix, and O^T += V^T P^T (32
// mma, V^T fragments by a transposed ldmatrix). No barrier but the warp's own: each warp streams
// its sub-tiles through its cp.async ring, 4 chunks a sub-tile (K dims 0-255, K dims 256-511, V
// dims 0-255, V dims 256-511), one commit group per chunk.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16; g = lane / 4, t = lane % 4):
// - K as the A operand: an ldmatrix.x4 of keys 0-7 / 8-15 at vectors 2j, 2j + 1 of a chunk gives
//   a0 .. a3 of k-step j (dims 16j .. 16j + 15 of the chunk) as they are.
// - Q^T as the B operand: an ldmatrix.x4 of the 8 Q rows at vectors 4q .. 4q + 3 gives b0, b1 of
//   k-step 2q and of k-step 2q + 1 (lane (g, t): row g, dims 2t, 2t+1 of each vector).
// - S^T accumulator: c0 = (key g, row 2t), c1 = (key g, row 2t+1), c2, c3 the same of key g + 8.
// - V^T as the A operand: a transposed ldmatrix.x4 of keys 0-7 / 8-15 at vectors 2c, 2c + 1 gives
//   lane (g, t) keys 2t, 2t+1 (+8) at dim g (+8) of the m-tile: a = r0, r2, r1, r3.
// - P^T as the B operand: movmatrix.trans of the packed S^T pairs (keys 2t, 2t+1 of row g).
// - O^T accumulator o[n]: e0 = row 2t, e1 = row 2t+1 at dim 16n + g, e2, e3 the same at 16n + 8 + g.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/decode_bf16_d512/loads.cuh"
#include "kernels/decode_bf16_d512/traits.h"

namespace wideattn::decode_bf16 {

// decode_e4m3_d512's online softmax (P in bf16 and no offset by this kernel's traits), score
// finish and warp-ring helpers.
using decode_e4m3::finish_scores;
using decode_e4m3::movmatrix_trans;
using decode_e4m3::subtile_softmax;
using decode_e4m3::wait_oldest_chunk;
using decode_e4m3::warp_subtiles;
using decode_e4m3::WarpRows;

// The lane address of the ldmatrix.x4 over keys 0-15 and 16-byte vectors 2c, 2c + 1 of a chunk:
// lane L gives the row of matrix L / 8 (keys 8 (L / 8 % 2) + L % 8, vector 2c + L / 16).
template <class Traits>
__device__ __forceinline__ uint32_t chunk_row_address(uint32_t chunk, int32_t lane, int32_t c) {
    const int32_t key = (lane / 8 % 2) * 8 + lane % 8;
    const int32_t vec = 2 * c + lane / 16;
    return chunk + swizzled<Traits::kChunkRowBytes, Traits>(key, vec);
}

// Adds K Q^T over the dims of K chunk `part` to the two S^T accumulators (even and odd k-steps).
template <class Traits>
__device__ __forceinline__ void chunk_scores(uint32_t k_chunk, uint32_t q_shared, int32_t lane, int32_t part,
                                             float (&acc)[2][4]) {
    constexpr int32_t kStepVecs = Traits::kMmaK * Traits::kElemBytes / Traits::kVecBytes;  // 2
    constexpr int32_t kChunkQVecs = Traits::kChunkRowBytes / Traits::kVecBytes;            // 32
#pragma unroll
    for (int32_t q = 0; q < Traits::kChunkKSteps / 2; ++q) {
        uint32_t b[4];
        const int32_t q_vec = part * kChunkQVecs + 2 * kStepVecs * q + lane / 8;
        ptx::ldmatrix_x4(b, q_shared + swizzled<Traits::kQRowBytes, Traits>(lane % 8, q_vec));
#pragma unroll
        for (int32_t h = 0; h < 2; ++h) {
            uint32_t a[4];
            ptx::ldmatrix_x4(a, chunk_row_address<Traits>(k_chunk, lane, 2 * q + h));
            ptx::mma_bf16_16816(acc[h], a, b[2 * h], b[2 * h + 1]);
        }
    }
}

// O^T += V^T P^T over the dims of V chunk `part`.
template <class Traits>
__device__ __forceinline__ void chunk_pv(uint32_t v_chunk, int32_t lane, int32_t part, uint32_t p0, uint32_t p1,
                                         float (&o)[Traits::kONTiles][4]) {
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunkOTiles; ++c) {
        uint32_t r[4];
        ptx::ldmatrix_x4_trans(r, chunk_row_address<Traits>(v_chunk, lane, c));
        const uint32_t a[4] = {r[0], r[2], r[1], r[3]};
        ptx::mma_bf16_16816(o[part * Traits::kChunkOTiles + c], a, p0, p1);
    }
}

// Issues the warp's chunk c (part c % kChunksPerSubTile of its sub-tile c / kChunksPerSubTile: K
// parts first, then V parts) when that sub-tile exists, and commits a group either way (one group
// per chunk keeps the waits' counts fixed).
template <class Traits>
__device__ __forceinline__ void issue_chunk(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                            uint32_t ring, int32_t warp, int32_t count, int32_t c) {
    const int32_t local = c / Traits::kChunksPerSubTile;
    if (local < count) {
        const int32_t kind = c % Traits::kChunksPerSubTile;
        const int32_t sub = warp + local * Traits::kWarps;
        const uint32_t chunk = ring + (c % Traits::kRingChunks) * Traits::kChunkBytes;
        stream.issue(p, sub, kind >= Traits::kChunkParts, kind % Traits::kChunkParts, chunk);
    }
    ptx::cp_async_commit();
}

// The first chunks of the warp's stream (issued before the block reads Q, so their latency
// overlaps it).
template <class Traits>
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                               uint32_t ring, int32_t warp, int32_t num_tiles) {
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
#pragma unroll
    for (int32_t c = 0; c < Traits::kChunksInFlight; ++c) issue_chunk<Traits>(p, stream, ring, warp, count, c);
}

// The warp's key loop over sub-tiles warp, warp + kWarps, ... < num_tiles (after issue_prologue).
// Chunk c: wait for it, issue chunk c + 2 (into chunk c - 1's slot, which every lane has read),
// then its scores (K parts; the softmax after the last) or its P V (V parts).
template <class Traits>
__device__ __forceinline__ void warp_key_loop(const wideattn_prefill_params& p, const WarpStream<Traits>& stream,
                                              uint32_t ring, uint32_t q_shared, int32_t warp, int32_t lane,
                                              int32_t num_tiles, int32_t kv_end, float score_scale,
                                              float (&o)[Traits::kONTiles][4], WarpRows& rows) {
    const int32_t count = warp_subtiles<Traits>(num_tiles, warp);
    for (int32_t i = 0; i < count; ++i) {
        const int32_t first = i * Traits::kChunksPerSubTile;
        float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
        for (int32_t part = 0; part < Traits::kChunkParts; ++part) {
            const int32_t c = first + part;
            wait_oldest_chunk<Traits>();
            issue_chunk<Traits>(p, stream, ring, warp, count, c + Traits::kChunksInFlight);
            chunk_scores<Traits>(ring + (c % Traits::kRingChunks) * Traits::kChunkBytes, q_shared, lane, part, acc);
        }
        const int32_t key0 = (warp + i * Traits::kWarps) * Traits::kSubTileKeys;
        float s[4];
        finish_scores(acc, lane, score_scale, kv_end - key0, s);
        uint32_t p0, p1;
        subtile_softmax<Traits>(s, rows, o, p0, p1);
#pragma unroll
        for (int32_t part = 0; part < Traits::kChunkParts; ++part) {
            const int32_t c = first + Traits::kChunkParts + part;
            wait_oldest_chunk<Traits>();
            issue_chunk<Traits>(p, stream, ring, warp, count, c + Traits::kChunksInFlight);
            chunk_pv<Traits>(ring + (c % Traits::kRingChunks) * Traits::kChunkBytes, lane, part, p0, p1, o);
        }
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::decode_bf16
