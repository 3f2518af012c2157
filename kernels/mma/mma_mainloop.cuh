// mma_mainloop.cuh - the streaming loop of the mma prefill kernel: K/V chunk loads into the
// shared-memory ring (cp.async, paged, swizzled), Q K^T on the warp's half of the dims, the
// pair-wise partial-score exchange, the online softmax (exp2, lazy rescale) and P V.
//
// Shared memory: ring of kRingSlots chunks [kTileKeys][kHeadDim] bf16, the 16-byte column
// index XOR-swizzled with (row % 8) so ldmatrix and ldmatrix.trans are conflict-free; then
// the exchange buffer, float4 [warp][key n-tile][lane].
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
#include <cuda_bf16.h>

#include "wideattn.h"
#include "kernels/mma/mma_block_geometry.cuh"
#include "kernels/mma/mma_online_softmax.cuh"
#include "kernels/mma/mma_pair_exchange.cuh"
#include "kernels/mma/mma_primitives.cuh"
#include "kernels/mma/mma_traits.h"

namespace wideattn::mma {

using Tr = MmaBf16D512Traits;

// Byte offset of element (row, 16-byte column vec) inside a swizzled chunk.
__device__ __forceinline__ uint32_t chunk_offset(int32_t row, int32_t vec) {
    return static_cast<uint32_t>((row * Tr::kHeadDim + ((vec ^ (row % Tr::kSwizzleRows)) * Tr::kVecElems)) *
                                 Tr::kElemBytes);
}

// The chunks one thread issues. Each half of the block always issues the same tensor (K or V)
// and consecutive key tiles, so the pointers and strides are loop-invariant and the page
// position advances by one tile per chunk: no division and no 64-bit stride selection in the
// loop. block_size is a multiple of kTileKeys, so a tile never straddles a page.
template <int32_t kIssuers>
struct ChunkStream {
    static constexpr int32_t kRowsPerPass = kIssuers / Tr::kVecsPerRow;
    static constexpr int32_t kPasses = Tr::kTileKeys / kRowsPerPass;
    static_assert(kIssuers % Tr::kVecsPerRow == 0 && Tr::kTileKeys % kRowsPerPass == 0, "whole rows per pass");

    const char* head_base;   // cache + kv_head * head_stride + first_row * slot_stride + vec * 16 B
    int64_t block_stride;    // bytes between pages
    int64_t slot_stride;     // bytes between the slots (keys) of a page
    int32_t first_row;       // the thread's first row of a chunk
    int32_t vec;             // the thread's 16-byte column of a row
    int32_t tile;            // key tile of the next chunk
    int32_t page_index;      // its block_table index
    int32_t page_slot;       // the slot of its first key inside that page

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, bool is_value, int32_t kv_head,
                                         int32_t issuer) {
        constexpr int64_t kElem = Tr::kElemBytes;
        vec = issuer % Tr::kVecsPerRow;
        first_row = issuer / Tr::kVecsPerRow;
        slot_stride = (is_value ? p.v_slot_stride : p.k_slot_stride) * kElem;
        block_stride = (is_value ? p.v_block_stride : p.k_block_stride) * kElem;
        head_base = static_cast<const char*>(is_value ? p.v_cache : p.k_cache) +
                    kv_head * (is_value ? p.v_head_stride : p.k_head_stride) * kElem + first_row * slot_stride +
                    vec * Tr::kVecElems * kElem;
        tile = 0;
        page_index = 0;
        page_slot = 0;
    }

    // The page of the next chunk (read early so its latency hides behind the wait and barrier).
    __device__ __forceinline__ int32_t next_page(const int32_t* table_row, int32_t num_tiles) const {
        return tile < num_tiles ? __ldg(table_row + page_index) : 0;
    }

