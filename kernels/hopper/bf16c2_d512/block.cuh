// block.cuh - one CTA of the two-CTA Hopper-tier BF16 prefill kernel (kernel.cu): the cluster's
// work item (16 tokens x the 8 query heads of one KV head, in the head-slowest order; its split's
// keys under split-KV), the mbarriers, the roles (two consumer warpgroups with the rows of tokens
// 0-7 and 8-15, one producer warpgroup), the key loop (mainloop.cuh: free-running, or in turns
// when Traits::kOrderedTurns) and the output of the CTA's dims (kernels/common/epilogue.cuh); the
// kernel entries' body.
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_cluster.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/hopper/bf16c2_d512/exchange.cuh"
#include "kernels/hopper/bf16c2_d512/loads.cuh"
#include "kernels/hopper/bf16c2_d512/mainloop.cuh"
#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn::hopper::bf16c2 {

// Thread 0: every mbarrier of the CTA initialised, and the received-scores barriers armed for the
// first two tiles of each row group (exchange.cuh), made visible to the cluster (the partner
// CTA's st.async completes on them) before the cluster barrier that follows.
template <class Traits>
__device__ __forceinline__ void init_barriers(const SharedMap& map, int32_t num_tiles) {
    using B = Barriers<Traits>;
    for (int32_t slot = 0; slot < Traits::kKSlots; ++slot) {
        ptx::mbarrier_init(B::full_k(map, slot), 1);
        ptx::mbarrier_init(B::empty_k(map, slot), Traits::kConsumerWarps);
    }
    for (int32_t slot = 0; slot < Traits::kVSlots; ++slot) {
        ptx::mbarrier_init(B::full_v(map, slot), 1);
        ptx::mbarrier_init(B::empty_v(map, slot), Traits::kConsumerWarps);
    }
    for (int32_t group = 0; group < Traits::kRowGroups; ++group)
        for (int32_t parity = 0; parity < Traits::kExchangeParities; ++parity) {
            ptx::mbarrier_init(B::received(map, group, parity), 1);
            if (armed_at_start<Traits::kExchangeParities>(parity, num_tiles)) arm_receive<Traits>(map, group, parity);
        }
    ptx::fence_mbarrier_init();
}

// One CTA; kSplit: the split-KV instantiation (the key range of split blockIdx.z, partials out).
template <class Traits, bool kSplit>
__device__ __forceinline__ void cluster_block(const wideattn_prefill_params& p, const KvTensorMaps& maps,
                                              unsigned char* smem) {
    constexpr uint32_t kFullMask = 0xffffffffu;
    const uint32_t rank = ptx::cluster_cta_rank();
    // Both CTAs of a cluster take the same work item, so both return here or neither does.
    const BlockWork work = find_cta_pair_work_by_head(p, Traits::kClusterTileTokens);
    if (!work.tile.found) return;
    const SharedMap map = shared_map<Traits>(aligned_shared_base<Traits>(smem));
    const int32_t first_dim = static_cast<int32_t>(rank) * Traits::kDimsPerGroup;
    BlockGeometry tile_keys;  // the keys of the whole tile (kv_end, num_tiles: the same for every row)
    block_geometry<Traits>(p, work, 0, &tile_keys);
    if constexpr (kSplit) restrict_to_split<Traits>(p, &tile_keys);
    if (threadIdx.x == 0) init_barriers<Traits>(map, tile_keys.num_tiles);
    ptx::converge_warp();
    ptx::cluster_sync();

    const int32_t warpgroup =
        __shfl_sync(kFullMask, static_cast<int32_t>(threadIdx.x / Traits::kWarpGroupThreads), 0);
    if (warpgroup == Traits::kRowGroups) {
        ptx::lower_registers<Traits::kProducerRegisters>();
        // The K ring from the first warp's first thread, the V ring from the second warp's.
        if (threadIdx.x == Traits::kConsumerThreads)
            produce_ring<Traits, false>(p, tile_keys, maps, map, first_dim);
        else if (threadIdx.x == Traits::kConsumerThreads + Traits::kWarpSize)
            produce_ring<Traits, true>(p, tile_keys, maps, map, first_dim);
        ptx::converge_warp();
    } else {
        ptx::raise_registers<Traits::kConsumerRegisters>();
        const GroupPlace at = group_place<Traits>();
        BlockGeometry geometry;
        block_geometry<Traits>(p, work, at.group * Traits::kRowTilesPerGroup + at.row_tile, &geometry);
        if constexpr (kSplit) restrict_to_split<Traits>(p, &geometry);
        const Consumer c{at, static_cast<int32_t>(threadIdx.x), map.q + at.group * Traits::kQGroupBytes,
                         partner_map(map, rank ^ 1u)};
        const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
        issue_q_rows<Traits>(p, c.q, first_token, work.tile.tile_len, work.kv_head, at.group, first_dim, at.thread);
        ptx::cp_async_commit();

        float o[Traits::kDimNTiles][4];
        zero_output(o);
        RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
        if constexpr (Traits::kOrderedTurns)
            consumer_mainloop_ordered<Traits>(p, geometry, c, map, o, state);
        else
            consumer_mainloop<Traits>(p, geometry, c, map, o, state);
        // The row group's tokens: from kTileTokens x group on, none where the tile is shorter.
        const int32_t group_tokens = at.group * Traits::kTileTokens;
        const int64_t group_first_token = first_token + group_tokens;
        const int32_t group_len = work.tile.tile_len - group_tokens;
        const int32_t head = work.kv_head * Traits::kGroup + at.lane / 4;
        if constexpr (kSplit)
            write_partials<Traits>(p, o, state, group_first_token, group_len, at.row_tile, head,
                                   static_cast<int32_t>(rank), at.lane);
        else
            write_output<Traits>(p, o, state, group_first_token, group_len, at.row_tile, head,
                                 static_cast<int32_t>(rank), at.lane);
    }
    // Neither CTA leaves while the other may still store scores into it or wait on its barriers.
    ptx::converge_warp();
    ptx::cluster_sync();
}

// A kernel entry's body: unsplit, or split-KV (kSplit: grid.z = key splits).
template <class Traits, bool kSplit>
__device__ __forceinline__ void cluster_entry(const wideattn_prefill_params& p, const KvTensorMaps& maps) {
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    ptx::prefetch_kv_tensor_maps(maps);
    cluster_block<Traits, kSplit>(p, maps, smem);
}

}  // namespace wideattn::hopper::bf16c2
