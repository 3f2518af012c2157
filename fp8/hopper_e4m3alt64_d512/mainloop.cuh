// mainloop.cuh - the key loop of the Hopper-tier 8-bit kernel with alternating 64-key tiles
// (wgmma_e4m3alt64_d512), for one warpgroup: wgmma_e4m3alt_d512's rounds
// (fp8/hopper_e4m3alt_d512/mainloop.cuh: its row-maxima rendezvous, P hand-off, wgmma group
// counts and runs of full rounds are reused unchanged) over tiles of 64 keys. Round r covers key
// tiles 2r and 2r + 1: warpgroup g computes S = Q K^T of tile 2r + g over all 512 dims (16 wgmma
// m64n64k32 e4m3), the two warpgroups trade row maxima once, each forms P x 2^8 of its tile as two
// k32 e4m3 A fragments and stores them to its P tile in shared memory, and each adds both tiles'
// P V into its half of O, both from the P tiles (2 wgmma m64n256k32 SS per tile, tile 2r first).
//
// Differences from the 32-key rounds:
//  - The scores are only read, never copied or rewritten: the row maxima and P are formed from
//    the accumulator registers directly (masked keys selected as -inf on the way), so no
//    non-wgmma write touches accumulator registers while P V groups are in flight and no 32-float
//    working copy is live.
//  - K ring of one slot per warpgroup: the rendezvous of round r follows every thread's wait for
//    scores(r), so after it the slot is refilled with the warpgroup's tile of round r + 1, which
//    the end of the round waits for.
//  - V ring of three tile slots: once every thread of the warpgroup has waited for round r-1's
//    P V (a warpgroup barrier after the wait), its halves of tiles 2r-2 and 2r-1 are refilled
//    with tiles 2r+1 and 2r+2; in full rounds each P V waits for its V tile just before issue,
//    and both warpgroups issue the P V in tile order, so tile 2r+1 is waited for last.
//  - Own P V from shared memory too: the RS form's two P register sets did not fit (NOTES.md).
//  - Masking only in the generic rounds: a full round's own tile ends at least 64 keys before
//    kv_end, and every row sees every key below kv_end - kTileTokens (bottom-right causal).
//  - kTwoTermP (blocks whose sequence's new tokens fit the token tile: decode and verification
//    steps, bound by the K/V stream): P is two e4m3 terms, hi = e4m3(P x 2^8) and lo = e4m3 of
//    its residual in the same units, each a P tile and an FP8 P V into the same accumulator. The
//    two terms take the places of the two P parities, so a round's P is stored only once both
//    warpgroups have retired the previous round's P V (a block barrier after that wait, where
//    the one-term rounds have a warpgroup barrier). NOTES.md, "Two e4m3 terms of P".
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3alt_d512/loads.cuh"
#include "fp8/hopper_e4m3alt_d512/mainloop.cuh"
#include "fp8/hopper_e4m3pv_d512/loads.cuh"
#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/common/wgmma_products.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3alt64 {

using e4m3alt::SharedMap;

// Two-term P: the P tile slots of the hi and lo terms (one-term rounds use slot r % 2).
constexpr int32_t kHiTermSlot = 0;
constexpr int32_t kLoTermSlot = 1;
// Two-term P: both warpgroups have retired the previous round's P V (after e4m3alt's
// posted-P barriers, kPostedScoresBase + warpgroup).
constexpr int32_t kProductsRetiredBarrier = kPostedScoresBase + 2;
static_assert(kProductsRetiredBarrier < kHardwareBarriers, "a hardware named barrier");

// Per row of the thread's pair (g, g + 8): score column c (0 .. kTileKeys - 1, c = n kAccumN +
// 2 (lane % 4) + e % 2 for quad n, element e) of key tile `tile` is visible iff c < limit[e / 2]
// (the bottom-right causal limit and kv_end; at most 0 for a tile past kv_end).
template <class Traits>
__device__ __forceinline__ void tile_key_limits(const BlockGeometry& g, int32_t tile, int32_t lane,
                                                int32_t (&limit)[2]) {
#pragma unroll
    for (int32_t rr = 0; rr < 2; ++rr)
        limit[rr] = min(g.row_key_end + rr, g.kv_end) - tile * Traits::kTileKeys -
                    2 * (lane % Traits::kLanesPerAccumRow);
}

