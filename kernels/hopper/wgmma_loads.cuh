// wgmma_loads.cuh - cp.async loads of the Hopper-tier kernel into the 128-byte-swizzled
// shared-memory layout wgmma reads: the block's Q tile and the K/V key tiles (paged, streamed
// by 16-key sub-tiles so a tile may span pages of 16 keys). Each warpgroup loads only its own
// half of the head dims.
// The operand layout and operand_offset are in wgmma_layout.h.
#pragma once

#include <cstdint>

#include "kernels/hopper/wgmma_layout.h"
#include "kernels/hopper/wgmma_traits.h"
#include "kernels/mma/mma_primitives.cuh"
#include "wideattn.h"

namespace wideattn::hopper {

// Loads (issues, does not commit) the warpgroup's half of the block's Q rows, elements of
// kElemBytes (bf16 or e4m3 codes). Row r is token r / 8, head r % 8 of the KV head's group; rows of
// tokens past the tile are zero-filled.
template <int32_t kElemBytes>
__device__ __forceinline__ void issue_q_rows(const wideattn_prefill_params& p, uint32_t q_shared, int64_t first_token,
                                             int32_t tile_len, int32_t kv_head, int32_t group, int32_t thread) {
    constexpr int32_t kVecsPerGroupRow = Wt::kHeadDim * kElemBytes / Wt::kVecBytes / Wt::kWarpGroups;
    constexpr int32_t kRowsPerPass = Wt::kWarpGroupThreads / kVecsPerGroupRow;
    static_assert(Wt::kWarpGroupThreads % kVecsPerGroupRow == 0, "whole rows per load pass");
    const int32_t vec = group * kVecsPerGroupRow + thread % kVecsPerGroupRow;
    const int32_t first_row = thread / kVecsPerGroupRow;
    const char* q_base = static_cast<const char*>(p.q) + vec * Wt::kVecBytes;
#pragma unroll
    for (int32_t i = 0; i < Wt::kRowsPerBlock / kRowsPerPass; ++i) {
        const int32_t row = first_row + i * kRowsPerPass;
        const int32_t token = row / Wt::kGroup;
        const int32_t head = kv_head * Wt::kGroup + row % Wt::kGroup;
        const int64_t element = (first_token + min(token, tile_len - 1)) * p.q_token_stride + head * p.q_head_stride;
        mma::cp_async_16(q_shared + operand_offset<Wt::kRowsPerBlock>(row, vec), q_base + element * kElemBytes,
                         token < tile_len ? Wt::kVecBytes : 0);
    }
}

// Page position of a stream of consecutive 32-key tiles: each tile is kSubTiles 16-key sub-tiles
// inside one page each (block_size is a multiple of 16), whose block-table entries are read one
// tile ahead so their latency hides behind a whole step; no division. Sub-tiles starting at or
// past kv_end read no entry (the table row may end there) and get page 0.
struct TilePages {
    int32_t key;                        // first key of the next sub-tile whose page is not read yet
    int32_t page_index;                 // its block_table index
    int32_t page_slot;                  // its first slot inside the page
    int32_t page[Wt::kSubTiles];        // pages of the next tile's sub-tiles
    int32_t page_slots[Wt::kSubTiles];  // and their first slots

    __device__ __forceinline__ void start(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end) {
        key = 0;
        page_index = 0;
        page_slot = 0;
        read_ahead(p, table_row, kv_end);
    }

    // First key of the tile whose pages are held.
    __device__ __forceinline__ int32_t tile_key0() const { return key - Wt::kTileKeys; }

    // Reads the pages of the next tile's sub-tiles and advances past it.
    __device__ __forceinline__ void read_ahead(const wideattn_prefill_params& p, const int32_t* table_row,
                                               int32_t kv_end) {
#pragma unroll
        for (int32_t sub = 0; sub < Wt::kSubTiles; ++sub) {
            page[sub] = key < kv_end ? __ldg(table_row + page_index) : 0;
            page_slots[sub] = page_slot;
            key += Wt::kPageKeys;
            page_slot += Wt::kPageKeys;
            if (page_slot == p.block_size) {
                page_slot = 0;
                ++page_index;
            }
        }
    }
};

// The K or V tiles one warpgroup loads: consecutive key tiles (TilePages), pointer and strides
// loop-carried. Keys >= kv_end are zero-filled.
struct KvTileStream {
    static constexpr int32_t kRowsPerPass = Wt::kWarpGroupThreads / Wt::kVecsPerGroupRow;
    static constexpr int32_t kPassesPerSubTile = Wt::kPageKeys / kRowsPerPass;
    static_assert(Wt::kPageKeys % kRowsPerPass == 0, "whole passes per sub-tile");
    static_assert(2 * kRowsPerPass == Wt::kAtomRows, "a thread's rows alternate between two swizzle phases");

    const char* head_base;   // cache + kv_head * head_stride + first_row * slot_stride + vec * 16 B
    int64_t block_stride;    // bytes between pages
    int64_t slot_stride;     // bytes between the keys of a page
    uint32_t shared_offset[2];  // operand_offset of the thread's rows with row % 8 < 4 and >= 4
    int32_t first_row;
    TilePages pages;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, bool is_value, int32_t kv_head,
                                         int32_t group, int32_t thread, const int32_t* table_row, int32_t kv_end) {
        const int32_t vec = group * Wt::kVecsPerGroupRow + thread % Wt::kVecsPerGroupRow;
        first_row = thread / Wt::kVecsPerGroupRow;
        slot_stride = (is_value ? p.v_slot_stride : p.k_slot_stride) * Wt::kElemBytes;
        block_stride = (is_value ? p.v_block_stride : p.k_block_stride) * Wt::kElemBytes;
        head_base = static_cast<const char*>(is_value ? p.v_cache : p.k_cache) +
                    kv_head * (is_value ? p.v_head_stride : p.k_head_stride) * Wt::kElemBytes +
                    first_row * slot_stride + vec * Wt::kVecBytes;
        shared_offset[0] = operand_offset<Wt::kTileKeys>(first_row, vec);
        shared_offset[1] = operand_offset<Wt::kTileKeys>(first_row + kRowsPerPass, vec);
        pages.start(p, table_row, kv_end);
    }

    // Issues (does not commit) the next key tile into `chunk` and reads the pages of the one after.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end,
                                          uint32_t chunk) {
        const int32_t tile_key0 = pages.tile_key0();
#pragma unroll
        for (int32_t sub = 0; sub < Wt::kSubTiles; ++sub) {
            const char* src = head_base + pages.page[sub] * block_stride + pages.page_slots[sub] * slot_stride;
            const int32_t rows_valid = kv_end - tile_key0 - sub * Wt::kPageKeys;
#pragma unroll
            for (int32_t i = 0; i < kPassesPerSubTile; ++i) {
                const int32_t row_in_sub = first_row + i * kRowsPerPass;
                // Rows past the phase's first row (shared_offset[i % 2] already holds that row).
                const int32_t rows_on = sub * Wt::kPageKeys + (i - i % 2) * kRowsPerPass;
                mma::cp_async_16(chunk + shared_offset[i % 2] + rows_on * Wt::kSwizzleBytes,
                                 src + i * kRowsPerPass * slot_stride,
                                 row_in_sub < rows_valid ? Wt::kVecBytes : 0);
            }
        }
        pages.read_ahead(p, table_row, kv_end);
    }
};

}  // namespace wideattn::hopper