    // Issues (does not commit) the copies of the next chunk into `slot_base` and advances to
    // the tile after it. Keys >= kv_end are zero-filled (their addresses stay inside the page);
    // a tile past the last one issues nothing.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t page, int32_t num_tiles,
                                          int32_t kv_end, uint32_t slot_base) {
        if (tile < num_tiles) {
            const char* src = head_base + page * block_stride + page_slot * slot_stride;
            const int32_t rows_valid = kv_end - tile * Tr::kTileKeys;
#pragma unroll
            for (int32_t i = 0; i < kPasses; ++i) {
                const int32_t row = first_row + i * kRowsPerPass;
                cp_async_16(slot_base + chunk_offset(row, vec), src + i * kRowsPerPass * slot_stride,
                            row < rows_valid ? Tr::kVecElems * Tr::kElemBytes : 0);
            }
        }
        ++tile;
        page_slot += Tr::kTileKeys;
        if (page_slot == p.block_size) {
            page_slot = 0;
            ++page_index;
        }
    }
};

// Loads the warp's Q fragments (A operand, rows of its m-tile, its half of the dims)
// straight from global memory. Rows past the tile read the last valid token (discarded).
__device__ __forceinline__ void load_q_fragments(const wideattn_prefill_params& p, uint32_t (&q)[Tr::kQkSteps][4],
                                                 int64_t first_token, int32_t tile_len, int32_t row_tile,
                                                 int32_t head, int32_t half, int32_t lane) {
    constexpr int32_t kLaneDims = 2;  // a lane's 2 consecutive dims of one A register (m16n8k16)
    const __nv_bfloat16* rows[2];
    lane_q_rows<Tr, kLaneDims>(p, first_token, tile_len, row_tile, head, half, lane, rows);
#pragma unroll
    for (int32_t kk = 0; kk < Tr::kQkSteps; ++kk) {
        const int32_t col = kk * Tr::kMmaK;
        q[kk][0] = __ldg(reinterpret_cast<const uint32_t*>(rows[0] + col));
        q[kk][1] = __ldg(reinterpret_cast<const uint32_t*>(rows[1] + col));
        q[kk][2] = __ldg(reinterpret_cast<const uint32_t*>(rows[0] + col + Tr::kMmaK / 2));
        q[kk][3] = __ldg(reinterpret_cast<const uint32_t*>(rows[1] + col + Tr::kMmaK / 2));
    }
}

// ldmatrix lane addresses. K (B of Q K^T, non-transposed): matrices (keys 0-7, dims +0/+8),
// (keys 8-15, dims +0/+8). V (B of P V, transposed): (keys 0-7 / 8-15, dims +0), then
// dims +8. The 16-byte column index c = 8 * span + 2 * step + bit is stored at
// c ^ (row % 8); with row % 8 = lane % 8 that is 8 * span + 2 * (step ^ swap) + (bit ^ flip),
// swap = (lane % 8) / 2, flip = lane % 2, so one base per operand plus the per-step term
// 32 * (step ^ swap) bytes gives every address.
constexpr int32_t kSwizzleSpanBytes = Tr::kSwizzleRows * Tr::kVecElems * Tr::kElemBytes;  // one XOR period

struct LaneOffsets {
    uint32_t k_base;
    uint32_t v_base;
    uint32_t swap;
};

constexpr int32_t kVecBytes = Tr::kVecElems * Tr::kElemBytes;
constexpr int32_t kPairVecBytes = 2 * kVecBytes;

__device__ __forceinline__ LaneOffsets lane_offsets(int32_t lane, int32_t half) {
    constexpr int32_t kRowBytes = Tr::kHeadDim * Tr::kElemBytes;
    constexpr int32_t kHalfBytes = Tr::kDimsPerWarp * Tr::kElemBytes;
    const int32_t lane_row8 = lane % 8;
    const int32_t k_row = (lane / 16) * 8 + lane_row8;
    const int32_t k_vec_bit = (lane / 8) % 2;
    const int32_t v_row = ((lane / 8) % 2) * 8 + lane_row8;
    const int32_t v_vec_bit = lane / 16;
    LaneOffsets offsets;
    offsets.k_base = k_row * kRowBytes + half * kHalfBytes + ((k_vec_bit ^ (lane_row8 % 2)) * kVecBytes);
    offsets.v_base = v_row * kRowBytes + half * kHalfBytes + ((v_vec_bit ^ (lane_row8 % 2)) * kVecBytes);
    offsets.swap = lane_row8 / 2;
    return offsets;
}

