// block.cuh - one CTA of wgmma_bf16c2p_d512 (kernel.cu): the cluster's work item (16 tokens x the
// 8 query heads of one KV head, in the head-slowest order; its split's keys under split-KV), the
// mbarriers, the roles (the home warpgroup with the scores and softmax of row group `rank`, the fed
// warpgroup with O of the other row group, the producer warpgroup), the key loops (mainloop.cuh)
// and the output of the CTA's dims for both row groups (kernels/common/epilogue.cuh); the kernel
// entries' body.
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
#include "kernels/hopper/bf16c2p_d512/exchange.cuh"
#include "kernels/hopper/bf16c2p_d512/loads.cuh"
#include "kernels/hopper/bf16c2p_d512/mainloop.cuh"
#include "kernels/hopper/bf16c2p_d512/traits.h"

namespace wideattn::hopper::bf16c2p {

// Thread 0: every mbarrier of the CTA initialised, the received and freed barriers armed for the
// first two tiles and the state barrier for the final row statistics, made visible to the cluster (the
// partner's st.async and arrivals complete on them) before the cluster barrier that follows.
template <class Traits>
__device__ __forceinline__ void init_barriers(const SharedMap& map, int32_t num_tiles) {
    using B = Barriers<Traits>;
    for (int32_t slot = 0; slot < Traits::kKSlots; ++slot) {
        ptx::mbarrier_init(B::full_k(map, slot), Traits::kKProducers);
        ptx::mbarrier_init(B::empty_k(map, slot), Traits::kGroupWarps);  // the home warpgroup reads K
    }
    for (int32_t slot = 0; slot < Traits::kVSlots; ++slot) {
        ptx::mbarrier_init(B::full_v(map, slot), 1);
        ptx::mbarrier_init(B::empty_v(map, slot), Traits::kConsumerWarps);  // both consumer warpgroups read V
    }
    for (int32_t parity = 0; parity < Traits::kMessageParities; ++parity) {
        ptx::mbarrier_init(map.barriers + B::offset(B::kReceived + parity), 1);
        ptx::mbarrier_init(map.barriers + B::offset(B::kFreed + parity), 1);
        if (armed_at_start<Traits::kMessageParities>(parity, num_tiles)) {
            arm_receive<Traits>(map, parity);
            arm_freed<Traits>(map, parity);
        }
    }
    ptx::mbarrier_init(map.barriers + B::offset(B::kState), 1);
    arm_state<Traits>(map);
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
    // The split's keys, computed once for the tile's geometry and the consumers' (kv_end is the same
    // for every row; computed again per warpgroup, the split entry spilled with split_ranges=even).
    SplitRange split{0, 0};
    if constexpr (kSplit) {
        split = block_split_range<Traits>(p, tile_keys.kv_end);
        restrict_to_range<Traits>(p, split, &tile_keys);
    }
    if (threadIdx.x == 0) init_barriers<Traits>(map, tile_keys.num_tiles);
    ptx::converge_warp();
    ptx::cluster_sync();

    const int32_t warpgroup =
        __shfl_sync(kFullMask, static_cast<int32_t>(threadIdx.x / Traits::kWarpGroupThreads), 0);
    if (warpgroup == Traits::kConsumerGroups) {
        ptx::lower_registers<Traits::kProducerRegisters>();
        // K dims 0-255 from the first warp's first thread, 256-511 from the second's, V from the third's.
        const int32_t producer = static_cast<int32_t>(threadIdx.x) - Traits::kConsumerThreads;
        if (producer == 0 || producer == Traits::kWarpSize) {
            const int32_t half = producer / Traits::kWarpSize;
            produce_ring<Traits, true>(p, tile_keys, maps, map, half * Traits::kDimsPerGroup,
                                       static_cast<uint32_t>(half * Traits::kChunkBytes));
        } else if (producer == 2 * Traits::kWarpSize) {
            produce_ring<Traits, false>(p, tile_keys, maps, map, first_dim, 0);
        }
        ptx::converge_warp();
    } else {
        ptx::raise_registers<Traits::kConsumerRegisters>();
        const GroupPlace at = group_place<Traits>();
        // The row group of this warpgroup: the home warpgroup's is the CTA's rank, the fed one's the other.
        const int32_t row_group = at.group == Traits::kHomeGroup ? static_cast<int32_t>(rank)
                                                                 : static_cast<int32_t>(rank ^ 1u);
        BlockGeometry geometry;
        block_geometry<Traits>(p, work, row_group * Traits::kRowTilesPerGroup + at.row_tile, &geometry);
        if constexpr (kSplit) restrict_to_range<Traits>(p, split, &geometry);
        const Consumer<Traits> c{at, static_cast<int32_t>(threadIdx.x), partner_map<Traits>(map, rank ^ 1u)};

        float o[Traits::kDimNTiles][4];
        zero_output(o);
        RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
        if (at.group == Traits::kHomeGroup) {
            issue_q_rows<Traits>(p, map.q, static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin,
                                 work.tile.tile_len, work.kv_head, row_group, at.thread);
            ptx::cp_async_commit();
            home_mainloop<Traits>(p, geometry, c, map, o, state);
            post_state<Traits>(c.partner, at.thread, state);
        } else {
            fed_mainloop<Traits>(geometry, c, map, o);
            state = receive_state<Traits>(map, at.thread);
        }
        // The work item found again rather than kept in registers across the key loops (kept, the
        // split entry spilled at the consumers' register budget).
        const BlockWork out = find_cta_pair_work_by_head(p, Traits::kClusterTileTokens);
        // The row group's tokens: from kTileTokens x row_group on, none where the tile is shorter.
        const int32_t group_tokens = row_group * Traits::kTileTokens;
        const int64_t group_first_token = static_cast<int64_t>(out.tile.q_begin) + out.tile.tile_begin + group_tokens;
        const int32_t group_len = out.tile.tile_len - group_tokens;
        const int32_t head = out.kv_head * Traits::kGroup + at.lane / 4;
        if constexpr (kSplit)
            write_partials<Traits>(p, o, state, group_first_token, group_len, at.row_tile, head,
                                   static_cast<int32_t>(rank), at.lane);
        else
            write_output<Traits>(p, o, state, group_first_token, group_len, at.row_tile, head,
                                 static_cast<int32_t>(rank), at.lane);
    }
    // Neither CTA leaves while the other may still store into it, arrive on or wait on its barriers.
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

}  // namespace wideattn::hopper::bf16c2p