// Score element (n, e), or -inf where kMasked and its key is not visible.
template <class Traits, bool kMasked>
__device__ __forceinline__ float visible_score(const float (&s)[Traits::kKeyNTiles][4], const int32_t (&limit)[2],
                                               int32_t n, int32_t e) {
    if constexpr (kMasked) return n * Traits::kAccumN + e % 2 < limit[e / 2] ? s[n][e] : -INFINITY;
    return s[n][e];
}

// The row maxima of the thread's two rows over the visible keys of its tile, times `scale` (> 0).
template <class Traits, bool kMasked>
__device__ __forceinline__ void own_row_maxima(const float (&s)[Traits::kKeyNTiles][4], const int32_t (&limit)[2],
                                               float scale, float (&tile_max)[2]) {
    constexpr uint32_t kFullMask = 0xffffffffu;
#pragma unroll
    for (int32_t rr = 0; rr < 2; ++rr) {
        float m = -INFINITY;
#pragma unroll
        for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
            m = fmaxf(m, fmaxf(visible_score<Traits, kMasked>(s, limit, n, 2 * rr),
                               visible_score<Traits, kMasked>(s, limit, n, 2 * rr + 1)));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        tile_max[rr] = m * scale;
    }
}

// P = 2^(s x scale - max + kProbScaleLog2) of the visible keys (0 elsewhere) against the running
// maxima, added to the row sums and rounded to e4m3 (RNE, saturating) into the A fragments of the
// two P V steps, element by element as Traits::prob_score_quad / prob_score_element place them;
// kTwoTermP: the rounding residuals too, rounded to e4m3 into prob_lo (same places and units).
template <class Traits, bool kMasked, bool kTwoTermP>
__device__ __forceinline__ void own_probs(const float (&s)[Traits::kKeyNTiles][4], const int32_t (&limit)[2],
                                          float scale, RowState& state, uint32_t (&prob)[Traits::kPvSteps][4],
                                          uint32_t (&prob_lo)[Traits::kPvSteps][4]) {
    constexpr int32_t kBytesPerReg = 4;
    float base[2];
#pragma unroll
    for (int32_t rr = 0; rr < 2; ++rr)
        base[rr] = state.max_log2[rr] == -INFINITY ? 0.0f : state.max_log2[rr] - Traits::kProbScaleLog2;
#pragma unroll
    for (int32_t step = 0; step < Traits::kPvSteps; ++step)
#pragma unroll
        for (int32_t reg = 0; reg < Traits::kProbRegs; ++reg) {
            float pr[kBytesPerReg];
#pragma unroll
            for (int32_t byte = 0; byte < kBytesPerReg; ++byte) {
                const int32_t e = Traits::prob_score_element(reg, byte);
                pr[byte] = fast_exp2(fmaf(visible_score<Traits, kMasked>(s, limit, Traits::prob_score_quad(step, reg, byte), e),
                                          scale, -base[e / 2]));
                state.sum[e / 2] += pr[byte];
            }
            prob[step][reg] = mma_e4m3::pack_e4m3x4(pr[0], pr[1], pr[2], pr[3]);
            if constexpr (kTwoTermP) {
                float residual[kBytesPerReg];
                mma_e4m3::e4m3x4_residuals(prob[step][reg], pr, residual);
                prob_lo[step][reg] = mma_e4m3::pack_e4m3x4(residual[0], residual[1], residual[2], residual[3]);
            }
        }
}