// Byte offset of pair-step `step` (0..kHeadDim/16-1 within the half) for this lane.
__device__ __forceinline__ uint32_t step_offset(const LaneOffsets& offsets, int32_t step) {
    return (((step % 4) ^ offsets.swap) * kPairVecBytes) + (step / 4) * kSwizzleSpanBytes;
}


// Scores of the warp's 16 rows against key tile `tile` (in log2 units, scaled, masked):
// partial Q K^T over the warp's half of the dims, then own + partner through shared memory.
__device__ __forceinline__ void tile_scores(const wideattn_prefill_params& p, const BlockGeometry& g,
                                            const uint32_t (&q)[Tr::kQkSteps][4], const LaneOffsets& offsets,
                                            uint32_t k_slot, uint32_t exchange, int32_t tile,
                                            float (&s)[Tr::kKeyNTiles][4]) {
    const int32_t warp = threadIdx.x / Tr::kWarpSize;
    const int32_t lane = threadIdx.x % Tr::kWarpSize;
    float chain[Tr::kQkChains][Tr::kKeyNTiles][4];
#pragma unroll
    for (int32_t c = 0; c < Tr::kQkChains; ++c)
#pragma unroll
        for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
#pragma unroll
            for (int32_t e = 0; e < 4; ++e) chain[c][n][e] = 0.0f;
#pragma unroll
    for (int32_t kk = 0; kk < Tr::kQkSteps; ++kk) {
        uint32_t b[4];
        ldmatrix_x4(b, k_slot + offsets.k_base + step_offset(offsets, kk));
        mma_bf16_16816(chain[kk % Tr::kQkChains][0], q[kk], b[0], b[1]);
        mma_bf16_16816(chain[kk % Tr::kQkChains][1], q[kk], b[2], b[3]);
    }
#pragma unroll
    for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            float sum = chain[0][n][e];
#pragma unroll
            for (int32_t c = 1; c < Tr::kQkChains; ++c) sum += chain[c][n][e];
            s[n][e] = sum;
        }

    // Pair exchange: both warps end with own + partner, bitwise identical sums.
    add_partner_scores<Tr>(exchange, warp, lane, s);
#pragma unroll
    for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) s[n][e] *= p.softmax_scale * kLog2e;

    mask_tile_scores<Tr::kTileKeys, Tr::kMmaN>(g, tile, lane, s);
}

// Online softmax with lazy rescale (warp-uniform decision); returns P as the A fragment of
// P V (the accumulator layout of two key n-tiles is the A layout).
__device__ __forceinline__ void softmax_update(float (&s)[Tr::kKeyNTiles][4], float (&o)[Tr::kDimNTiles][4],
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
    rescale_if_grown<Tr>(tile_max, o, state);
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r];
#pragma unroll
    for (int32_t n = 0; n < Tr::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            s[n][e] = fast_exp2(s[n][e] - base[e / 2]);
            state.sum[e / 2] += s[n][e];
        }
    prob[0] = pack_bf16x2(s[0][0], s[0][1]);
    prob[1] = pack_bf16x2(s[0][2], s[0][3]);
    prob[2] = pack_bf16x2(s[1][0], s[1][1]);
    prob[3] = pack_bf16x2(s[1][2], s[1][3]);
}

// o += P V over the warp's half of the dims for one key tile.
__device__ __forceinline__ void accumulate_pv(float (&o)[Tr::kDimNTiles][4], const uint32_t (&prob)[4],
                                              const LaneOffsets& offsets, uint32_t v_slot) {
#pragma unroll
    for (int32_t np = 0; np < Tr::kDimNTiles / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_slot + offsets.v_base + step_offset(offsets, np));
        mma_bf16_16816(o[2 * np], prob, b[0], b[1]);
        mma_bf16_16816(o[2 * np + 1], prob, b[2], b[3]);
    }
}

