// loads.cuh - the K/V loads of the Hopper-tier FP8 P V kernel (wgmma_e4m3pv_d512); its e4m3 Q
// tile and the page walk are kernels/common/wgmma_loads.cuh. K codes come by TMA in the
// 128-byte-swizzled [key][dim] operand layout, with the bf16 kernel's stream (KvTmaStream: a box
// is 128 bytes of 16 slots, whatever the element size). V codes come by TMA from the transposed
// cache (kernels/common/v_transposed.h) as [16-key sub-tile][dim][16 bytes] without swizzle: the
// K-major core matrices of the P V's B operand, the keys of each 16-slot group already in the
// order of the P fragment. Also the zeroing of the last tile's keys past kv_end in V.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/v_transposed.h"
#include "kernels/common/wgmma_loads.cuh"
#include "kernels/hopper/bf16_d512/loads.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3pv {

// K codes: the bf16 kernel's TMA stream over the e4m3 map (boxes of 128 codes x 16 slots).
template <class Traits>
using KeyTmaStream = bf16::KvTmaStream<Traits>;

// The transposed V codes of one warpgroup's dims, copied by TMA (kVtMapDim* tensor of
// kernels/common/kv_tensor_map.h). A tile is kSubTiles x kVtBoxesPerSubTile boxes (16 slot
// positions x kVtBoxDims dims); lane 0 of each of the warpgroup's kIssuers warps issues
// kBoxesPerIssuer of them and announces their bytes on the chunk's mbarrier (kIssuers arrivals
// per phase). Sub-tiles starting at or past kv_end get block coordinate num_blocks: outside the
// tensor, they land as zeros without a read (see zero_value_keys_from for the keys past kv_end
// inside a sub-tile).
template <class Traits>
struct ValueTmaStream {
    static constexpr int32_t kIssuers = Traits::kWarpGroupThreads / Traits::kWarpSize;
    static constexpr int32_t kBoxes = Traits::kSubTiles * Traits::kVtBoxesPerSubTile;
    static constexpr int32_t kBoxesPerIssuer = kBoxes / kIssuers;
    static_assert(kBoxes % kIssuers == 0, "every issuing warp copies whole boxes");
    static_assert(kBoxesPerIssuer * Traits::kVtBoxBytes * kIssuers == Traits::kGroupChunkBytes,
                  "the copies of one tile fill the warpgroup's half of a chunk");

    const CUtensorMap* map;
    int32_t first_dim;  // the warpgroup's first head dim
    int32_t kv_head;
    TilePages<Traits> pages;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, const CUtensorMap* tensor_map,
                                         int32_t head, int32_t group, const int32_t* table_row, int32_t kv_end) {
        map = tensor_map;
        first_dim = group * Traits::kDimsPerGroup;
        kv_head = head;
        pages.start(p, table_row, kv_end);
    }

    // Issuing threads only (lane 0 of warp `warp` of the warpgroup): issues this warp's boxes of
    // the next key tile into `chunk`, completing on `barrier`, and reads the pages of the one after.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end,
                                          uint32_t chunk, uint32_t barrier, int32_t group, int32_t warp) {
        ptx::mbarrier_arrive_expect_bytes(barrier, Traits::kGroupChunkBytes / kIssuers);
        const int32_t tile_key0 = pages.tile_key0();
        const uint32_t group_chunk = chunk + group * Traits::kGroupChunkBytes;
#pragma unroll
        for (int32_t i = 0; i < kBoxesPerIssuer; ++i) {
            const int32_t box = warp * kBoxesPerIssuer + i;
            const int32_t sub = box / Traits::kVtBoxesPerSubTile;
            const int32_t part = box % Traits::kVtBoxesPerSubTile;
            int32_t page = pages.page[0], page_slot = pages.page_slots[0];  // selected, not indexed: no local memory
#pragma unroll
            for (int32_t other = 1; other < Traits::kSubTiles; ++other)
                if (sub == other) page = pages.page[other], page_slot = pages.page_slots[other];
            const int32_t block = tile_key0 + sub * Traits::kPageKeys < kv_end ? page : p.num_blocks;
            const uint32_t destination = group_chunk + sub * Traits::kVtSubTileBytes + part * Traits::kVtBoxBytes;
            if (v_row_boxes(p.block_size, p.head_dim)) {  // a page is one group, its dims in rows of 8
                ptx::tma_load_4d(destination, map, 0, (first_dim + part * kVtBoxDims) / kVtRowDims, kv_head, block,
                                 barrier);
                continue;
            }
            // A 16-slot group starts at its own position (v_slot_position permutes inside groups).
            ptx::tma_load_4d(destination, map, page_slot, first_dim + part * kVtBoxDims, kv_head, block, barrier);
        }
        pages.read_ahead(p, table_row, kv_end);
    }
};

// Zeroes, in the warpgroup's half of a V chunk, the keys [first_key, kTileKeys) of the sub-tile
// holding first_key (the later sub-tile, if any, landed as zeros): in each dim row of 16 bytes the
// positions whose slot is at or past first_key (generic-proxy stores: the caller fences them for
// wgmma). P is exactly 0 for keys past kv_end, but 0 times a NaN code left in a page's unused
// slots would still poison O.
template <class Traits>
__device__ __forceinline__ void zero_value_keys_from(uint32_t chunk, int32_t first_key, int32_t group,
                                                     int32_t thread) {
    constexpr int32_t kWords = Traits::kVecBytes / 4;
    constexpr int32_t kBitsPerByte = 8;
    constexpr uint32_t kByteMask = 0xffu;
    const int32_t sub = first_key / Traits::kPageKeys;
    const int32_t first_slot = first_key % Traits::kPageKeys;
    uint32_t keep[kWords];
#pragma unroll
    for (int32_t w = 0; w < kWords; ++w) {
        keep[w] = 0;
#pragma unroll
        for (int32_t b = 0; b < 4; ++b)
            if (v_position_slot(4 * w + b) < first_slot) keep[w] |= kByteMask << (kBitsPerByte * b);
    }
    const uint32_t sub_tile = chunk + group * Traits::kGroupChunkBytes + sub * Traits::kVtSubTileBytes;
    for (int32_t dim = thread; dim < Traits::kDimsPerGroup; dim += Traits::kWarpGroupThreads) {
        const uint32_t row = sub_tile + dim * Traits::kVecBytes;
        uint32_t w0, w1, w2, w3;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(w0), "=r"(w1), "=r"(w2), "=r"(w3)
                     : "r"(row)
                     : "memory");
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(row), "r"(w0 & keep[0]), "r"(w1 & keep[1]),
                     "r"(w2 & keep[2]), "r"(w3 & keep[3])
                     : "memory");
    }
}

}  // namespace wideattn::hopper::e4m3pv
