// mainloop.cuh - the key loop of the Hopper-tier 8-bit kernel with alternating key tiles, for one
// warpgroup. Round r covers key tiles 2r and 2r + 1: warpgroup g computes S = Q K^T of tile
// 2r + g over all 512 dims (16 wgmma m64n32k32 e4m3, Q and K codes from shared memory), the two
// warpgroups trade the tile's row maxima (one rendezvous), both raise the running maxima alike
// (bitwise: the same two operands of fmaxf), each writes its tile's P x 2^8 as e4m3 and hands a
// copy to the partner through shared memory, and each adds both tiles' P V into O over its half
// of the dims: its own P from registers (wgmma m64n256k32 RS), the partner's from shared memory
// (SS), V codes K-major from the transposed cache.
//
// Pipeline: round r enters with Q K^T of its tile and both P V of round r-1 in flight (wgmma
// groups, oldest first: scores(r), own P V(r-1), partner P V(r-1); every round commits all three,
// empty where a tile does not exist, so the waits have fixed counts). It waits for the scores
// only (wait 2), so the softmax runs while the tensor cores finish round r-1's products; then it
// waits for those (wait 0), rescales O, refills the rings and issues scores(r+1), own P V(r) and,
// once the partner's P is posted, partner P V(r). P alternates between two register sets (the
// own P V of round r-1 may still read the other one).
//
// Hand-offs, and why each buffer may be reused:
//  - row maxima: one rendezvous per round (both warpgroups, bar.sync); two parities, since a
//    warpgroup writes the next round's maxima only after the next rendezvous, which its partner
//    reaches only after reading this round's.
//  - P tiles: the producer stores and fences for the async proxy; after issuing its own products
//    each warpgroup bar.syncs on one barrier of both (kPostedProbsBarrier) before the SS wgmma of
//    its partner's tile. Both execute it in every round that has a tile (2r < num_tiles, the same
//    condition for both). A producer's next post comes after the next rendezvous, which the
//    consumer reaches only after this round's sync. Two parities of the buffer: a P tile is
//    rewritten two rounds later, after the rendezvous that the consumer reaches only once its
//    partner P V of that tile is complete (its wait 0 of the round in between). The earlier form
//    (bar.arrive by the producer on a barrier per warpgroup) drew racecheck reports: NOTES.md.
//  - rings: K slot of round r (warpgroup-private) is refilled for round r + kKeySlots once every
//    thread of the warpgroup has waited for scores(r); the V slots of round r-1 (each warpgroup
//    copies and reads only its half) for round r+1 once every thread has waited for round r-1's
//    P V. A warpgroup barrier precedes both refills.
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3alt_d512/loads.cuh"
#include "fp8/hopper_e4m3pv_d512/mainloop.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_exchange.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/common/wgmma_products.cuh"
#include "kernels/common/wgmma_softmax.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3alt {

// wgmma groups a round leaves in flight behind its tile's score product (own and partner P V).
constexpr int kProductsBehindScores = 2;
// Full rounds per iteration of the main loop (the first waits for everything: see the loop).
constexpr int32_t kRoundsPerRun = 4;
// The barrier on which warpgroup `group` posts its P tiles (wgmma_e4m3alt64_d512's hand-off).
__device__ __forceinline__ uint32_t posted_probs_barrier(int32_t group) {
    return static_cast<uint32_t>(kPostedScoresBase + group);
}
// The barrier both warpgroups sync on once their P tiles of the round are posted (this kernel).
constexpr uint32_t kPostedProbsBarrier = kPostedScoresBase;

// The block row of this thread's accumulator row pair member rr (0: row g, 1: row g + 8).
template <class Traits>
__device__ __forceinline__ int32_t accumulator_row(const GroupPlace& at, int32_t rr) {
    return at.row_tile * Traits::kRowsPerWarp + at.lane / Traits::kLanesPerAccumRow + rr * Traits::kAtomRows;
}

template <class Traits>
__device__ __forceinline__ uint32_t maxima_slot(const SharedMap& map, int32_t parity, int32_t group) {
    return map.maxima + (parity * Traits::kWarpGroups + group) * Traits::kMaximaBytes;
}

template <class Traits>
__device__ __forceinline__ uint32_t prob_tile(const SharedMap& map, int32_t parity, int32_t group) {
    return map.probs + (parity * Traits::kWarpGroups + group) * Traits::kProbTileBytes;
}