// The thread's A fragments into the warpgroup's P tile of slot `slot` (Traits::prob_fragment_offset:
// the places the two SS wgmmas read; tests/test_wgmma_layout.cpp checks them), kTwoTermP: the lo
// term's into the tile of kLoTermSlot; then posted.
template <class Traits, bool kTwoTermP>
__device__ __forceinline__ void post_probs(const SharedMap& map, int32_t slot, const GroupPlace& at,
                                           const uint32_t (&prob)[Traits::kPvSteps][4],
                                           const uint32_t (&prob_lo)[Traits::kPvSteps][4]) {
    const uint32_t tile = e4m3alt::prob_tile<Traits>(map, slot, at.group);
    const uint32_t lo_tile = e4m3alt::prob_tile<Traits>(map, kLoTermSlot, at.group);
#pragma unroll
    for (int32_t step = 0; step < Traits::kPvSteps; ++step)
#pragma unroll
        for (int32_t reg = 0; reg < Traits::kProbRegs; ++reg) {
            const uint32_t offset = Traits::prob_fragment_offset(at.row_tile, at.lane, step, reg);
            ptx::store_shared_u32(tile + offset, prob[step][reg]);
            if constexpr (kTwoTermP) ptx::store_shared_u32(lo_tile + offset, prob_lo[step][reg]);
        }
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_arrive(e4m3alt::posted_probs_barrier(at.group), Traits::kThreads);
}

// The V descriptor of P V step `step` over the warpgroup's half of V tile `tile`.
template <class Traits>
__device__ __forceinline__ SmemDescriptor value_step_descriptor(const SharedMap& map, int32_t tile, int32_t group,
                                                                int32_t step) {
    return descriptor_plus(fp8_pv_descriptor<Traits>(e4m3alt::value_chunk<Traits>(map, tile), group),
                           step * Traits::kVtStepBytes);
}

// The A descriptor of P V step `step` over warpgroup `group`'s P tile of slot `slot`.
template <class Traits>
__device__ __forceinline__ SmemDescriptor prob_step_descriptor(const SharedMap& map, int32_t slot, int32_t group,
                                                               int32_t step) {
    return interleaved_descriptor(e4m3alt::prob_tile<Traits>(map, slot, group) + step * Traits::kProbStepBytes,
                                  Traits::kProbCoreBytes, Traits::kProbRowGroupBytes);
}

