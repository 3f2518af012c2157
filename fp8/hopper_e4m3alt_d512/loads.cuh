// loads.cuh - the K/V streams of the Hopper-tier 8-bit kernel with alternating key tiles
// (wgmma_e4m3alt_d512). K: each warpgroup copies the whole width of its own tiles (g, g + 2, ...)
// by TMA with the bf16 kernel's stream (KvTmaStream over the full-width traits view: 4 slabs x 2
// sub-tiles = 8 boxes of 128 codes x 16 slots), its page walk stepping over the partner's tiles.
// V: every tile, each warpgroup copying its half of the dims from the transposed cache with
// wgmma_e4m3pv_d512's stream, into the shared V ring both warpgroups' P V products read.
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3alt_d512/traits.h"
#include "fp8/hopper_e4m3pv_d512/loads.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/hopper/bf16_d512/loads.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3alt {

// Shared-memory addresses of one block's regions (Traits::SmemPlan from the aligned base).
struct SharedMap {
    uint32_t q;
    uint32_t key_ring;
    uint32_t value_ring;
    uint32_t probs;
    uint32_t maxima;
    uint32_t sums;
    uint32_t barriers;
};

template <class Traits>
__device__ __forceinline__ SharedMap shared_map(uint32_t base) {
    using Plan = typename Traits::SmemPlan;
    return SharedMap{base + Plan::kQ,      base + Plan::kKeyRing, base + Plan::kValueRing, base + Plan::kProbs,
                     base + Plan::kMaxima, base + Plan::kSums,    base + Plan::kBarriers};
}

// The K chunk of warpgroup `group`'s tile of round `round`, and its mbarrier (phase round / kKeySlots).
template <class Traits>
__device__ __forceinline__ uint32_t key_chunk(const SharedMap& map, int32_t round, int32_t group) {
    return map.key_ring + ((round % Traits::kKeySlots) * Traits::kWarpGroups + group) * Traits::kChunkBytes;
}
template <class Traits>
__device__ __forceinline__ uint32_t key_barrier(const SharedMap& map, int32_t round, int32_t group) {
    return map.barriers + ((round % Traits::kKeySlots) * Traits::kWarpGroups + group) * Traits::kBarrierBytes;
}
template <class Traits>
__device__ __forceinline__ uint32_t key_phase(int32_t round) {
    return static_cast<uint32_t>(round / Traits::kKeySlots) & 1u;
}

// The V chunk of key tile `tile` (both warpgroups' halves), and the mbarrier warpgroup `group`'s
// copies of its half complete on (phase tile / kValueSlots).
template <class Traits>
__device__ __forceinline__ uint32_t value_chunk(const SharedMap& map, int32_t tile) {
    return map.value_ring + (tile % Traits::kValueSlots) * Traits::kChunkBytes;
}
template <class Traits>
__device__ __forceinline__ uint32_t value_barrier(const SharedMap& map, int32_t tile, int32_t group) {
    return map.barriers + Traits::SmemPlan::kKeyBarriersBytes +
           ((tile % Traits::kValueSlots) * Traits::kWarpGroups + group) * Traits::kBarrierBytes;
}
template <class Traits>
__device__ __forceinline__ uint32_t value_phase(int32_t tile) {
    return static_cast<uint32_t>(tile / Traits::kValueSlots) & 1u;
}

// Lane 0 of each warp issues a quarter of every chunk's copies.
__device__ __forceinline__ bool issues_copies(const GroupPlace& at) { return at.lane == 0; }

template <class Traits>
struct Streams {
    bf16::KvTmaStream<FullWidthKeyView<Traits>> k;  // own tiles, whole width
    e4m3pv::ValueTmaStream<Traits> v;                  // every tile, own half of the dims

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, const KvTensorMaps& maps, int32_t kv_head,
                                         int32_t group, const int32_t* table_row, int32_t kv_end) {
        k.init(p, &maps.k, kv_head, 0, table_row, kv_end);
        if (group == 1) k.pages.read_ahead(p, table_row, kv_end);  // warpgroup 1 starts at tile 1
        v.init(p, &maps.v, kv_head, group, table_row, kv_end);
    }
};

// This thread's share of the copies of warpgroup at.group's K tile of round `round` (tile
// 2 round + group), issued; the page walk then steps over the partner's next tile.
template <class Traits>
__device__ __forceinline__ void issue_own_keys(Streams<Traits>& streams, const wideattn_prefill_params& p,
                                               const BlockGeometry& g, const SharedMap& map, int32_t round,
                                               const GroupPlace& at) {
    const int32_t* table_row = p.block_table + g.table_offset;
    streams.k.issue(p, table_row, g.kv_end, key_chunk<Traits>(map, round, at.group),
                    key_barrier<Traits>(map, round, at.group), at.row_tile);
    streams.k.pages.read_ahead(p, table_row, g.kv_end);
}

// This thread's share of the copies of the warpgroup's half of V tile `tile` (tiles in order).
template <class Traits>
__device__ __forceinline__ void issue_values(Streams<Traits>& streams, const wideattn_prefill_params& p,
                                             const BlockGeometry& g, const SharedMap& map, int32_t tile,
                                             const GroupPlace& at) {
    streams.v.issue(p, p.block_table + g.table_offset, g.kv_end, value_chunk<Traits>(map, tile),
                    value_barrier<Traits>(map, tile, at.group), at.group, at.row_tile);
}

}  // namespace wideattn::hopper::e4m3alt
