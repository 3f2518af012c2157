// loads.cuh - the global-memory loads of the BF16 mma.sync prefill kernel (mma_bf16_d512): the
// K/V chunks of the key loop into the shared-memory ring (cp.async, paged, swizzled) and the
// warp's Q fragments straight into registers.
//
// A chunk is [kTileKeys][kHeadDim] bf16 with the 16-byte column index XOR-swizzled by
// (row % 8), so ldmatrix and ldmatrix.trans read it without bank conflicts.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "wideattn.h"

namespace wideattn::mma_bf16 {

// Byte offset of element (row, 16-byte column vec) inside a swizzled chunk.
template <class Traits>
__device__ __forceinline__ uint32_t chunk_offset(int32_t row, int32_t vec) {
    return static_cast<uint32_t>(
        (row * Traits::kHeadDim + ((vec ^ (row % Traits::kSwizzleRows)) * Traits::kVecElems)) * Traits::kElemBytes);
}

// The chunks one thread issues. Each half of the block always issues the same tensor (K or V)
// and consecutive key tiles, so the pointers and strides are loop-invariant and the page
// position advances by one tile per chunk: no division and no 64-bit stride selection in the
// loop. block_size is a multiple of kTileKeys, so a tile never straddles a page.
template <class Traits, int32_t kIssuers>
struct ChunkStream {
    static constexpr int32_t kRowsPerPass = kIssuers / Traits::kVecsPerRow;
    static constexpr int32_t kPasses = Traits::kTileKeys / kRowsPerPass;
    static_assert(kIssuers % Traits::kVecsPerRow == 0 && Traits::kTileKeys % kRowsPerPass == 0,
                  "whole rows per pass");

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
        constexpr int64_t kElem = Traits::kElemBytes;
        vec = issuer % Traits::kVecsPerRow;
        first_row = issuer / Traits::kVecsPerRow;
        slot_stride = (is_value ? p.v_slot_stride : p.k_slot_stride) * kElem;
        block_stride = (is_value ? p.v_block_stride : p.k_block_stride) * kElem;
        head_base = static_cast<const char*>(is_value ? p.v_cache : p.k_cache) +
                    kv_head * (is_value ? p.v_head_stride : p.k_head_stride) * kElem + first_row * slot_stride +
                    vec * Traits::kVecElems * kElem;
        tile = 0;
        page_index = 0;
        page_slot = 0;
    }

    // The page of the next chunk (read early so its latency hides behind the wait and barrier),
    // or kNoPage when the entry is outside the cache (page_bounds.cuh).
    __device__ __forceinline__ int32_t next_page(const wideattn_prefill_params& p, const int32_t* table_row,
                                                 int32_t num_tiles) const {
        const int32_t page = tile < num_tiles ? __ldg(table_row + page_index) : 0;
        return page_in_cache(page, p.num_blocks) ? page : kNoPage;
    }

    // Issues (does not commit) the copies of the next chunk into `slot_base` and advances to
    // the tile after it. Keys >= kv_end are zero-filled (their addresses stay inside the page),
    // and so is kNoPage (read as page 0, copying nothing);
    // a tile past the last one issues nothing.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t page, int32_t num_tiles,
                                          int32_t kv_end, uint32_t slot_base) {
        if (tile < num_tiles) {
            const bool in_cache = page != kNoPage;
            const char* src = head_base + (in_cache ? page : 0) * block_stride + page_slot * slot_stride;
            const int32_t rows_valid = in_cache ? kv_end - tile * Traits::kTileKeys : 0;
#pragma unroll
            for (int32_t i = 0; i < kPasses; ++i) {
                const int32_t row = first_row + i * kRowsPerPass;
                ptx::cp_async_16(slot_base + chunk_offset<Traits>(row, vec), src + i * kRowsPerPass * slot_stride,
                                 row < rows_valid ? Traits::kVecElems * Traits::kElemBytes : 0);
            }
        }
        ++tile;
        page_slot += Traits::kTileKeys;
        if (page_slot == p.block_size) {
            page_slot = 0;
            ++page_index;
        }
    }
};

// Loads the warp's Q fragments (A operand, rows of its m-tile, its half of the dims)
// straight from global memory. Rows past the tile read the last valid token (discarded).
template <class Traits>
__device__ __forceinline__ void load_q_fragments(const wideattn_prefill_params& p,
                                                 uint32_t (&q)[Traits::kQkSteps][4], int64_t first_token,
                                                 int32_t tile_len, int32_t row_tile, int32_t head, int32_t half,
                                                 int32_t lane) {
    constexpr int32_t kLaneDims = 2;  // a lane's 2 consecutive dims of one A register (m16n8k16)
    const __nv_bfloat16* rows[2];
    lane_q_rows<Traits, kLaneDims>(p, first_token, tile_len, row_tile, head, half, lane, rows);
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kQkSteps; ++kk) {
        const int32_t col = kk * Traits::kMmaK;
        q[kk][0] = __ldg(reinterpret_cast<const uint32_t*>(rows[0] + col));
        q[kk][1] = __ldg(reinterpret_cast<const uint32_t*>(rows[1] + col));
        q[kk][2] = __ldg(reinterpret_cast<const uint32_t*>(rows[0] + col + Traits::kMmaK / 2));
        q[kk][3] = __ldg(reinterpret_cast<const uint32_t*>(rows[1] + col + Traits::kMmaK / 2));
    }
}

}  // namespace wideattn::mma_bf16
