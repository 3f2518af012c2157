// loads.cuh - the shared-memory plan and the loads of the two-CTA Hopper-tier BF16 kernel
// (wgmma_bf16c2_d512): where each region and mbarrier sits, a row group's Q rows over the CTA's
// dims (cp.async), the producer's K and V tiles of the CTA's dims (TMA, one issuing thread a ring,
// the K and V rings each with a full and an empty mbarrier per slot), and the zeroing of the last
// V tile's rows past kv_end.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/ptx_cluster.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/common/wgmma_loads.cuh"
#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "wideattn.h"

namespace wideattn::hopper::bf16c2 {

// Shared-memory addresses of one CTA's regions (Traits::SmemPlan from the aligned base). The plan
// is the same in both CTAs of the cluster, so a region's address maps to the partner's copy of it.
struct SharedMap {
    uint32_t q;
    uint32_t k_ring;
    uint32_t v_ring;
    uint32_t receive;   // the partner's partial scores: [row group][parity] fp32 64 x 32 tiles
    uint32_t barriers;  // full K, empty K, full V, empty V (a slot each), then received [group][parity]
};

template <class Traits>
__device__ __forceinline__ SharedMap shared_map(uint32_t base) {
    using Plan = typename Traits::SmemPlan;
    return SharedMap{base + Plan::kQ, base + Plan::kKRing, base + Plan::kVRing, base + Plan::kReceive,
                     base + Plan::kBarriers};
}

// The mbarriers, by index into the barrier region.
template <class Traits>
struct Barriers {
    static constexpr int32_t kFullK = 0;
    static constexpr int32_t kEmptyK = kFullK + Traits::kKSlots;
    static constexpr int32_t kFullV = kEmptyK + Traits::kKSlots;
    static constexpr int32_t kEmptyV = kFullV + Traits::kVSlots;
    static constexpr int32_t kReceived = kEmptyV + Traits::kVSlots;
    static constexpr int32_t kCount = kReceived + Traits::kRowGroups * Traits::kExchangeParities;
    static_assert(kCount == Traits::kBarrierCount, "the plan holds every mbarrier");

    __device__ static __forceinline__ uint32_t at(const SharedMap& map, int32_t index) {
        return map.barriers + index * Traits::kBarrierBytes;
    }
    __device__ static __forceinline__ uint32_t full_k(const SharedMap& map, int32_t tile) {
        return at(map, kFullK + tile % Traits::kKSlots);
    }
    __device__ static __forceinline__ uint32_t empty_k(const SharedMap& map, int32_t tile) {
        return at(map, kEmptyK + tile % Traits::kKSlots);
    }
    __device__ static __forceinline__ uint32_t full_v(const SharedMap& map, int32_t tile) {
        return at(map, kFullV + tile % Traits::kVSlots);
    }
    __device__ static __forceinline__ uint32_t empty_v(const SharedMap& map, int32_t tile) {
        return at(map, kEmptyV + tile % Traits::kVSlots);
    }
    // The received-scores barrier of (row group, parity), as an offset into the barrier region (the
    // partner's region too: the plan is the same in both CTAs) and as a local address.
    __device__ static __forceinline__ uint32_t received_offset(int32_t group, int32_t parity) {
        return (kReceived + group * Traits::kExchangeParities + parity) * Traits::kBarrierBytes;
    }
    __device__ static __forceinline__ uint32_t received(const SharedMap& map, int32_t group, int32_t parity) {
        return map.barriers + received_offset(group, parity);
    }
};

template <class Traits>
__device__ __forceinline__ uint32_t k_chunk(const SharedMap& map, int32_t tile) {
    return map.k_ring + (tile % Traits::kKSlots) * Traits::kChunkBytes;
}

template <class Traits>
__device__ __forceinline__ uint32_t v_chunk(const SharedMap& map, int32_t tile) {
    return map.v_ring + (tile % Traits::kVSlots) * Traits::kChunkBytes;
}

// Issues (does not commit) the Q rows of row group `group` over the CTA's dims [first_dim,
// first_dim + kDimsPerGroup): row r is token kTileTokens * group + r / 8 of the cluster's tile, head
// r % 8 of the KV head's group; rows of tokens past the tile are zero-filled (their source row is
// clamped to the tile's last token, which exists, and not read).
template <class Traits>
__device__ __forceinline__ void issue_q_rows(const wideattn_prefill_params& p, uint32_t q_group, int64_t first_token,
                                             int32_t tile_len, int32_t kv_head, int32_t group, int32_t first_dim,
                                             int32_t thread) {
    constexpr int32_t kRowsPerPass = Traits::kWarpGroupThreads / Traits::kVecsPerGroupRow;
    const int32_t vec = thread % Traits::kVecsPerGroupRow;
    const int32_t first_row = thread / Traits::kVecsPerGroupRow;
    const char* q_base =
        static_cast<const char*>(p.q) + (static_cast<int64_t>(first_dim) + vec * Traits::kVecElems) * Traits::kElemBytes;
#pragma unroll
    for (int32_t i = 0; i < Traits::kRowsPerBlock / kRowsPerPass; ++i) {
        const int32_t row = first_row + i * kRowsPerPass;
        const int32_t token = group * Traits::kTileTokens + row / Traits::kGroup;
        const int32_t head = kv_head * Traits::kGroup + row % Traits::kGroup;
        const int64_t element = (first_token + min(token, tile_len - 1)) * p.q_token_stride + head * p.q_head_stride;
        ptx::cp_async_16(q_group + operand_offset<Traits, Traits::kRowsPerBlock>(row, vec),
                         q_base + element * Traits::kElemBytes, token < tile_len ? Traits::kVecBytes : 0);
    }
}

// The CTA's dims of a stream of K or V tiles, copied by TMA (tensor map:
// kernels/common/kv_tensor_map.h) by the producer's one issuing thread: a tile is kSubTiles x
// kSlabsPerGroup boxes (16 keys x one 64-dim slab), landing in the operand layout with the
// 128-byte swizzle. Sub-tiles starting at or past kv_end get block coordinate num_blocks: outside
// the tensor, they land as zeros without a read; rows past kv_end inside a sub-tile hold the page's
// contents (zero_value_rows_from).
template <class Traits>
struct KvHalfStream {
    static constexpr int32_t kSubTileBytes = Traits::kPageKeys * Traits::kSwizzleBytes;
    static_assert(kKvBoxBytes == Traits::kSwizzleBytes && kKvBoxSlots == Traits::kPageKeys,
                  "a TMA box is one 16-key sub-tile of one 128-byte slab");
    static_assert(kKvBoxBytes * kKvBoxSlots * Traits::kSubTiles * Traits::kSlabsPerGroup == Traits::kChunkBytes,
                  "the copies of one tile fill a ring slot");