// (slot + step) % kRingSlots for slot < kRingSlots and step <= kRingSlots.
__device__ __forceinline__ int32_t ring_add(int32_t slot, int32_t step) {
    const int32_t sum = slot + step;
    return sum >= Tr::kRingSlots ? sum - Tr::kRingSlots : sum;
}

// Runs the whole key loop for this warp: o accumulates unnormalised P V, state holds the
// running max and partial sums.
__device__ __forceinline__ void attention_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                   const uint32_t (&q)[Tr::kQkSteps][4],
                                                   float (&o)[Tr::kDimNTiles][4], RowState& state,
                                                   unsigned char* smem) {
    const int32_t warp = threadIdx.x / Tr::kWarpSize;
    const int32_t lane = threadIdx.x % Tr::kWarpSize;
    const bool lagging_group = Tr::kPingPong && warp >= Tr::kWarpsPerGroup;  // P V one tile behind
    const uint32_t ring = shared_address(smem);
    const uint32_t exchange = ring + Tr::kRingBytes;
    const LaneOffsets offsets = lane_offsets(lane, warp % Tr::kDimSplit);
    const int32_t* table_row = p.block_table + g.table_offset;
    // Chunks issued ahead of the step: K_j, V_j (and K_j+1 without ping-pong).
    constexpr int32_t kChunksAhead = Tr::kPingPong ? 2 : 3;

    // Each chunk is issued by one half of the block (kIssuers threads); step j's two chunks
    // are 2j + kChunksAhead (half 0) and the one after it (half 1), so a half always issues
    // the same tensor. Every thread commits one group per chunk (empty when the other half
    // issued it), in chunk order, so "all but the newest kChunksAhead - 2 groups" means the
    // same chunks on every thread.
    constexpr int32_t kIssuers = Tr::kThreads / 2;
    const int32_t half_of_block = threadIdx.x / kIssuers;
    const int32_t issued_parity = (kChunksAhead + half_of_block) % 2;  // 1: this half issues V
    ChunkStream<kIssuers> stream;
    stream.init(p, issued_parity == 1, g.kv_head, threadIdx.x % kIssuers);
#pragma unroll
    for (int32_t c = 0; c < kChunksAhead; ++c) {
        if (c % 2 == issued_parity)
            stream.issue(p, stream.next_page(table_row, g.num_tiles), g.num_tiles, g.kv_end,
                         ring + c * Tr::kChunkBytes);
        cp_async_commit();
    }

    uint32_t prob[4];
    int32_t k_slot = 0;  // ring slot of K_j: (2j) % kRingSlots
    for (int32_t j = 0; j < g.num_tiles; ++j) {
        const int32_t page = stream.next_page(table_row, g.num_tiles);
        const int32_t v_slot = ring_add(k_slot, 1);
        cp_async_wait<kChunksAhead - 2>();
        __syncthreads();
        if (half_of_block == 1) cp_async_commit();
        stream.issue(p, page, g.num_tiles, g.kv_end,
                     ring + ring_add(k_slot, kChunksAhead + half_of_block) * Tr::kChunkBytes);
        cp_async_commit();
        if (half_of_block == 0) cp_async_commit();
        if (lagging_group && j > 0)
            accumulate_pv(o, prob, offsets, ring + ring_add(k_slot, Tr::kRingSlots - 1) * Tr::kChunkBytes);
        float s[Tr::kKeyNTiles][4];
        tile_scores(p, g, q, offsets, ring + k_slot * Tr::kChunkBytes, exchange, j, s);
        softmax_update(s, o, state, prob);
        if (!lagging_group) accumulate_pv(o, prob, offsets, ring + v_slot * Tr::kChunkBytes);
        k_slot = ring_add(k_slot, 2);
    }
    if (lagging_group && g.num_tiles > 0)
        accumulate_pv(o, prob, offsets, ring + ring_add(k_slot, Tr::kRingSlots - 1) * Tr::kChunkBytes);
    cp_async_wait<0>();
}

}  // namespace wideattn::mma
