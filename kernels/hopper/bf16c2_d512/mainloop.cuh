// mainloop.cuh - the key loop of one consumer warpgroup (one row group of 64 rows) of the two-CTA
// Hopper-tier BF16 kernel: per 32-key step S = Q K^T over the CTA's 256 dims (16 wgmma m64n32k16
// from shared memory), the exchange of partial scores with the same row group in the partner CTA
// (exchange.cuh), the online softmax (exp2, O rescaled at every growth of a row maximum) and
// O += P V (2 wgmma m64n256k16, P from registers).
//
// The software pipeline is wgmma_bf16_d512's (kernels/hopper/bf16_d512/mainloop.cuh): step j enters
// with P_j in registers and Q K_j+1^T in flight; it waits for Q K_j+1^T, issues P_j V_j, posts its
// partial S_j+1 (scaled) to the partner CTA, collects the partner's, runs the softmax of S_j+1 into the other
// P register set and issues Q K_j+2^T right behind P_j V_j; O is rescaled after P_j V_j completes,
// with Q K_j+2^T in flight (every wgmma wait is reached by all four warps of the warpgroup at the
// same instruction). What differs: the two row groups of a CTA read the same K and V tiles, which
// the producer warpgroup copies (loads.cuh); a warp releases a tile (one arrival on the slot's empty
// barrier) once the wgmma that read it has completed, and the producer refills the slot when both
// row groups' warps have. The row groups run their steps independently, so one's softmax and
// exchange overlap the other's products.
//
// The ordered form (Traits::kOrderedTurns, kernel wgmma_bf16c2pp_d512) is the published ping-pong:
// step j issues Q K_j+1^T and P_j V_j back to back in the row group's turn (schedule.h: row group
// 0's step j, row group 1's step j, row group 0's step j + 1, ...), then, outside the turn, waits
// for Q K_j+1^T, exchanges and runs the softmax of S_j+1 while its P_j V_j and the other row
// group's products run, waits for P_j V_j and rescales O. No Q K^T is issued a step ahead.
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_exchange.cuh"
#include "kernels/common/wgmma_products.cuh"
#include "kernels/common/wgmma_softmax.cuh"
#include "kernels/hopper/bf16c2_d512/exchange.cuh"
#include "kernels/hopper/bf16c2_d512/loads.cuh"
#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "wideattn.h"

