// wgmma_loads.cuh - loads shared by the Hopper-tier kernels into the 128-byte-swizzled
// shared-memory layout wgmma reads (wgmma_layout.h): the block's Q tile (cp.async; bf16 or e4m3
// codes) and the page walk of the key tiles (16-key sub-tiles, so a tile may span pages of 16
// keys). Each warpgroup loads only its own half of the head dims. The K/V tile loads are each
// kernel's own (TMA in the bf16 kernel, cp.async of codes in the 8-bit one).
#pragma once

#include <cstdint>

#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/wgmma_layout.h"
#include "wideattn.h"

namespace wideattn::hopper {

// Loads (issues, does not commit) the warpgroup's half of the block's Q rows, elements of
// kElemBytes (bf16 or e4m3 codes). Row r is token r / 8, head r % 8 of the KV head's group; rows of
// tokens past the tile are zero-filled.
template <class Traits, int32_t kElemBytes>
__device__ __forceinline__ void issue_q_rows(const wideattn_prefill_params& p, uint32_t q_shared, int64_t first_token,
                                             int32_t tile_len, int32_t kv_head, int32_t group, int32_t thread) {
    constexpr int32_t kVecsPerGroupRow = Traits::kHeadDim * kElemBytes / Traits::kVecBytes / Traits::kWarpGroups;
    constexpr int32_t kRowsPerPass = Traits::kWarpGroupThreads / kVecsPerGroupRow;
    static_assert(Traits::kWarpGroupThreads % kVecsPerGroupRow == 0, "whole rows per load pass");
    const int32_t vec = group * kVecsPerGroupRow + thread % kVecsPerGroupRow;
    const int32_t first_row = thread / kVecsPerGroupRow;
    const char* q_base = static_cast<const char*>(p.q) + vec * Traits::kVecBytes;
#pragma unroll
    for (int32_t i = 0; i < Traits::kRowsPerBlock / kRowsPerPass; ++i) {
        const int32_t row = first_row + i * kRowsPerPass;
        const int32_t token = row / Traits::kGroup;
        const int32_t head = kv_head * Traits::kGroup + row % Traits::kGroup;
        const int64_t element = (first_token + min(token, tile_len - 1)) * p.q_token_stride + head * p.q_head_stride;
        ptx::cp_async_16(q_shared + operand_offset<Traits, Traits::kRowsPerBlock>(row, vec),
                         q_base + element * kElemBytes, token < tile_len ? Traits::kVecBytes : 0);
    }
}

// Page position of a stream of consecutive 32-key tiles: each tile is kSubTiles 16-key sub-tiles
// inside one page each (block_size is a multiple of 16), whose block-table entries are read one
// tile ahead so their latency hides behind a whole step; no division. Sub-tiles starting at or
// past kv_end read no entry (the table row may end there) and get page 0.
template <class Traits>
struct TilePages {
    int32_t key;                            // first key of the next sub-tile whose page is not read yet
    int32_t page_index;                     // its block_table index
    int32_t page_slot;                      // its first slot inside the page
    int32_t page[Traits::kSubTiles];        // pages of the next tile's sub-tiles
    int32_t page_slots[Traits::kSubTiles];  // and their first slots

    __device__ __forceinline__ void start(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end) {
        key = 0;
        page_index = 0;
        page_slot = 0;
        read_ahead(p, table_row, kv_end);
    }

    // First key of the tile whose pages are held.
    __device__ __forceinline__ int32_t tile_key0() const { return key - Traits::kTileKeys; }

    // Reads the pages of the next tile's sub-tiles and advances past it.
    __device__ __forceinline__ void read_ahead(const wideattn_prefill_params& p, const int32_t* table_row,
                                               int32_t kv_end) {
#pragma unroll
        for (int32_t sub = 0; sub < Traits::kSubTiles; ++sub) {
            page[sub] = key < kv_end ? __ldg(table_row + page_index) : 0;
            page_slots[sub] = page_slot;
            key += Traits::kPageKeys;
            page_slot += Traits::kPageKeys;
            if (page_slot == p.block_size) {
                page_slot = 0;
                ++page_index;
            }
        }
    }
};

}  // namespace wideattn::hopper