// The row maxima of both tiles of the round: own ones posted (one lane per quad), the rendezvous,
// the partner's added. Both warpgroups end with the same values.
template <class Traits>
__device__ __forceinline__ void trade_row_maxima(const SharedMap& map, int32_t parity, const GroupPlace& at,
                                                 float (&tile_max)[2]) {
    const uint32_t own = maxima_slot<Traits>(map, parity, at.group);
    const uint32_t other = maxima_slot<Traits>(map, parity, 1 - at.group);
    if (at.lane % Traits::kLanesPerAccumRow == 0)
#pragma unroll
        for (int32_t rr = 0; rr < 2; ++rr)
            ptx::store_shared_f32(own + accumulator_row<Traits>(at, rr) * 4, tile_max[rr]);
    ptx::named_barrier_sync(kExchangeBarrier, Traits::kThreads);
#pragma unroll
    for (int32_t rr = 0; rr < 2; ++rr)
        tile_max[rr] = fmaxf(tile_max[rr], ptx::load_shared_f32(other + accumulator_row<Traits>(at, rr) * 4));
}

// The thread's A fragment into the warpgroup's P tile of `parity`, at the places an SS wgmma reads
// the same A from (Traits::prob_fragment_offset; tests/test_wgmma_layout.cpp checks it against
// the descriptor): a warp's four stores each cover 128 contiguous bytes.
template <class Traits>
__device__ __forceinline__ void post_probs(const SharedMap& map, int32_t parity, const GroupPlace& at,
                                           const uint32_t (&prob)[4]) {
    const uint32_t tile = prob_tile<Traits>(map, parity, at.group);
#pragma unroll
    for (int32_t reg = 0; reg < 4; ++reg)
        ptx::store_shared_u32(tile + Traits::prob_fragment_offset(at.row_tile, at.lane, reg), prob[reg]);
    ptx::fence_proxy_async_shared();
}

