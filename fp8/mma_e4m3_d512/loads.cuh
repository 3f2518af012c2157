// loads.cuh - the global-memory loads of the 8-bit mma.sync prefill kernels (mma_e4m3_d512,
// mma_e4m3q_d512): K/V chunks of e4m3 bytes into the shared-memory ring (cp.async, paged,
// swizzled), and the warp's Q rows into e4m3 A fragments, either quantised from bf16 in
// registers (one scale per row and dim half) or read as e4m3 codes (per-tensor scale).
//
// A chunk is [kTileKeys][kHeadDim] e4m3 with the 16-byte column index XOR-swizzled by (row % 8),
// so ldmatrix and ldmatrix.trans read it without bank conflicts.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "wideattn.h"

namespace wideattn::mma_e4m3 {

constexpr uint32_t kFullMask = 0xffffffffu;

// Byte offset of (row, 16-byte column vec) inside a swizzled chunk.
template <class Traits>
__device__ __forceinline__ uint32_t chunk_offset(int32_t row, int32_t vec) {
    return static_cast<uint32_t>(row * Traits::kRowBytes + (vec ^ (row % Traits::kSwizzleRows)) * Traits::kVecBytes);
}

// Where the two 16-key page runs of key tile `tile` live (block_size is a multiple of 16, so
// a run never straddles a page; the second run is in the same page unless the first ends
// it). A run that starts at or past kv_end is never read (zero-filled): no table lookup. A run
// whose page is outside the cache gets kNoPage and is zero-filled too (page_bounds.cuh).
template <class Traits>
struct TileLocation {
    int32_t page[Traits::kPageRunsPerTile];
    int32_t first_slot[Traits::kPageRunsPerTile];
};

template <class Traits>
__device__ __forceinline__ TileLocation<Traits> locate_tile(const wideattn_prefill_params& p,
                                                            const int32_t* table_row, int32_t tile, int32_t kv_end) {
    TileLocation<Traits> where{{0, 0}, {0, 0}};
    const int32_t first_key = tile * Traits::kTileKeys;
    if (first_key >= kv_end) return where;
    const int32_t index = first_key / p.block_size;
    const int32_t first_page = __ldg(table_row + index);
    where.page[0] = page_in_cache(first_page, p.num_blocks) ? first_page : kNoPage;
    where.first_slot[0] = first_key - index * p.block_size;
    if (first_key + Traits::kPageRunKeys < kv_end) {
        const int32_t next_slot = where.first_slot[0] + Traits::kPageRunKeys;
        const bool same_page = next_slot < p.block_size;  // block_size is a multiple of 16
        const int32_t next_page = same_page ? first_page : __ldg(table_row + index + 1);
        where.page[1] = page_in_cache(next_page, p.num_blocks) ? next_page : kNoPage;
        where.first_slot[1] = same_page ? next_slot : 0;
    }
    return where;
}

// Issues (does not commit) the cp.async copies of one chunk from kIssuers threads; `issuer`
// is this thread's index among them. A thread only ever issues V chunks (is_value) or only K
// chunks, so everything derived from the tensor's pointer and strides is loop-invariant for
// it. Keys >= kv_end and runs of kNoPage are zero-filled; a chunk past the last tile issues
// nothing.
template <class Traits, int32_t kIssuers>
__device__ __forceinline__ void issue_chunk(const wideattn_prefill_params& p, int32_t chunk, int32_t num_tiles,
                                            int32_t kv_end, int32_t kv_head, const TileLocation<Traits>& where,
                                            uint32_t ring, int32_t issuer, bool is_value) {
    constexpr int32_t kRowsPerPass = kIssuers / Traits::kVecsPerRow;
    constexpr int32_t kPasses = Traits::kTileKeys / kRowsPerPass;
    constexpr int32_t kPassesPerRun = Traits::kPageRunKeys / kRowsPerPass;
    static_assert(kIssuers % Traits::kVecsPerRow == 0 && Traits::kPageRunKeys % kRowsPerPass == 0,
                  "whole rows per pass, a pass never straddles a page run");
    const int32_t key_tile = chunk >> 1;
    if (key_tile >= num_tiles) return;
    const uint8_t* cache = static_cast<const uint8_t*>(is_value ? p.v_cache : p.k_cache);
    const int64_t slot_stride = is_value ? p.v_slot_stride : p.k_slot_stride;
    const int64_t block_stride = is_value ? p.v_block_stride : p.k_block_stride;
    const int64_t head_offset = kv_head * (is_value ? p.v_head_stride : p.k_head_stride);
    const int32_t first_key = key_tile * Traits::kTileKeys;
    const int32_t vec = issuer % Traits::kVecsPerRow;
    const int32_t first_row = issuer / Traits::kVecsPerRow;
    const uint32_t slot_base = ring + (chunk % Traits::kRingSlots) * Traits::kChunkBytes;
#pragma unroll
    for (int32_t run = 0; run < Traits::kPageRunsPerTile; ++run) {
        const bool in_cache = where.page[run] != kNoPage;
        const uint8_t* run_base = cache + (in_cache ? where.page[run] : 0) * block_stride +
                                  (where.first_slot[run] + first_row) * slot_stride + head_offset +
                                  vec * Traits::kVecBytes;
#pragma unroll
        for (int32_t i = 0; i < kPassesPerRun; ++i) {
            const int32_t row = run * Traits::kPageRunKeys + first_row + i * kRowsPerPass;
            const bool valid = in_cache && first_key + row < kv_end;
            ptx::cp_async_16(slot_base + chunk_offset<Traits>(row, vec),
                             valid ? run_base + i * kRowsPerPass * slot_stride : cache,
                             valid ? Traits::kVecBytes : 0);
        }
    }
    static_assert(kPassesPerRun * Traits::kPageRunsPerTile == kPasses, "passes cover the tile");
}

using ptx::bf16_high;
using ptx::bf16_low;

// Eight bytes of global memory through the read-only path.
__device__ __forceinline__ uint2 load_global_8(const void* pointer) {
    return __ldg(static_cast<const uint2*>(pointer));
}

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

template <class Traits>
__device__ __forceinline__ void load_q_fragments(const wideattn_prefill_params& p,
                                                 uint32_t (&q)[Traits::kQkSteps][4], float (&q_scale_out)[2],
                                                 int64_t first_token, int32_t tile_len, int32_t row_tile,
                                                 int32_t head, int32_t half, int32_t lane) {
    const __nv_bfloat16* rows[2];
    lane_q_rows<Traits, kLaneDims>(p, first_token, tile_len, row_tile, head, half, lane, rows);
    float inv_scale[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float amax = 0.0f;
#pragma unroll
        for (int32_t kk = 0; kk < Traits::kQkSteps; ++kk)
#pragma unroll
            for (int32_t h = 0; h < 2; ++h)
                amax = fmaxf(amax,
                             max_abs_bf16x4(load_global_8(rows[r] + kk * Traits::kMmaK + h * Traits::kMmaK / 2)));
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, 2));
        q_scale_out[r] = amax / Traits::kQTargetMax;
        inv_scale[r] = amax > 0.0f ? Traits::kQTargetMax / amax : 0.0f;
    }
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kQkSteps; ++kk)
#pragma unroll
        for (int32_t h = 0; h < 2; ++h)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r) {
                const uint2 w = load_global_8(rows[r] + kk * Traits::kMmaK + h * Traits::kMmaK / 2);
                const float s = inv_scale[r];
                q[kk][2 * h + r] = pack_e4m3x4(bf16_low(w.x) * s, bf16_high(w.x) * s, bf16_low(w.y) * s,
                                               bf16_high(w.y) * s);
            }
}

// Loads the warp's Q rows when Q is already e4m3 (per-tensor scale, applied by the caller
// through score_factor): each A register is 4 consecutive codes of one row, read as one
// 4-byte word (q strides are multiples of 16 bytes, validated). Rows past the tile read the
// last valid token (discarded).
template <class Traits>
__device__ __forceinline__ void load_q_fragments_e4m3(const wideattn_prefill_params& p,
                                                      uint32_t (&q)[Traits::kQkSteps][4], int64_t first_token,
                                                      int32_t tile_len, int32_t row_tile, int32_t head,
                                                      int32_t half, int32_t lane) {
    const uint8_t* rows[2];
    lane_q_rows<Traits, kLaneDims>(p, first_token, tile_len, row_tile, head, half, lane, rows);
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kQkSteps; ++kk)
#pragma unroll
        for (int32_t h = 0; h < 2; ++h)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r)
                q[kk][2 * h + r] =
                    __ldg(reinterpret_cast<const uint32_t*>(rows[r] + kk * Traits::kMmaK + h * Traits::kMmaK / 2));
}

}  // namespace wideattn::mma_e4m3
