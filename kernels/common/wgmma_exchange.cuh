// wgmma_exchange.cuh - the partial-score exchange of the Hopper-tier kernels and the causal mask
// of a score tile: each warpgroup holds the partial Q K^T scores of all 64 rows over its half of
// the dims; it stores them into the exchange buffer of the step's parity and adds the other
// warpgroup's, so both end with bitwise identical scores. Either as one rendezvous of both
// warpgroups (exchange_scores) or as a one-way hand-off in two halves (post_scores, then
// collect_scores), so independent work can run between them. `Traits` is a kernel's traits (a
// WgmmaD512BlockTraits).
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/wgmma_block.cuh"

namespace wideattn::hopper {

// This thread's partial scores into the exchange buffer of `parity` (the wgmma accumulator `s`
// is only read: ptxas serializes wgmma when accumulator registers are redefined while another
// wgmma is in flight).
template <class Traits>
__device__ __forceinline__ void store_partial_scores(uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                     const float (&s)[Traits::kKeyNTiles][4]) {
    constexpr int32_t kQuadBytes = Traits::kWarpGroupThreads * Traits::kVecBytes;
    const uint32_t own = exchange + (parity * Traits::kWarpGroups + at.group) * Traits::kExchangeTileBytes +
                         at.thread * Traits::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
        ptx::store_shared_f32x4(own + n * kQuadBytes, s[n][0], s[n][1], s[n][2], s[n][3]);
}

// Own + partner partial scores (bitwise identical in both warpgroups: the same two addends)
// times `scale` (the softmax scale in log2 units, times any dequantisation scales; kUnitScale
// when softmax_step applies it), into `scores`; the partner's are in the buffer of `parity`.
template <class Traits>
__device__ __forceinline__ void add_partner_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                   const float (&s)[Traits::kKeyNTiles][4],
                                                   float (&scores)[Traits::kKeyNTiles][4]) {
    constexpr int32_t kQuadBytes = Traits::kWarpGroupThreads * Traits::kVecBytes;
    const uint32_t other = exchange + (parity * Traits::kWarpGroups + (1 - at.group)) * Traits::kExchangeTileBytes +
                           at.thread * Traits::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n) {
        const float4 partner = ptx::load_shared_f32x4(other + n * kQuadBytes);
        scores[n][0] = (s[n][0] + partner.x) * scale;
        scores[n][1] = (s[n][1] + partner.y) * scale;
        scores[n][2] = (s[n][2] + partner.z) * scale;
        scores[n][3] = (s[n][3] + partner.w) * scale;
    }
}

// The exchange as one rendezvous of both warpgroups (the 8-bit kernel's steps and both kernels'
// first tile).
template <class Traits>
__device__ __forceinline__ void exchange_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                const float (&s)[Traits::kKeyNTiles][4],
                                                float (&scores)[Traits::kKeyNTiles][4]) {
    store_partial_scores<Traits>(exchange, parity, at, s);
    ptx::named_barrier_sync(kExchangeBarrier, Traits::kThreads);
    add_partner_scores<Traits>(scale, exchange, parity, at, s, scores);
}

// The bf16 kernel's exchange in two halves, so independent work can run between them:
// post_scores stores the warpgroup's partial scores and signals them (bar.arrive, no wait) on the
// barrier of its own warpgroup and the exchange parity; collect_scores waits on the partner's
// barrier of that parity (bar.sync: the partner's 128 arrivals and this warpgroup's 128 syncs)
// and adds the partner's scores. One barrier per parity, because a warpgroup may post the next
// tile's scores before its partner has collected this tile's (it only needs the partner's post);
// posting twice on one barrier could complete a phase with no consumer. A warpgroup posts on the
// same barrier again (two tiles later) only after collecting the tile in between, which the
// partner posted after its own sync on this barrier had completed. The buffer of a parity is
// reused on the same condition, so the partner has read it by then.
template <class Traits>
__device__ __forceinline__ void post_scores(uint32_t exchange, int32_t parity, const GroupPlace& at,
                                            const float (&s)[Traits::kKeyNTiles][4]) {
    store_partial_scores<Traits>(exchange, parity, at, s);
    ptx::named_barrier_arrive(posted_scores_barrier<Traits>(at.group, parity), Traits::kThreads);
}

template <class Traits>
__device__ __forceinline__ void collect_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                               const float (&s)[Traits::kKeyNTiles][4],
                                               float (&scores)[Traits::kKeyNTiles][4]) {
    ptx::named_barrier_sync(posted_scores_barrier<Traits>(1 - at.group, parity), Traits::kThreads);
    add_partner_scores<Traits>(scale, exchange, parity, at, s, scores);
}

// Bottom-right causal mask and the kv_end limit for key tile `tile`.
template <class Traits>
__device__ __forceinline__ void mask_scores(const BlockGeometry& g, int32_t tile, int32_t lane,
                                            float (&s)[Traits::kKeyNTiles][4]) {
    mask_tile_scores<Traits::kTileKeys, Traits::kAccumN>(g, tile, lane, s);
}

}  // namespace wideattn::hopper
