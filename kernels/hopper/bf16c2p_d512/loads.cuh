// loads.cuh - the shared-memory map and the loads of wgmma_bf16c2p_d512: where each region and
// mbarrier sits, the home row group's Q rows over every dim (cp.async by the home warpgroup), and
// the producer's rings: K tiles over every dim (two issuing threads, one per half of the dims, both
// arriving on the slot's full barrier) and V tiles over the CTA's dims (one thread), each copy a
// tile's 4 slabs by TMA as wgmma_bf16c2_d512's (KvHalfStream, kernels/hopper/bf16c2_d512/loads.cuh).
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/hopper/bf16c2_d512/loads.cuh"
#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "wideattn.h"

namespace wideattn::hopper::bf16c2p {

using bf16c2::use_parity;
using bf16c2::refill_waits;

// Shared-memory addresses of one CTA's regions (Traits::SmemPlan from the aligned base); the plan
// is the same in both CTAs, so a region's address maps to the partner's copy of it.
struct SharedMap {
    uint32_t q;
    uint32_t k_ring;
    uint32_t v_ring;
    uint32_t receive;   // the partner's P messages: [parity] { P [vec][thread], alpha [thread] }
    uint32_t state;     // the partner's final row statistics: [thread] { max_log2[2], sum[2] }
    uint32_t barriers;
};

template <class Traits>
__device__ __forceinline__ SharedMap shared_map(uint32_t base) {
    using Plan = typename Traits::SmemPlan;
    return SharedMap{base + Plan::kQ,       base + Plan::kKRing, base + Plan::kVRing,
                     base + Plan::kReceive, base + Plan::kState, base + Plan::kBarriers};
}

// The mbarriers, by index into the barrier region.
template <class Traits>
struct Barriers {
    static constexpr int32_t kFullK = 0;
    static constexpr int32_t kEmptyK = kFullK + Traits::kKSlots;
    static constexpr int32_t kFullV = kEmptyK + Traits::kKSlots;
    static constexpr int32_t kEmptyV = kFullV + Traits::kVSlots;
    static constexpr int32_t kReceived = kEmptyV + Traits::kVSlots;  // + parity: P message landed
    static constexpr int32_t kFreed = kReceived + Traits::kMessageParities;  // + parity: the partner read it
    static constexpr int32_t kState = kFreed + Traits::kMessageParities;    // the final row statistics landed
    static constexpr int32_t kCount = kState + 1;
    static_assert(kCount == Traits::kBarrierCount, "the plan holds every mbarrier");

    __device__ static __forceinline__ uint32_t offset(int32_t index) {
        return static_cast<uint32_t>(index * Traits::kBarrierBytes);
    }
    __device__ static __forceinline__ uint32_t full_k(const SharedMap& map, int32_t tile) {
        return map.barriers + offset(kFullK + tile % Traits::kKSlots);
    }
    __device__ static __forceinline__ uint32_t empty_k(const SharedMap& map, int32_t tile) {
        return map.barriers + offset(kEmptyK + tile % Traits::kKSlots);
    }
    __device__ static __forceinline__ uint32_t full_v(const SharedMap& map, int32_t tile) {
        return map.barriers + offset(kFullV + tile % Traits::kVSlots);
    }
    __device__ static __forceinline__ uint32_t empty_v(const SharedMap& map, int32_t tile) {
        return map.barriers + offset(kEmptyV + tile % Traits::kVSlots);
    }
};

template <class Traits>
__device__ __forceinline__ uint32_t k_tile(const SharedMap& map, int32_t tile) {
    return map.k_ring + (tile % Traits::kKSlots) * Traits::kKTileBytes;
}

template <class Traits>
__device__ __forceinline__ uint32_t v_tile(const SharedMap& map, int32_t tile) {
    return map.v_ring + (tile % Traits::kVSlots) * Traits::kVTileBytes;
}

// Issues (does not commit) the Q rows of row group `group` over every dim into `q` (the operand
// layout, kScoreSlabs slabs): row r is token kTileTokens * group + r / 8 of the cluster's tile,
// head r % 8 of the KV head's group; rows of tokens past the tile are zero-filled (their source
// row is clamped to the tile's last token, which exists, and not read). `thread`: 0 .. 127.
template <class Traits>
__device__ __forceinline__ void issue_q_rows(const wideattn_prefill_params& p, uint32_t q, int64_t first_token,
                                             int32_t tile_len, int32_t kv_head, int32_t group, int32_t thread) {
    constexpr int32_t kRowsPerPass = Traits::kWarpGroupThreads / Traits::kVecsPerQRow;
    const int32_t vec = thread % Traits::kVecsPerQRow;
    const int32_t first_row = thread / Traits::kVecsPerQRow;
    const char* q_base = static_cast<const char*>(p.q) + static_cast<int64_t>(vec) * Traits::kVecBytes;
#pragma unroll 1
    for (int32_t i = 0; i < Traits::kRowsPerBlock / kRowsPerPass; ++i) {
        const int32_t row = first_row + i * kRowsPerPass;
        const int32_t token = group * Traits::kTileTokens + row / Traits::kGroup;
        const int32_t head = kv_head * Traits::kGroup + row % Traits::kGroup;
        const int64_t element = (first_token + min(token, tile_len - 1)) * p.q_token_stride + head * p.q_head_stride;
        ptx::cp_async_16(q + operand_offset<Traits, Traits::kRowsPerBlock>(row, vec),
                         q_base + element * Traits::kElemBytes, token < tile_len ? Traits::kVecBytes : 0);
    }
}

// One producer thread's ring: every tile of the block's keys in order, each copy (4 slabs of the
// tile from dim `first_dim` on, kChunkBytes) into its slot at byte `slot_offset` once the slot's
// previous tile is released (the empty barrier: one arrival per warp that reads the ring), counted
// on the slot's full barrier (kK: K, whose full barrier has one arrival per K producer; else V).
template <class Traits, bool kK>
__device__ __forceinline__ void produce_ring(const wideattn_prefill_params& p, const BlockGeometry& g,
                                             const KvTensorMaps& maps, const SharedMap& map, int32_t first_dim,
                                             uint32_t slot_offset) {
    using B = Barriers<Traits>;
    constexpr int32_t kSlots = kK ? Traits::kKSlots : Traits::kVSlots;
    const int32_t* table_row = p.block_table + g.table_offset;
    bf16c2::KvHalfStream<Traits> stream;
    stream.init(p, kK ? &maps.k : &maps.v, g.kv_head, first_dim, table_row, g.kv_end);
    for (int32_t tile = 0; tile < g.num_tiles; ++tile) {
        if (refill_waits<kSlots>(tile))
            ptx::mbarrier_wait(kK ? B::empty_k(map, tile) : B::empty_v(map, tile), use_parity<kSlots>(tile - kSlots));
        stream.issue(p, table_row, g.kv_end, (kK ? k_tile<Traits>(map, tile) : v_tile<Traits>(map, tile)) + slot_offset,
                     kK ? B::full_k(map, tile) : B::full_v(map, tile));
    }
}

}  // namespace wideattn::hopper::bf16c2p
