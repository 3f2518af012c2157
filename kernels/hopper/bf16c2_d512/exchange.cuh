// exchange.cuh - the partial-score exchange of the two-CTA Hopper-tier BF16 kernel
// (wgmma_bf16c2_d512) between the warpgroups of one row group in the two CTAs of a cluster: each
// holds the Q K^T partial scores of its 64 rows over its CTA's half of the dims, stores them into
// the partner CTA's receive buffer of the tile's parity with st.async (completing on the partner's
// received barrier of that group and parity), and adds the partner's, so both end with bitwise
// identical scores (the same two addends, each scaled by the softmax scale before it is sent). The
// product and the sum are __fmul_rn / __fadd_rn: a plain `s * scale + partner` may be contracted
// into one fma, which adds the unrounded product here while the partner adds the rounded one it
// received, so the two CTAs' scores (and the free and ordered forms) would part by an ulp.
//
// Per (row group, parity) the receiving warpgroup arms its barrier for one tile's bytes
// (kScoreTileBytes) per phase: both parities at the start, and parity p again for tile j + 2 right
// after it has collected tile j. Tile j of a parity is phase j / 2 of its barrier. The sender
// writes tile j + 2 into the buffer of tile j only after collecting tile j + 1 from the receiver,
// which posts tile j + 1 only after it has collected (read) tile j: the buffer is free by then,
// and the barrier's phase of tile j has completed before any byte of tile j + 2 arrives.
#pragma once

#include <cstdint>

#include "kernels/common/ptx_cluster.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/hopper/bf16c2_d512/loads.cuh"
#include "kernels/hopper/bf16c2_d512/schedule.h"

namespace wideattn::hopper::bf16c2 {

// The partner CTA's copies of the receive region and of the barrier region (shared::cluster
// addresses).
struct PartnerMap {
    uint32_t receive;
    uint32_t barriers;
};

__device__ __forceinline__ PartnerMap partner_map(const SharedMap& map, uint32_t partner_rank) {
    return PartnerMap{ptx::map_shared_rank(map.receive, partner_rank), ptx::map_shared_rank(map.barriers, partner_rank)};
}

template <class Traits>
__device__ __forceinline__ uint32_t score_tile_offset(int32_t group, int32_t parity) {
    return static_cast<uint32_t>((group * Traits::kExchangeParities + parity) * Traits::kScoreTileBytes);
}

// Bytes between a thread's consecutive 8-column quads in a score tile: the tile is stored quad by
// quad, each quad as the warpgroup's 128 threads' 16 bytes in thread order.
template <class Traits>
constexpr uint32_t kQuadBytes = Traits::kWarpGroupThreads * Traits::kVecBytes;

// Arms the received barrier of (group, parity) for one score tile (one thread of the receiving
// warpgroup, once per phase).
template <class Traits>
__device__ __forceinline__ void arm_receive(const SharedMap& map, int32_t group, int32_t parity) {
    ptx::mbarrier_arrive_expect_bytes(Barriers<Traits>::received(map, group, parity), Traits::kScoreTileBytes);
}

// This thread's partial scores of tile `tile` times `scale` (the softmax scale in log2 units) into
// `mine` and into the partner CTA's buffer. The stores read `mine`, not the wgmma accumulator `s`:
// a store into another CTA's shared memory may read its registers after it issues, which would
// keep the next score product (into `s`) from starting (ptxas serialises the wgmmas, C7514).
template <class Traits>
__device__ __forceinline__ void post_scores(const PartnerMap& partner, int32_t tile, const GroupPlace& at, float scale,
                                            const float (&s)[Traits::kKeyNTiles][4],
                                            float (&mine)[Traits::kKeyNTiles][4]) {
    const int32_t parity = exchange_parity<Traits::kExchangeParities>(tile);
    const uint32_t remote =
        partner.receive + score_tile_offset<Traits>(at.group, parity) + at.thread * Traits::kVecBytes;
    const uint32_t barrier = partner.barriers + Barriers<Traits>::received_offset(at.group, parity);
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n) {
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) mine[n][e] = __fmul_rn(s[n][e], scale);
        ptx::st_async_f32x4(remote + n * kQuadBytes<Traits>, mine[n][0], mine[n][1], mine[n][2], mine[n][3], barrier);
    }
}

// Waits for the partner's scaled partial scores of tile `tile`, then mine + partner's into
// `scores` (both CTAs add the same two rounded values: bitwise the same sums); re-arms the barrier
// for tile + 2 when that tile exists (`rearm`: schedule.h, rearm_after).
template <class Traits>
__device__ __forceinline__ void collect_scores(const SharedMap& map, int32_t tile, bool rearm, const GroupPlace& at,
                                               const float (&mine)[Traits::kKeyNTiles][4],
                                               float (&scores)[Traits::kKeyNTiles][4]) {
    const int32_t parity = exchange_parity<Traits::kExchangeParities>(tile);
    ptx::mbarrier_wait_cluster(Barriers<Traits>::received(map, at.group, parity),
                               exchange_phase<Traits::kExchangeParities>(tile));
    if (rearm && at.thread == 0) arm_receive<Traits>(map, at.group, parity);
    ptx::converge_warp();
    const uint32_t own = map.receive + score_tile_offset<Traits>(at.group, parity) + at.thread * Traits::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n) {
        const float4 partner = ptx::load_shared_f32x4(own + n * kQuadBytes<Traits>);
        scores[n][0] = __fadd_rn(mine[n][0], partner.x);
        scores[n][1] = __fadd_rn(mine[n][1], partner.y);
        scores[n][2] = __fadd_rn(mine[n][2], partner.z);
        scores[n][3] = __fadd_rn(mine[n][3], partner.w);
    }
}

}  // namespace wideattn::hopper::bf16c2