namespace wideattn::hopper::bf16c2 {

// Named barrier ids of this kernel (0 is __syncthreads): kConsumersBarrier for both consumer
// warpgroups (the last tile's zeroed V rows), and kGroupBarrierBase + row group
// (wgmma_block.cuh's group_loads_landed: the row group's Q rows landed).
constexpr int32_t kConsumersBarrier = 1;
static_assert(kConsumersBarrier < kGroupBarrierBase, "the barrier ids differ");
// The ordered form's turns: row group r waits for its turn on kTurnBarrierBase + r (schedule.h),
// after the two row groups' Q barriers.
constexpr int32_t kTurnRowGroups = 2;
constexpr int32_t kTurnBarrierBase = kGroupBarrierBase + kTurnRowGroups;
static_assert(kTurnBarrierBase + kTurnRowGroups <= kHardwareBarriers, "the turn barriers fit in the 16 hardware barriers");

// What a consumer warpgroup works on: its place, its Q rows, the partner CTA's regions.
struct Consumer {
    GroupPlace at;        // group = row group
    int32_t thread;       // index over both consumer warpgroups
    uint32_t q;           // the row group's Q rows (the CTA's dims)
    PartnerMap partner;
};

// The operand slabs of a CTA start at its own dims: the shared products read slab 0 onwards.
constexpr int32_t kLocalSlabs = 0;

template <class Traits>
__device__ __forceinline__ void issue_scores(const Consumer& c, uint32_t k_tile, float (&s)[Traits::kKeyNTiles][4]) {
    issue_scores_over<Traits, Traits::kSlabsPerGroup, false>(c.q, k_tile, kLocalSlabs, s);
}

template <class Traits>
__device__ __forceinline__ void issue_pv(float (&o)[Traits::kDimNTiles][4],
                                         const uint32_t (&prob)[Traits::kPvSteps][4], uint32_t v_tile) {
    issue_pv_as<Traits, false>(o, prob, v_tile, kLocalSlabs);
}

// The last tile j: its V rows past kv_end must not carry a page's unused slots into P V. Both row
// groups read this V tile, so both zero a share and meet before either P V.
template <class Traits>
__device__ __forceinline__ void zero_last_value_rows(const BlockGeometry& g, const Consumer& c, const SharedMap& map,
                                                     int32_t j) {
    const int32_t rows_valid = g.kv_end - j * Traits::kTileKeys;
    if (rows_valid < Traits::kTileKeys) {
        zero_value_rows_from<Traits>(v_chunk<Traits>(map, j), rows_valid, c.thread);
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync(kConsumersBarrier, Traits::kConsumerThreads);
    }
}

// Tile `tile`'s scores from this row group's partial `s` (its Q K^T completed): posted scaled to the
// partner CTA, the partner's collected and added, masked, and the online softmax into `prob`;
// true when O must be rescaled by alpha.
template <class Traits>
__device__ __forceinline__ bool exchange_and_softmax(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                     const Consumer& c, const SharedMap& map, int32_t tile,
                                                     const float (&s)[Traits::kKeyNTiles][4], RowState& state,
                                                     uint32_t (&prob)[Traits::kPvSteps][4], float (&alpha)[2]) {
    float mine[Traits::kKeyNTiles][4];
    post_scores<Traits>(c.partner, tile, c.at, p.softmax_scale * kLog2e, s, mine);
    float scores[Traits::kKeyNTiles][4];
    collect_scores<Traits>(map, tile, rearm_after<Traits::kExchangeParities>(tile, g.num_tiles), c.at, mine, scores);
    mask_scores<Traits>(g, tile, c.at.lane, scores);
    return softmax_step<Traits>(scores, kUnitScale, state, prob, alpha);
}

// The first tile of both loops: the row group's Q landed, Q K_0^T, its exchange and the softmax
// into carry.prob[0] (O is still 0: no rescale).
template <class Traits>
__device__ __forceinline__ void first_tile(const wideattn_prefill_params& p, const BlockGeometry& g,
                                           const Consumer& c, const SharedMap& map, LoopCarry<Traits>& carry,
                                           RowState& state) {
    using B = Barriers<Traits>;
    group_loads_landed<Traits, 0>(c.at.group);  // Q (cp.async)
    ptx::mbarrier_wait(B::full_k(map, 0), use_parity<Traits::kKSlots>(0));
    issue_scores<Traits>(c, k_chunk<Traits>(map, 0), carry.s);
    ptx::wgmma_wait<0>();
    ptx::pin_all(carry.s);
    release_slot(B::empty_k(map, 0), c.at);
    float alpha[2];
    exchange_and_softmax<Traits>(p, g, c, map, 0, carry.s, state, carry.prob[0], alpha);
}

// Step j's end after the wait for its P V: O and P_j kept in place up to the wait, V_j's slot
// released, O rescaled for the next tile's row maxima when they grew.
template <class Traits>
__device__ __forceinline__ void end_step(const Consumer& c, const SharedMap& map, float (&o)[Traits::kDimNTiles][4],
                                         uint32_t (&prob)[Traits::kPvSteps][4], int32_t j, bool rescale,
                                         const float (&alpha)[2]) {
    ptx::pin_all(o);
    ptx::pin_all(prob);
    release_slot(Barriers<Traits>::empty_v(map, j), c.at);
    if (rescale) rescale_output(o, alpha);
}

// The last step's end: its P V waited for, its V slot released.
template <class Traits>
__device__ __forceinline__ void finish_last_step(const Consumer& c, const SharedMap& map,
                                                 float (&o)[Traits::kDimNTiles][4], int32_t j) {
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    release_slot(Barriers<Traits>::empty_v(map, j), c.at);
}

// Step j. kHasNext: tile j+1 exists (its scores are in flight); kIssueNext: tile j+2 exists.
template <class Traits, bool kHasNext, bool kIssueNext>
__device__ __forceinline__ void pipelined_step(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const Consumer& c, const SharedMap& map,
                                               float (&o)[Traits::kDimNTiles][4], RowState& state,
                                               LoopCarry<Traits>& carry, int32_t j,
                                               uint32_t (&prob)[Traits::kPvSteps][4],
                                               uint32_t (&prob_next)[Traits::kPvSteps][4]) {
    using B = Barriers<Traits>;
    // V_j and K_j+2: probed before the wait for the score product, waited for after it.
    const bool v_landed = ptx::mbarrier_test(B::full_v(map, j), use_parity<Traits::kVSlots>(j));
    const bool k_landed =
        !kIssueNext || ptx::mbarrier_test(B::full_k(map, j + 2), use_parity<Traits::kKSlots>(j + 2));
    ptx::wgmma_wait<0>();  // Q K_j+1^T done
    ptx::pin_all(carry.s);
    if (kHasNext) release_slot(B::empty_k(map, j + 1), c.at);
    if (!v_landed) ptx::mbarrier_wait(B::full_v(map, j), use_parity<Traits::kVSlots>(j));
    if (!k_landed) ptx::mbarrier_wait(B::full_k(map, j + 2), use_parity<Traits::kKSlots>(j + 2));
    if (!kHasNext) zero_last_value_rows<Traits>(g, c, map, j);
    issue_pv<Traits>(o, prob, v_chunk<Traits>(map, j));
    if (kHasNext) {
        float alpha[2];
        const bool rescale = exchange_and_softmax<Traits>(p, g, c, map, j + 1, carry.s, state, prob_next, alpha);
        if (kIssueNext) {
            issue_scores<Traits>(c, k_chunk<Traits>(map, j + 2), carry.s);  // K_j+2 landed (top of the step)
            ptx::wgmma_wait<1>();  // P_j V_j done; Q K_j+2^T may still run
        } else {
            ptx::wgmma_wait<0>();
        }
        end_step<Traits>(c, map, o, prob, j, rescale, alpha);
    } else {
        finish_last_step<Traits>(c, map, o, j);
    }
}

// The whole key loop of one consumer warpgroup; o accumulates unnormalised P V, state holds the
// running max and this thread's partial row sums.
template <class Traits>
__device__ __forceinline__ void consumer_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                  const Consumer& c, const SharedMap& map,
                                                  float (&o)[Traits::kDimNTiles][4], RowState& state) {
    using B = Barriers<Traits>;
    LoopCarry<Traits> carry;
    const int32_t n = g.num_tiles;
    if (n > 0) first_tile<Traits>(p, g, c, map, carry, state);
    if (n > 1) {
        ptx::mbarrier_wait(B::full_k(map, 1), use_parity<Traits::kKSlots>(1));
        issue_scores<Traits>(c, k_chunk<Traits>(map, 1), carry.s);
    }
    uint32_t (&even)[Traits::kPvSteps][4] = carry.prob[0];
    uint32_t (&odd)[Traits::kPvSteps][4] = carry.prob[1];
    int32_t j = 0;
    for (; j + 3 < n; j += 2) {
        pipelined_step<Traits, true, true>(p, g, c, map, o, state, carry, j, even, odd);
        pipelined_step<Traits, true, true>(p, g, c, map, o, state, carry, j + 1, odd, even);
    }
    if (n - j == 3) {
        pipelined_step<Traits, true, true>(p, g, c, map, o, state, carry, j, even, odd);
        pipelined_step<Traits, true, false>(p, g, c, map, o, state, carry, j + 1, odd, even);
        pipelined_step<Traits, false, false>(p, g, c, map, o, state, carry, j + 2, even, odd);
    } else if (n - j == 2) {
        pipelined_step<Traits, true, false>(p, g, c, map, o, state, carry, j, even, odd);
        pipelined_step<Traits, false, false>(p, g, c, map, o, state, carry, j + 1, odd, even);
    } else if (n - j == 1) {
        pipelined_step<Traits, false, false>(p, g, c, map, o, state, carry, j, even, odd);
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    ptx::cp_async_wait<0>();
}

// The ordered form: the row group's turn to issue its products of step j (schedule.h).
template <class Traits>
__device__ __forceinline__ void take_turn(const Consumer& c, int32_t j) {
    static_assert(Traits::kRowGroups == kTurnRowGroups, "the turns alternate between two row groups");
    if (turn_waits(c.at.group, j))
        ptx::named_barrier_sync(kTurnBarrierBase + c.at.group, Traits::kConsumerThreads);
}

template <class Traits>
__device__ __forceinline__ void end_turn(const Consumer& c, int32_t j, int32_t n) {
    if (turn_grants(c.at.group, j, n))
        ptx::named_barrier_arrive(kTurnBarrierBase + next_turn_group(c.at.group), Traits::kConsumerThreads);
}

// The ordered form's step j, entering with P_j in registers and O rescaled for it. kHasNext: tile
// j+1 exists. The ring waits and the last tile's zeroing (both row groups meet there) come before
// the turn, so nothing inside a turn waits for the other row group.
template <class Traits, bool kHasNext>
__device__ __forceinline__ void ordered_step(const wideattn_prefill_params& p, const BlockGeometry& g,
                                             const Consumer& c, const SharedMap& map,
                                             float (&o)[Traits::kDimNTiles][4], RowState& state,
                                             LoopCarry<Traits>& carry, int32_t j,
                                             uint32_t (&prob)[Traits::kPvSteps][4],
                                             uint32_t (&prob_next)[Traits::kPvSteps][4]) {
    using B = Barriers<Traits>;
    if (kHasNext) ptx::mbarrier_wait(B::full_k(map, j + 1), use_parity<Traits::kKSlots>(j + 1));
    ptx::mbarrier_wait(B::full_v(map, j), use_parity<Traits::kVSlots>(j));
    if (!kHasNext) zero_last_value_rows<Traits>(g, c, map, j);
    take_turn<Traits>(c, j);
    if (kHasNext) issue_scores<Traits>(c, k_chunk<Traits>(map, j + 1), carry.s);
    issue_pv<Traits>(o, prob, v_chunk<Traits>(map, j));
    end_turn<Traits>(c, j, g.num_tiles);
    if (kHasNext) {
        ptx::wgmma_wait<1>();  // Q K_j+1^T done; P_j V_j may still run
        ptx::pin_all(carry.s);
        release_slot(B::empty_k(map, j + 1), c.at);
        float alpha[2];
        const bool rescale = exchange_and_softmax<Traits>(p, g, c, map, j + 1, carry.s, state, prob_next, alpha);
        ptx::wgmma_wait<0>();  // P_j V_j done
        end_step<Traits>(c, map, o, prob, j, rescale, alpha);
    } else {
        finish_last_step<Traits>(c, map, o, j);
    }
}

// The ordered form's key loop of one consumer warpgroup: the products, exchange and softmax of
// consumer_mainloop in another order (the same operations on the same values: the same bits).
template <class Traits>
__device__ __forceinline__ void consumer_mainloop_ordered(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                          const Consumer& c, const SharedMap& map,
                                                          float (&o)[Traits::kDimNTiles][4], RowState& state) {
    LoopCarry<Traits> carry;
    const int32_t n = g.num_tiles;
    if (n > 0) first_tile<Traits>(p, g, c, map, carry, state);
    uint32_t (&even)[Traits::kPvSteps][4] = carry.prob[0];
    uint32_t (&odd)[Traits::kPvSteps][4] = carry.prob[1];
    int32_t j = 0;
    for (; j + 2 < n; j += 2) {
        ordered_step<Traits, true>(p, g, c, map, o, state, carry, j, even, odd);
        ordered_step<Traits, true>(p, g, c, map, o, state, carry, j + 1, odd, even);
    }
    if (n - j == 2) {
        ordered_step<Traits, true>(p, g, c, map, o, state, carry, j, even, odd);
        ordered_step<Traits, false>(p, g, c, map, o, state, carry, j + 1, odd, even);
    } else if (n - j == 1) {
        ordered_step<Traits, false>(p, g, c, map, o, state, carry, j, even, odd);
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::hopper::bf16c2
