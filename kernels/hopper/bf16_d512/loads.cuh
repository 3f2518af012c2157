// loads.cuh - the K/V loads of the Hopper-tier BF16 prefill kernel (wgmma_bf16_d512): each
// warpgroup's half of every K and V tile copied by TMA into the 128-byte-swizzled layout wgmma
// reads (the block's Q tile and the page walk are kernels/common/wgmma_loads.cuh), and the
// zeroing of the last V tile's rows past kv_end.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/common/wgmma_loads.cuh"
#include "wideattn.h"

namespace wideattn::hopper::bf16 {

// The K or V tiles of one warpgroup, copied by TMA (tensor map: kernels/common/kv_tensor_map.h);
// also the e4m3 K stream of wgmma_e4m3pv_d512 (fp8/hopper_e4m3pv_d512/loads.cuh: a box is 128
// bytes of 16 slots whatever the element size).
// A tile is kSubTiles x kSlabsPerGroup boxes (16 keys x one 64-dim slab of the warpgroup's half,
// landing in the operand layout with the 128-byte swizzle TMA applies); lane 0 of each of the
// warpgroup's kIssuers warps issues kBoxesPerIssuer of them and announces their bytes on the
// chunk's mbarrier (kIssuers arrivals per phase); the other threads only wait on that barrier.
// Sub-tiles starting at or past kv_end get block coordinate num_blocks: outside the tensor, they
// land as zeros without a read. Rows past kv_end inside a sub-tile hold whatever the page holds
// there (see zero_value_rows_from).
template <class Traits>
struct KvTmaStream {
    static constexpr int32_t kSubTileBytes = Traits::kPageKeys * Traits::kSwizzleBytes;
    static_assert(kKvBoxBytes == Traits::kSwizzleBytes && kKvBoxSlots == Traits::kPageKeys,
                  "a TMA box is one 16-key sub-tile of one 128-byte slab");
    static_assert(kKvBoxBytes * kKvBoxSlots * Traits::kSubTiles * Traits::kSlabsPerGroup == Traits::kGroupChunkBytes,
                  "the copies of one tile fill the warpgroup's half of a chunk");

    static constexpr int32_t kIssuers = Traits::kWarpGroupThreads / Traits::kWarpSize;
    static constexpr int32_t kBoxesPerIssuer = Traits::kSubTiles * Traits::kSlabsPerGroup / kIssuers;
    static_assert(Traits::kSubTiles * Traits::kSlabsPerGroup % kIssuers == 0, "every issuing warp copies whole boxes");

    const CUtensorMap* map;
    int32_t first_elem;  // the warpgroup's first head dim
    int32_t kv_head;
    TilePages<Traits> pages;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, const CUtensorMap* tensor_map,
                                         int32_t head, int32_t group, const int32_t* table_row, int32_t kv_end) {
        map = tensor_map;
        first_elem = group * Traits::kDimsPerGroup;
        kv_head = head;
        pages.start(p, table_row, kv_end);
    }

    // Issuing threads only (lane 0 of warp `warp` of the warpgroup): issues this warp's boxes of
    // the next key tile into `chunk`, completing on `barrier`, and reads the pages of the one after.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end,
                                          uint32_t chunk, uint32_t barrier, int32_t warp) {
        ptx::mbarrier_arrive_expect_bytes(barrier, Traits::kGroupChunkBytes / kIssuers);
        const int32_t tile_key0 = pages.tile_key0();
#pragma unroll
        for (int32_t i = 0; i < kBoxesPerIssuer; ++i) {
            const int32_t box = warp * kBoxesPerIssuer + i;
            const int32_t sub = box / Traits::kSlabsPerGroup;
            const int32_t slab = box % Traits::kSlabsPerGroup;
            int32_t page = pages.page[0], page_slot = pages.page_slots[0];  // selected, not indexed: no local memory
#pragma unroll
            for (int32_t other = 1; other < Traits::kSubTiles; ++other)
                if (sub == other) page = pages.page[other], page_slot = pages.page_slots[other];
            const int32_t block = tile_key0 + sub * Traits::kPageKeys < kv_end ? page : p.num_blocks;
            ptx::tma_load_4d(chunk + (first_elem / Traits::kSlabDims + slab) * Traits::kChunkSlabBytes +
                                 sub * kSubTileBytes,
                             map, first_elem + slab * Traits::kSlabDims, kv_head, page_slot, block, barrier);
        }
        pages.read_ahead(p, table_row, kv_end);
    }
};

// Zeroes rows [first_row, kTileKeys) of the warpgroup's half of a V chunk (generic-proxy stores:
// the caller fences them for wgmma). P is exactly 0 for keys past kv_end, but 0 times a NaN or
// infinity left in a page's unused slots would still poison O.
template <class Traits>
__device__ __forceinline__ void zero_value_rows_from(uint32_t chunk, int32_t first_row, int32_t group,
                                                     int32_t thread) {
    constexpr int32_t kRowsPerPass = Traits::kWarpGroupThreads / Traits::kVecsPerGroupRow;
    const int32_t vec = group * Traits::kVecsPerGroupRow + thread % Traits::kVecsPerGroupRow;
    for (int32_t row = first_row + thread / Traits::kVecsPerGroupRow; row < Traits::kTileKeys; row += kRowsPerPass)
        ptx::store_shared_f32x4(chunk + operand_offset<Traits, Traits::kTileKeys>(row, vec), 0.0f, 0.0f, 0.0f, 0.0f);
}

}  // namespace wideattn::hopper::bf16
