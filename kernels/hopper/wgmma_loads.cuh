// wgmma_loads.cuh - loads of the Hopper-tier kernels into the 128-byte-swizzled shared-memory
// layout wgmma reads: the block's Q tile (cp.async), the page walk of the key tiles (16-key
// sub-tiles, so a tile may span pages of 16 keys) and the bf16 kernel's K/V tiles (TMA). Each
// warpgroup loads only its own half of the head dims.
// The operand layout and operand_offset are in wgmma_layout.h.
#pragma once

#include <cstdint>

#include "kernels/common/kv_tensor_map.h"
#include "kernels/hopper/wgmma_layout.h"
#include "kernels/hopper/wgmma_tma.cuh"
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

// The K or V tiles of one warpgroup, copied by TMA (tensor map: kernels/common/kv_tensor_map.h).
// A tile is kSubTiles x kSlabsPerGroup boxes (16 keys x one 64-dim slab of the warpgroup's half,
// landing in the operand layout with the 128-byte swizzle TMA applies); lane 0 of each of the
// warpgroup's kIssuers warps issues kBoxesPerIssuer of them and announces their bytes on the
// chunk's mbarrier (kIssuers arrivals per phase); the other threads only wait on that barrier.
// Sub-tiles starting at or past kv_end get block coordinate num_blocks: outside the tensor, they
// land as zeros without a read. Rows past kv_end inside a sub-tile hold whatever the page holds
// there (see zero_value_rows_from).
struct KvTmaStream {
    static constexpr int32_t kSubTileBytes = Wt::kPageKeys * Wt::kSwizzleBytes;
    static constexpr int32_t kChunkSlabBytes = Wt::kTileKeys * Wt::kSwizzleBytes;
    static_assert(kKvBoxBytes == Wt::kSwizzleBytes && kKvBoxSlots == Wt::kPageKeys,
                  "a TMA box is one 16-key sub-tile of one 128-byte slab");
    static_assert(kKvBoxBytes * kKvBoxSlots * Wt::kSubTiles * Wt::kSlabsPerGroup == Wt::kGroupChunkBytes,
                  "the copies of one tile fill the warpgroup's half of a chunk");

    static constexpr int32_t kIssuers = Wt::kWarpGroupThreads / Wt::kWarpSize;
    static constexpr int32_t kBoxesPerIssuer = Wt::kSubTiles * Wt::kSlabsPerGroup / kIssuers;
    static_assert(Wt::kSubTiles * Wt::kSlabsPerGroup % kIssuers == 0, "every issuing warp copies whole boxes");

    const CUtensorMap* map;
    int32_t first_elem;  // the warpgroup's first head dim
    int32_t kv_head;
    TilePages pages;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, const CUtensorMap* tensor_map,
                                         int32_t head, int32_t group, const int32_t* table_row, int32_t kv_end) {
        map = tensor_map;
        first_elem = group * Wt::kDimsPerGroup;
        kv_head = head;
        pages.start(p, table_row, kv_end);
    }

    // Issuing threads only (lane 0 of warp `warp` of the warpgroup): issues this warp's boxes of
    // the next key tile into `chunk`, completing on `barrier`, and reads the pages of the one after.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end,
                                          uint32_t chunk, uint32_t barrier, int32_t warp) {
        mbarrier_arrive_expect_bytes(barrier, Wt::kGroupChunkBytes / kIssuers);
        const int32_t tile_key0 = pages.tile_key0();
#pragma unroll
        for (int32_t i = 0; i < kBoxesPerIssuer; ++i) {
            const int32_t box = warp * kBoxesPerIssuer + i;
            const int32_t sub = box / Wt::kSlabsPerGroup;
            const int32_t slab = box % Wt::kSlabsPerGroup;
            int32_t page = pages.page[0], page_slot = pages.page_slots[0];  // selected, not indexed: no local memory
#pragma unroll
            for (int32_t other = 1; other < Wt::kSubTiles; ++other)
                if (sub == other) page = pages.page[other], page_slot = pages.page_slots[other];
            const int32_t block = tile_key0 + sub * Wt::kPageKeys < kv_end ? page : p.num_blocks;
            tma_load_4d(chunk + (first_elem / Wt::kSlabDims + slab) * kChunkSlabBytes + sub * kSubTileBytes, map,
                        first_elem + slab * Wt::kSlabDims, kv_head, page_slot, block, barrier);
        }
        pages.read_ahead(p, table_row, kv_end);
    }
};

// Zeroes rows [first_row, kTileKeys) of the warpgroup's half of a V chunk (generic-proxy stores:
// the caller fences them for wgmma). P is exactly 0 for keys past kv_end, but 0 times a NaN or
// infinity left in a page's unused slots would still poison O.
__device__ __forceinline__ void zero_value_rows_from(uint32_t chunk, int32_t first_row, int32_t group,
                                                     int32_t thread) {
    constexpr int32_t kRowsPerPass = Wt::kWarpGroupThreads / Wt::kVecsPerGroupRow;
    const int32_t vec = group * Wt::kVecsPerGroupRow + thread % Wt::kVecsPerGroupRow;
    for (int32_t row = first_row + thread / Wt::kVecsPerGroupRow; row < Wt::kTileKeys; row += kRowsPerPass)
        mma::store_shared_f32x4(chunk + operand_offset<Wt::kTileKeys>(row, vec), 0.0f, 0.0f, 0.0f, 0.0f);
}

}  // namespace wideattn::hopper