// Round r of the key loop (see the file comment); prob: this round's P register set.
// kBehindProducts: the previous round was a full one, so this one waits for its score product
// only (its P V products stay in flight through the softmax); otherwise everything is waited for
// at the top, and prob may be either set. kFull: both tiles of this round and this warpgroup's
// tile of the next exist, so every wgmma is issued unconditionally (ptxas counts wgmma groups
// only along paths where they hold a wgmma: with a wgmma skipped it could not tell which group
// the wait of the next round retires, and serialised them).
template <class Traits, bool kBehindProducts, bool kFull>
__device__ __forceinline__ void alternating_round(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                  const GroupPlace& at, const SharedMap& map, Streams<Traits>& streams,
                                                  float score_scale, float (&o)[Traits::kDimNTiles][4],
                                                  RowState& state, float (&s)[Traits::kKeyNTiles][4], int32_t r,
                                                  uint32_t (&prob)[4]) {
    const int32_t n = g.num_tiles;
    const int32_t own_tile = Traits::kTilesPerRound * r + at.group;
    const int32_t partner_tile = Traits::kTilesPerRound * r + 1 - at.group;
    const bool own = kFull || own_tile < n;
    const bool partner = kFull || partner_tile < n;
    const bool next_scores = kFull || Traits::kTilesPerRound * (r + 1) + at.group < n;
    const int32_t parity = r % Traits::kProbParities;

    if constexpr (kBehindProducts)
        ptx::wgmma_wait<kProductsBehindScores>();  // scores(r)
    else
        ptx::wgmma_wait<0>();
    ptx::pin_all(s);
    // Worked on as a copy: a non-wgmma write to the accumulator registers while other wgmma
    // groups are in flight makes ptxas serialise them.
    float scores[Traits::kKeyNTiles][4];
#pragma unroll
    for (int32_t k = 0; k < Traits::kKeyNTiles; ++k)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) scores[k][e] = own ? s[k][e] : -INFINITY;
    if (own) mask_scores<Traits>(g, own_tile, at.lane, scores);
    float tile_max[2];
    score_row_maxima<Traits, true>(scores, score_scale, tile_max);
    trade_row_maxima<Traits>(map, parity, at, tile_max);
    float alpha[2];
    const bool rescale = raise_max_if_grown<Traits>(tile_max, state, alpha);
    exponentiate_from_maxima<Traits, true>(scores, score_scale, state, Traits::kProbScaleLog2);
    e4m3pv::pack_prob_fragment<Traits>(scores, prob);

    ptx::wgmma_wait<0>();  // both P V of round r-1: O complete
    ptx::pin_all(o);
    if (rescale) rescale_output(o, alpha);
    if (own) ptx::mbarrier_wait(value_barrier<Traits>(map, own_tile, at.group), value_phase<Traits>(own_tile));
    if (partner)
        ptx::mbarrier_wait(value_barrier<Traits>(map, partner_tile, at.group), value_phase<Traits>(partner_tile));
    const int32_t last = n - 1;
    if (last == own_tile || last == partner_tile) {
        // Keys past kv_end inside the last tile's last sub-tile must not carry a page's unused
        // slots into P V (this warpgroup's half of the dims).
        const int32_t keys_valid = g.kv_end - last * Traits::kTileKeys;
        if (keys_valid % Traits::kPageKeys != 0) {
            e4m3pv::zero_value_keys_from<Traits>(value_chunk<Traits>(map, last), keys_valid, at.group, at.thread);
            ptx::fence_proxy_async_shared();
        }
    }
    ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    if (issues_copies(at)) {
        if (Traits::kTilesPerRound * (r + Traits::kKeySlots) + at.group < n)
            issue_own_keys<Traits>(streams, p, g, map, r + Traits::kKeySlots, at);
        if (r >= 1)
            for (int32_t tile = Traits::kTilesPerRound * (r + 1); tile < Traits::kTilesPerRound * (r + 2) && tile < n;
                 ++tile)
                issue_values<Traits>(streams, p, g, map, tile, at);
    }
    ptx::converge_warp();

    if (own) post_probs<Traits>(map, parity, at, prob);
    if (next_scores) {
        ptx::mbarrier_wait(key_barrier<Traits>(map, r + 1, at.group), key_phase<Traits>(r + 1));
        issue_scores_over<Traits, Traits::kFullSlabs, true>(map.q, key_chunk<Traits>(map, r + 1, at.group), 0, s);
    } else {
        ptx::wgmma_commit();
    }
    if (own) {
        ptx::wgmma_fence();
        ptx::wgmma_m64n256k32_e4m3_rs(o, prob, fp8_pv_descriptor<Traits>(value_chunk<Traits>(map, own_tile), at.group));
    }
    ptx::wgmma_commit();
    if (own || partner) ptx::named_barrier_sync(kPostedProbsBarrier, Traits::kThreads);
    if (partner) {
        ptx::wgmma_fence();
        ptx::wgmma_m64n256k32_e4m3_ss(
            o,
            interleaved_descriptor(prob_tile<Traits>(map, parity, 1 - at.group), Traits::kProbCoreBytes,
                                   Traits::kProbRowGroupBytes),
            fp8_pv_descriptor<Traits>(value_chunk<Traits>(map, partner_tile), at.group));
    }
    ptx::wgmma_commit();
}

// Issues the prologue's loads: Q (cp.async, the warpgroup's half, one group; kCopyQ false: an
// empty group, the caller writes Q before the main loop), then, once the warpgroup's ring
// barriers are set up, its first kKeySlots K tiles and its half of the first kValueSlots V tiles.
template <class Traits, bool kCopyQ>
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, int64_t first_token,
                                               int32_t tile_len, Streams<Traits>& streams) {
    if constexpr (kCopyQ)
        issue_q_rows<Traits, Traits::kElemBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    ptx::cp_async_commit();
    if (at.thread == 0) {
        for (int32_t slot = 0; slot < Traits::kKeySlots; ++slot)
            ptx::mbarrier_init(key_barrier<Traits>(map, slot, at.group),
                               bf16::KvTmaStream<WgmmaE4m3AltKeyStreamTraits>::kIssuers);
        for (int32_t slot = 0; slot < Traits::kValueSlots; ++slot)
            ptx::mbarrier_init(value_barrier<Traits>(map, slot, at.group), e4m3pv::ValueTmaStream<Traits>::kIssuers);
        ptx::fence_mbarrier_init();
    }
    ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    if (issues_copies(at)) {
        for (int32_t round = 0; round < Traits::kKeySlots; ++round)
            if (Traits::kTilesPerRound * round + at.group < g.num_tiles)
                issue_own_keys<Traits>(streams, p, g, map, round, at);
        for (int32_t tile = 0; tile < Traits::kValueSlots && tile < g.num_tiles; ++tile)
            issue_values<Traits>(streams, p, g, map, tile, at);
    }
    ptx::converge_warp();
}

