// wgmma_block.cuh - where a thread sits in a Hopper-tier prefill block and the block-level
// plumbing both Hopper kernels share: the warpgroup place, the block's start (its work item, the
// thread's place and the keys it visits), the 1024-byte aligned shared-memory base their plans
// are offsets from, the named-barrier ids, a warp's release of an mbarrier ring slot, and the "my
// loads have landed" rendezvous of a warpgroup. `Traits` is a kernel's traits (a
// WgmmaD512BlockTraits).
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/ptx_cluster.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block_traits.h"

namespace wideattn::hopper {

// Where a thread sits: warpgroup = half of the dims, warp inside it = 16 accumulator rows
// (2 tokens), lane / 4 = the query head of its two rows.
struct GroupPlace {
    int32_t group;
    int32_t thread;     // index inside the warpgroup
    int32_t row_tile;   // warp inside the warpgroup
    int32_t lane;
};

// The thread's place. The warpgroup index is broadcast from lane 0: the compiler then treats it
// (and every shared-memory descriptor derived from it) as warp-uniform and keeps descriptors in
// uniform registers.
template <class Traits>
__device__ __forceinline__ GroupPlace group_place() {
    constexpr uint32_t kFullMask = 0xffffffffu;
    GroupPlace at;
    at.group = __shfl_sync(kFullMask, static_cast<int32_t>(threadIdx.x / Traits::kWarpGroupThreads), 0);
    at.thread = threadIdx.x % Traits::kWarpGroupThreads;
    at.row_tile = at.thread / Traits::kWarpSize;
    at.lane = threadIdx.x % Traits::kWarpSize;
    return at;
}

// A block's start: its work item in the head-slowest order (find_block_work_by_head), the
// thread's place and the keys the thread's rows visit (block_geometry at the place's row tile; its
// split's under split-KV); false for a block past the last token tile, which has nothing to do and
// returns before taking its place.
template <class Traits, bool kSplit>
__device__ __forceinline__ bool wgmma_block_start(const wideattn_prefill_params& p, BlockWork* work, GroupPlace* at,
                                                  BlockGeometry* geometry) {
    *work = find_block_work_by_head(p, Traits::kTileTokens);
    if (!work->tile.found) return false;
    *at = group_place<Traits>();
    block_geometry<Traits>(p, *work, at->row_tile, geometry);
    if constexpr (kSplit) restrict_to_split<Traits>(p, geometry);
    return true;
}

// The dynamic shared memory's base rounded up to kSmemAlign (swizzle atoms need 1024 bytes): the
// origin of the kernel's SmemPlan offsets.
template <class Traits>
__device__ __forceinline__ uint32_t aligned_shared_base(const void* smem) {
    return (ptx::shared_address(smem) + Traits::kSmemAlign - 1) & ~static_cast<uint32_t>(Traits::kSmemAlign - 1);
}

// Named barrier ids of the Hopper kernels (0 is __syncthreads).
constexpr int32_t kExchangeBarrier = 1;   // both warpgroups
constexpr int32_t kGroupBarrierBase = 2;  // + warpgroup: ring barriers set up, Q landed, ring slots free
constexpr int32_t kBlockLoadsBarrier = 4; // both warpgroups (the 8-bit kernel): fp16 V written, score products issued
constexpr int32_t kPostedScoresBase = 5;  // + parity x kWarpGroups + warpgroup (the bf16 kernel): partial scores posted
constexpr int32_t kHardwareBarriers = 16;
static_assert(kPostedScoresBase + WgmmaD512BlockTraits::kExchangeParities * WgmmaD512BlockTraits::kWarpGroups <=
                  kHardwareBarriers,
              "the posted-scores barriers fit in the 16 hardware barriers");

// The barrier on which warpgroup `group` signals its partial scores of exchange parity `parity`.
template <class Traits>
__device__ __forceinline__ uint32_t posted_scores_barrier(int32_t group, int32_t parity) {
    return kPostedScoresBase + parity * Traits::kWarpGroups + group;
}

// A warp's release of a ring slot (the two-CTA kernels' mbarrier rings) whose tile its warpgroup's wgmmas have finished reading (after
// the wgmma wait that covers them): one arrival of the slot's empty barrier from lane 0.
__device__ __forceinline__ void release_slot(uint32_t empty, const GroupPlace& at) {
    if (at.lane == 0) ptx::mbarrier_arrive(empty);
    ptx::converge_warp();
}

// Waits for this thread's groups older than the newest kPending, publishes them to the async
// proxy and meets the rest of the warpgroup: the warpgroup's chunks are then readable by wgmma.
template <class Traits, int kPending>
__device__ __forceinline__ void group_loads_landed(int32_t group) {
    ptx::cp_async_wait<kPending>();
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kGroupBarrierBase + group, Traits::kWarpGroupThreads);
}

}  // namespace wideattn::hopper