// Round r of the key loop (see the file comment and wgmma_e4m3alt_d512's alternating_round for
// kBehindProducts and kFull; kTwoTermP: the file comment); prob: this round's P register set.
template <class Traits, bool kBehindProducts, bool kFull, bool kTwoTermP>
__device__ __forceinline__ void wide_round(const wideattn_prefill_params& p, const BlockGeometry& g,
                                           const GroupPlace& at, const SharedMap& map,
                                           e4m3alt::Streams<Traits>& streams, float score_scale,
                                           float (&o)[Traits::kDimNTiles][4], RowState& state,
                                           float (&s)[Traits::kKeyNTiles][4], int32_t r) {
    const int32_t n = g.num_tiles;
    const int32_t own_tile = Traits::kTilesPerRound * r + at.group;
    const int32_t partner_tile = Traits::kTilesPerRound * r + 1 - at.group;
    const bool own = kFull || own_tile < n;
    const bool partner = kFull || partner_tile < n;
    const bool next_scores = kFull || Traits::kTilesPerRound * (r + 1) + at.group < n;
    const int32_t parity = r % Traits::kProbParities;
    const int32_t prob_slot = kTwoTermP ? kHiTermSlot : parity;
    static_assert(Traits::kProbParities > kLoTermSlot, "the lo term in the second parity's P tile");

    if constexpr (kBehindProducts)
        ptx::wgmma_wait<e4m3alt::kProductsBehindScores>();  // scores(r)
    else
        ptx::wgmma_wait<0>();
    ptx::pin_all(s);
    int32_t limit[2] = {Traits::kTileKeys, Traits::kTileKeys};
    if constexpr (!kFull) tile_key_limits<Traits>(g, own_tile, at.lane, limit);
    float tile_max[2];
    own_row_maxima<Traits, !kFull>(s, limit, score_scale, tile_max);
    e4m3alt::trade_row_maxima<Traits>(map, parity, at, tile_max);
    if (e4m3alt::issues_copies(at) && Traits::kTilesPerRound * (r + Traits::kKeySlots) + at.group < n)
        e4m3alt::issue_own_keys<Traits>(streams, p, g, map, r + Traits::kKeySlots, at);
    float alpha[2];
    const bool rescale = raise_max_if_grown<Traits>(tile_max, state, alpha);
    uint32_t prob[Traits::kPvSteps][4];
    uint32_t prob_lo[Traits::kPvSteps][4];
    own_probs<Traits, !kFull, kTwoTermP>(s, limit, score_scale, state, prob, prob_lo);

    ptx::wgmma_wait<0>();  // both P V of round r-1: O complete
    ptx::pin_all(o);
    if constexpr (kTwoTermP)
        ptx::named_barrier_sync(kProductsRetiredBarrier, Traits::kThreads);  // and the partner's: P tiles free
    else
        ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    if (e4m3alt::issues_copies(at) && r >= 1)
        for (int32_t tile = Traits::kTilesPerRound * (r - 1) + Traits::kValueSlots;
             tile < Traits::kTilesPerRound * r + Traits::kValueSlots && tile < n; ++tile)
            e4m3alt::issue_values<Traits>(streams, p, g, map, tile, at);
    if (rescale) rescale_output(o, alpha);
    if constexpr (!kFull) {
        if (own)
            ptx::mbarrier_wait(e4m3alt::value_barrier<Traits>(map, own_tile, at.group),
                               e4m3alt::value_phase<Traits>(own_tile));
        if (partner)
            ptx::mbarrier_wait(e4m3alt::value_barrier<Traits>(map, partner_tile, at.group),
                               e4m3alt::value_phase<Traits>(partner_tile));
        const int32_t last = n - 1;
        if (last == own_tile || last == partner_tile) {
            // Keys past kv_end inside the last tile's last sub-tile must not carry a page's
            // unused slots into P V (this warpgroup's half of the dims); later sub-tiles landed
            // as zeros.
            const int32_t keys_valid = g.kv_end - last * Traits::kTileKeys;
            if (keys_valid % Traits::kPageKeys != 0) {
                e4m3pv::zero_value_keys_from<Traits>(e4m3alt::value_chunk<Traits>(map, last), keys_valid, at.group,
                                                     at.thread);
                ptx::fence_proxy_async_shared();
                ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
            }
        }
    }

    if (own) {
        post_probs<Traits, kTwoTermP>(map, prob_slot, at, prob, prob_lo);
        // The own P V reads the tile too: every thread's fragments stored and fenced.
        ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    }
    if (next_scores) {
        ptx::mbarrier_wait(e4m3alt::key_barrier<Traits>(map, r + 1, at.group), e4m3alt::key_phase<Traits>(r + 1));
        // With one K slot the operand addresses are loop-invariant: pinned here so the compiler
        // forms the 16 steps' descriptors per round instead of holding 32 of them in registers.
        uint32_t q_tile = map.q;
        uint32_t k_chunk = e4m3alt::key_chunk<Traits>(map, r + 1, at.group);
        ptx::pin(q_tile);
        ptx::pin(k_chunk);
        issue_scores_over<Traits, Traits::kFullSlabs, true>(q_tile, k_chunk, 0, s);
    } else {
        ptx::wgmma_commit();
    }
    // Both P V in tile order (tile 2r from warpgroup 0's P tile, then 2r + 1 from warpgroup 1's),
    // so the V tile copied last (2r + 1) is waited for last in both warpgroups.
#pragma unroll
    for (int32_t producer = 0; producer < Traits::kTilesPerRound; ++producer) {
        const int32_t tile = Traits::kTilesPerRound * r + producer;
        if (kFull || tile < n) {
            if constexpr (kFull)
                ptx::mbarrier_wait(e4m3alt::value_barrier<Traits>(map, tile, at.group),
                                   e4m3alt::value_phase<Traits>(tile));
            if (producer != at.group)
                ptx::named_barrier_sync(e4m3alt::posted_probs_barrier(producer), Traits::kThreads);
            ptx::wgmma_fence();
#pragma unroll
            for (int32_t step = 0; step < Traits::kPvSteps; ++step) {
                const SmemDescriptor values = value_step_descriptor<Traits>(map, tile, at.group, step);
                ptx::wgmma_m64n256k32_e4m3_ss(o, prob_step_descriptor<Traits>(map, prob_slot, producer, step), values);
                if constexpr (kTwoTermP)
                    ptx::wgmma_m64n256k32_e4m3_ss(o, prob_step_descriptor<Traits>(map, kLoTermSlot, producer, step),
                                                  values);
            }
        }
        ptx::wgmma_commit();
    }
}