// Row sums of both warpgroups' tiles, at the end of the key loop: thread i of either warpgroup
// holds the same rows and key columns, so the partials add thread by thread (in either order: the
// same sum). Also wgmma_e4m3alt64_d512's.
template <class Traits>
__device__ __forceinline__ void add_partner_row_sums(const SharedMap& map, const GroupPlace& at, RowState& state) {
    const uint32_t own = map.sums + (at.group * Traits::kWarpGroupThreads + at.thread) * 8;
    const uint32_t other = map.sums + ((1 - at.group) * Traits::kWarpGroupThreads + at.thread) * 8;
    ptx::store_shared_f32(own, state.sum[0]);
    ptx::store_shared_f32(own + 4, state.sum[1]);
    ptx::named_barrier_sync(kExchangeBarrier, Traits::kThreads);
    state.sum[0] += ptx::load_shared_f32(other);
    state.sum[1] += ptx::load_shared_f32(other + 4);
}

// The whole key loop of one warpgroup; o accumulates unnormalised P V over its half of the dims
// (P x 2^8, V in codes); state holds the running maxima (equal in both warpgroups) and this
// thread's partial row sums of both warpgroups' tiles.
template <class Traits>
__device__ __forceinline__ void alternating_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                     const GroupPlace& at, const SharedMap& map,
                                                     Streams<Traits>& streams, float score_scale,
                                                     float (&o)[Traits::kDimNTiles][4], RowState& state) {
    float s[Traits::kKeyNTiles][4];
    uint32_t prob[2][4];
    // Q of both warpgroups landed (or quantised into shared memory) and visible to wgmma.
    ptx::cp_async_wait<0>();
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kExchangeBarrier, Traits::kThreads);
    ptx::pin_all(o);  // zeroed before the first wgmma is issued
    if (at.group < g.num_tiles) {
        ptx::mbarrier_wait(key_barrier<Traits>(map, 0, at.group), key_phase<Traits>(0));
        issue_scores_over<Traits, Traits::kFullSlabs, true>(map.q, key_chunk<Traits>(map, 0, at.group), 0, s);
    } else {
        ptx::wgmma_commit();
    }
    for (int32_t i = 0; i < kProductsBehindScores; ++i) ptx::wgmma_commit();  // round -1's (absent) P V
    const int32_t n = g.num_tiles;
    const int32_t rounds = (n + Traits::kTilesPerRound - 1) / Traits::kTilesPerRound;
    // Round r is full when its tiles and the next round's exist for both warpgroups.
    const auto full = [n](int32_t r) { return Traits::kTilesPerRound * r + 3 < n; };
    int32_t r = 0;
    if (rounds > 0) {
        if (full(0))
            alternating_round<Traits, false, true>(p, g, at, map, streams, score_scale, o, state, s, 0, prob[0]);
        else
            alternating_round<Traits, false, false>(p, g, at, map, streams, score_scale, o, state, s, 0, prob[0]);
        r = 1;
    }
    // Full rounds after a full round 0, in runs that begin with a round waiting for everything:
    // ptxas does not follow in-flight wgmma groups across a loop's back edge, so a round at the
    // top of an iteration that left products in flight would make it serialise them all. Within
    // a run the P sets alternate.
    if (full(0)) {
        for (; full(r + kRoundsPerRun - 1); r += kRoundsPerRun) {
            alternating_round<Traits, false, true>(p, g, at, map, streams, score_scale, o, state, s, r, prob[1]);
            alternating_round<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, s, r + 1, prob[0]);
            alternating_round<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, s, r + 2, prob[1]);
            alternating_round<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, s, r + 3, prob[0]);
        }
        if (full(r)) {
            alternating_round<Traits, false, true>(p, g, at, map, streams, score_scale, o, state, s, r, prob[1]);
            ++r;
            if (full(r)) {
                alternating_round<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, s, r, prob[0]);
                ++r;
                if (full(r)) {
                    alternating_round<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, s, r, prob[1]);
                    ++r;
                }
            }
        }
    }
    // The last rounds (at most two), everything waited for at their top.
    for (; r < rounds; ++r)
        alternating_round<Traits, false, false>(p, g, at, map, streams, score_scale, o, state, s, r, prob[0]);
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    add_partner_row_sums<Traits>(map, at, state);
}

}  // namespace wideattn::hopper::e4m3alt