    const CUtensorMap* map;
    int32_t first_elem;  // the CTA's first head dim
    int32_t kv_head;
    TilePages<Traits> pages;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, const CUtensorMap* tensor_map,
                                         int32_t head, int32_t first_dim, const int32_t* table_row, int32_t kv_end) {
        map = tensor_map;
        first_elem = first_dim;
        kv_head = head;
        pages.start(p, table_row, kv_end);
    }

    // Announces the tile's bytes on `full`, issues its boxes into `chunk` and reads the pages of
    // the tile after it.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end,
                                          uint32_t chunk, uint32_t full) {
        ptx::mbarrier_arrive_expect_bytes(full, Traits::kChunkBytes);
        const int32_t tile_key0 = pages.tile_key0();
#pragma unroll
        for (int32_t sub = 0; sub < Traits::kSubTiles; ++sub) {
            const int32_t block = tile_key0 + sub * Traits::kPageKeys < kv_end ? pages.page[sub] : p.num_blocks;
#pragma unroll
            for (int32_t slab = 0; slab < Traits::kSlabsPerGroup; ++slab)
                ptx::tma_load_4d(chunk + slab * Traits::kChunkSlabBytes + sub * kSubTileBytes, map,
                                 first_elem + slab * Traits::kSlabDims, kv_head, pages.page_slots[sub], block, full);
        }
        pages.read_ahead(p, table_row, kv_end);
    }
};

// Tile `tile` of one ring (K, or V with kValues) copied from `stream` into its slot, once both row
// groups have released the slot's previous tile (its empty barrier: one arrival per consumer warp).
template <class Traits, bool kValues>
__device__ __forceinline__ void fill_slot(const wideattn_prefill_params& p, const BlockGeometry& g,
                                          const SharedMap& map, const int32_t* table_row,
                                          KvHalfStream<Traits>& stream, int32_t tile) {
    using B = Barriers<Traits>;
    constexpr int32_t kSlots = kValues ? Traits::kVSlots : Traits::kKSlots;
    if (refill_waits<kSlots>(tile))
        ptx::mbarrier_wait(kValues ? B::empty_v(map, tile) : B::empty_k(map, tile), use_parity<kSlots>(tile - kSlots));
    stream.issue(p, table_row, g.kv_end, kValues ? v_chunk<Traits>(map, tile) : k_chunk<Traits>(map, tile),
                 kValues ? B::full_v(map, tile) : B::full_k(map, tile));
}

// One of the producer's two threads: every tile of one ring (K, or V with kValues) of the block's
// keys in order (schedule.h, for_each_ring_load), each by fill_slot.
template <class Traits, bool kValues>
__device__ __forceinline__ void produce_ring(const wideattn_prefill_params& p, const BlockGeometry& g,
                                             const KvTensorMaps& maps, const SharedMap& map, int32_t first_dim) {
    const int32_t* table_row = p.block_table + g.table_offset;
    KvHalfStream<Traits> stream;
    stream.init(p, kValues ? &maps.v : &maps.k, g.kv_head, first_dim, table_row, g.kv_end);
    for_each_ring_load(g.num_tiles,
                       [&](int32_t tile) { fill_slot<Traits, kValues>(p, g, map, table_row, stream, tile); });
}

// Zeroes rows [first_row, kTileKeys) of a V tile of the CTA's dims, shared by all consumer threads
// (generic-proxy stores: the caller fences them for wgmma and meets the other row group). P is 0
// for keys past kv_end, but 0 times a NaN or infinity left in a page's unused slots is not.
template <class Traits>
__device__ __forceinline__ void zero_value_rows_from(uint32_t chunk, int32_t first_row, int32_t consumer_thread) {
    constexpr int32_t kRowsPerPass = Traits::kConsumerThreads / Traits::kVecsPerGroupRow;
    const int32_t vec = consumer_thread % Traits::kVecsPerGroupRow;
    for (int32_t row = first_row + consumer_thread / Traits::kVecsPerGroupRow; row < Traits::kTileKeys;
         row += kRowsPerPass)
        ptx::store_shared_f32x4(chunk + operand_offset<Traits, Traits::kTileKeys>(row, vec), 0.0f, 0.0f, 0.0f, 0.0f);
}

}  // namespace wideattn::hopper::bf16c2