// The whole key loop of one warpgroup (wgmma_e4m3alt_d512's alternating_mainloop over wide_round):
// o accumulates unnormalised P V over its half of the dims; state ends with the running maxima
// and the row sums of both warpgroups' tiles. kTwoTermP: P as two e4m3 terms (the file comment).
template <class Traits, bool kTwoTermP>
__device__ __forceinline__ void wide_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                              const GroupPlace& at, const SharedMap& map,
                                              e4m3alt::Streams<Traits>& streams, float score_scale,
                                              float (&o)[Traits::kDimNTiles][4], RowState& state) {
    float s[Traits::kKeyNTiles][4];
    // Q of both warpgroups landed and visible to wgmma.
    ptx::cp_async_wait<0>();
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kExchangeBarrier, Traits::kThreads);
    ptx::pin_all(o);  // zeroed before the first wgmma is issued
    if (at.group < g.num_tiles) {
        ptx::mbarrier_wait(e4m3alt::key_barrier<Traits>(map, 0, at.group), e4m3alt::key_phase<Traits>(0));
        issue_scores_over<Traits, Traits::kFullSlabs, true>(map.q, e4m3alt::key_chunk<Traits>(map, 0, at.group), 0, s);
    } else {
        ptx::wgmma_commit();
    }
    for (int32_t i = 0; i < e4m3alt::kProductsBehindScores; ++i) ptx::wgmma_commit();  // round -1's (absent) P V
    const int32_t n = g.num_tiles;
    const int32_t rounds = (n + Traits::kTilesPerRound - 1) / Traits::kTilesPerRound;
    // Round r is full when its tiles and the next round's exist for both warpgroups.
    const auto full = [n](int32_t r) { return Traits::kTilesPerRound * r + 3 < n; };
    int32_t r = 0;
    if (rounds > 0) {
        if (full(0))
            wide_round<Traits, false, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, 0);
        else
            wide_round<Traits, false, false, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, 0);
        r = 1;
    }
    // Full rounds in runs that begin with a round waiting for everything (ptxas does not follow
    // in-flight wgmma groups across a loop's back edge); within a run the P sets alternate.
    if (full(0)) {
        for (; full(r + e4m3alt::kRoundsPerRun - 1); r += e4m3alt::kRoundsPerRun) {
            wide_round<Traits, false, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r);
            wide_round<Traits, true, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r + 1);
            wide_round<Traits, true, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r + 2);
            wide_round<Traits, true, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r + 3);
        }
        if (full(r)) {
            wide_round<Traits, false, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r);
            ++r;
            if (full(r)) {
                wide_round<Traits, true, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r);
                ++r;
                if (full(r)) {
                    wide_round<Traits, true, true, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r);
                    ++r;
                }
            }
        }
    }
    // The last rounds (at most two), everything waited for at their top.
    for (; r < rounds; ++r)
        wide_round<Traits, false, false, kTwoTermP>(p, g, at, map, streams, score_scale, o, state, s, r);
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    e4m3alt::add_partner_row_sums<Traits>(map, at, state);
}

}  // namespace wideattn::hopper::e4m3alt64
