// mainloop.cuh - the key loop of the Hopper-tier FP8 P V kernel for one warpgroup: per 32-key
// step, S = Q K^T over the warpgroup's 256 dims (8 wgmma m64n32k32 e4m3, Q and K codes from
// shared memory), the one-way partial-score exchange with the other warpgroup, the online
// softmax (exp2, the softmax and dequantisation scales folded into the exp2 argument, a rescale at
// every growth of a row maximum) writing P x 2^8 as e4m3 A fragments, and O += P V (1 wgmma
// m64n256k32 e4m3, V codes K-major from the transposed cache).
//
// The software pipeline, ring and barriers are the bf16 Hopper kernel's
// (kernels/hopper/bf16_d512/mainloop.cuh, whose comment gives the argument for each wait): step
// j enters with P_j and Q K_j+1^T in flight, waits for Q K_j+1^T, issues P_j V_j after a barrier
// of its own warpgroup, posts its partial S_j+1, refills the ring (V_j+1, K_j+3), collects the
// partner's partial S_j+1, runs the softmax of S_j+1 into the other P register set, issues
// Q K_j+2^T right behind P_j V_j and rescales O once P_j V_j is done. Ring: 4 slots, chunk 2j =
// K_j, chunk 2j+1 = V_j, chunk c in slot c % 4, one mbarrier per slot and warpgroup (phase
// c / 4). The P fragment of a lane holds the keys of its score accumulator (A position 4t + 2a + b
// = key 8a + 2t + b of each 16-key half), which is the order the transposed V layout stores a
// page's slots in, so P needs no shuffle and V no permute.
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3pv_d512/loads.cuh"
#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_exchange.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/common/wgmma_loads.cuh"
#include "kernels/common/wgmma_products.cuh"
#include "kernels/common/wgmma_softmax.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3pv {

// Shared-memory addresses of one block's regions (Traits::SmemPlan from the aligned base).
struct SharedMap {
    uint32_t q;
    uint32_t ring;
    uint32_t exchange;
    uint32_t barriers;  // kRingSlots x kWarpGroups mbarriers of the K/V ring
};

template <class Traits>
__device__ __forceinline__ SharedMap shared_map(uint32_t base) {
    using Plan = typename Traits::SmemPlan;
    return SharedMap{base + Plan::kQ, base + Plan::kRing, base + Plan::kExchange, base + Plan::kBarriers};
}

template <class Traits>
__device__ __forceinline__ uint32_t ring_chunk(const SharedMap& map, int32_t chunk) {
    return map.ring + (chunk % Traits::kRingSlots) * Traits::kChunkBytes;
}

// The mbarrier the warpgroup's copies of `chunk` complete on (phase chunk / kRingSlots).
template <class Traits>
__device__ __forceinline__ uint32_t chunk_barrier(const SharedMap& map, int32_t chunk, int32_t group) {
    return map.barriers + ((chunk % Traits::kRingSlots) * Traits::kWarpGroups + group) * Traits::kBarrierBytes;
}

template <class Traits>
__device__ __forceinline__ void wait_chunk(const SharedMap& map, int32_t chunk, int32_t group) {
    ptx::mbarrier_wait(chunk_barrier<Traits>(map, chunk, group),
                       static_cast<uint32_t>(chunk / Traits::kRingSlots) & 1u);
}

template <class Traits>
__device__ __forceinline__ bool chunk_landed(const SharedMap& map, int32_t chunk, int32_t group) {
    return ptx::mbarrier_test(chunk_barrier<Traits>(map, chunk, group),
                              static_cast<uint32_t>(chunk / Traits::kRingSlots) & 1u);
}

// Lane 0 of each warp issues a quarter of every chunk's copies.
__device__ __forceinline__ bool issues_copies(const GroupPlace& at) { return at.lane == 0; }

// The K and V streams of one warpgroup.
template <class Traits>
struct Streams {
    KeyTmaStream<Traits> k;
    ValueTmaStream<Traits> v;
};

// This thread's share of the copies of K chunk `chunk` (tile chunk / 2), issued.
template <class Traits>
__device__ __forceinline__ void issue_key_chunk(Streams<Traits>& streams, const wideattn_prefill_params& p,
                                                const BlockGeometry& g, const SharedMap& map, int32_t chunk,
                                                const GroupPlace& at) {
    streams.k.issue(p, p.block_table + g.table_offset, g.kv_end, ring_chunk<Traits>(map, chunk),
                    chunk_barrier<Traits>(map, chunk, at.group), at.row_tile);
}

// The same for V chunk `chunk` (tile chunk / 2).
template <class Traits>
__device__ __forceinline__ void issue_value_chunk(Streams<Traits>& streams, const wideattn_prefill_params& p,
                                                  const BlockGeometry& g, const SharedMap& map, int32_t chunk,
                                                  const GroupPlace& at) {
    streams.v.issue(p, p.block_table + g.table_offset, g.kv_end, ring_chunk<Traits>(map, chunk),
                    chunk_barrier<Traits>(map, chunk, at.group), at.group, at.row_tile);
}

// Q K^T on e4m3 codes, issued (committed, not waited for) into s.
template <class Traits>
__device__ __forceinline__ void issue_scores(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                             float (&s)[Traits::kKeyNTiles][4]) {
    issue_scores_over<Traits, Traits::kSlabsPerGroup, true>(q_shared, k_chunk, group, s);
}

// P V on e4m3 P and V, issued (committed, not waited for) into o: one k32 wgmma per tile.
template <class Traits>
__device__ __forceinline__ void issue_pv(float (&o)[Traits::kDimNTiles][4],
                                         const uint32_t (&prob)[Traits::kPvSteps][4], uint32_t v_chunk,
                                         int32_t group) {
    ptx::wgmma_fence();
    ptx::wgmma_m64n256k32_e4m3_rs(o, prob[0], fp8_pv_descriptor<Traits>(v_chunk, group));
    ptx::wgmma_commit();
}

// A 64 x 32 tile of P (the score accumulator's layout) rounded to e4m3 (RNE, saturating) into
// the A fragment of one P V wgmma m64n256k32: prob[0] = keys 2t, 2t+1, 8+2t, 9+2t of row g, [1]
// the same of row g + 8, [2], [3] those 16 keys later.
template <class Traits>
__device__ __forceinline__ void pack_prob_fragment(const float (&s)[Traits::kKeyNTiles][4], uint32_t (&prob)[4]) {
    static_assert(Traits::kKeyNTiles == Traits::kProbRegs, "the 4 score quads of a row pair fill one k32 A fragment");
    prob[0] = mma_e4m3::pack_e4m3x4(s[0][0], s[0][1], s[1][0], s[1][1]);
    prob[1] = mma_e4m3::pack_e4m3x4(s[0][2], s[0][3], s[1][2], s[1][3]);
    prob[2] = mma_e4m3::pack_e4m3x4(s[2][0], s[2][1], s[3][0], s[3][1]);
    prob[3] = mma_e4m3::pack_e4m3x4(s[2][2], s[2][3], s[3][2], s[3][3]);
}

// The online softmax step on the exchanged, unscaled scores s: `scale` (softmax scale x log2 e x
// q_scale x k_scale, > 0) applied to the row maxima and in each exp2 argument; P = 2^(s x scale -
// max + kProbScaleLog2) rounded to e4m3 (RNE, saturating) into the A fragment of the P V wgmma:
// prob[0][0] = keys 2t, 2t+1, 8+2t, 9+2t of row g, [1] the same of row g + 8, [2], [3] those
// 16 keys later. Returns whether O must be multiplied by alpha before the next P V.
template <class Traits>
__device__ __forceinline__ bool softmax_e4m3_step(float (&s)[Traits::kKeyNTiles][4], float scale, RowState& state,
                                                  uint32_t (&prob)[Traits::kPvSteps][4], float (&alpha)[2]) {
    const bool rescale = exponentiate_scores<Traits, true>(s, scale, state, alpha, Traits::kProbScaleLog2);
    pack_prob_fragment<Traits>(s, prob[0]);
    return rescale;
}

// Issues the prologue's loads: Q (cp.async, one group; kCopyQ false: an empty group, Q is written
// by the caller before the first group_loads_landed), then, once the warpgroup's ring barriers
// are set up, K_0, K_1 and V_0 when those tiles exist; K_2 follows the exchange of S_0.
template <class Traits, bool kCopyQ>
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, int64_t first_token,
                                               int32_t tile_len, Streams<Traits>& streams) {
    if constexpr (kCopyQ)
        issue_q_rows<Traits, Traits::kElemBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    ptx::cp_async_commit();
    if (at.thread == 0) {
        for (int32_t slot = 0; slot < Traits::kRingSlots; ++slot)
            ptx::mbarrier_init(chunk_barrier<Traits>(map, slot, at.group), ValueTmaStream<Traits>::kIssuers);
        ptx::fence_mbarrier_init();
    }
    ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    if (issues_copies(at)) {
        if (g.num_tiles > 0) issue_key_chunk<Traits>(streams, p, g, map, 0, at);
        if (g.num_tiles > 1) issue_key_chunk<Traits>(streams, p, g, map, 2, at);
        if (g.num_tiles > 0) issue_value_chunk<Traits>(streams, p, g, map, 1, at);
    }
    ptx::converge_warp();
}

// Step j. kHasNext: tile j+1 exists (its scores are in flight); kIssueNext: tile j+2 exists.
template <class Traits, bool kHasNext, bool kIssueNext>
__device__ __forceinline__ void pipelined_step(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, Streams<Traits>& streams,
                                               float score_scale, float (&o)[Traits::kDimNTiles][4],
                                               RowState& state, LoopCarry<Traits>& carry, int32_t j,
                                               uint32_t (&prob)[Traits::kPvSteps][4],
                                               uint32_t (&prob_next)[Traits::kPvSteps][4]) {
    // V_j and K_j+2 were issued together a step ago: probed before the wait for the score
    // product, waited for after it.
    const bool v_landed = chunk_landed<Traits>(map, 2 * j + 1, at.group);
    const bool k_landed = !kIssueNext || chunk_landed<Traits>(map, 2 * j + 4, at.group);
    ptx::wgmma_wait<0>();  // Q K_j+1^T (issued at the end of the previous step) done
    ptx::pin_all(carry.s);
    if (!v_landed) wait_chunk<Traits>(map, 2 * j + 1, at.group);  // V_j
    if (!k_landed) wait_chunk<Traits>(map, 2 * j + 4, at.group);  // K_j+2
    if (!kHasNext) {
        // The last tile: keys past kv_end inside its last sub-tile must not carry a page's unused
        // slots into P V.
        const int32_t keys_valid = g.kv_end - j * Traits::kTileKeys;
        if (keys_valid % Traits::kPageKeys != 0) {
            zero_value_keys_from<Traits>(ring_chunk<Traits>(map, 2 * j + 1), keys_valid, at.group, at.thread);
            ptx::fence_proxy_async_shared();
        }
    }
    // The warpgroup meets: every thread of it has waited for Q K_j+1^T and P_j-1 V_j-1, and the
    // zeroed keys are visible.
    ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    issue_pv<Traits>(o, prob, ring_chunk<Traits>(map, 2 * j + 1), at.group);
    const int32_t parity = (j + 1) % Traits::kExchangeParities;  // of S_j+1's exchange buffer
    if (kHasNext) post_scores<Traits>(map.exchange, parity, at, carry.s);
    if (issues_copies(at)) {
        if (kHasNext) issue_value_chunk<Traits>(streams, p, g, map, 2 * j + 3, at);
        if (j + 3 < g.num_tiles) issue_key_chunk<Traits>(streams, p, g, map, 2 * j + 6, at);
    }
    ptx::converge_warp();
    if (kHasNext) {
        float scores[Traits::kKeyNTiles][4];
        collect_scores<Traits>(kUnitScale, map.exchange, parity, at, carry.s, scores);
        mask_scores<Traits>(g, j + 1, at.lane, scores);
        float alpha[2];
        const bool rescale = softmax_e4m3_step<Traits>(scores, score_scale, state, prob_next, alpha);
        if (kIssueNext) {
            // K_j+2 landed (top of the step).
            issue_scores<Traits>(map.q, ring_chunk<Traits>(map, 2 * j + 4), at.group, carry.s);
            ptx::wgmma_wait<1>();  // P_j V_j done; Q K_j+2^T may still run
        } else {
            ptx::wgmma_wait<0>();
        }
        ptx::pin_all(o);
        ptx::pin_all(prob);
        // With Q K_j+2^T in flight: a wait in this per-warp branch would break warpgroup
        // convergence of wgmma (kernels/hopper/NOTES.md, the rescale).
        if (rescale) rescale_output(o, alpha);
    } else {
        ptx::wgmma_wait<0>();
        ptx::pin_all(o);
    }
}

// The whole key loop of one warpgroup; o accumulates unnormalised P V (P x 2^8, V in codes),
// state holds the running max and this thread's partial row sums (of P x 2^8).
template <class Traits>
__device__ __forceinline__ void wgmma_e4m3pv_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                      const GroupPlace& at, const SharedMap& map,
                                                      Streams<Traits>& streams, float score_scale,
                                                      float (&o)[Traits::kDimNTiles][4], RowState& state) {
    LoopCarry<Traits> carry;
    const int32_t n = g.num_tiles;
    if (n > 0) {
        float scores[Traits::kKeyNTiles][4];
        float alpha[2];
        group_loads_landed<Traits, 0>(at.group);  // Q (cp.async)
        wait_chunk<Traits>(map, 0, at.group);     // K_0
        issue_scores<Traits>(map.q, ring_chunk<Traits>(map, 0), at.group, carry.s);
        ptx::wgmma_wait<0>();
        ptx::pin_all(carry.s);
        exchange_scores<Traits>(kUnitScale, map.exchange, 0, at, carry.s, scores);
        mask_scores<Traits>(g, 0, at.lane, scores);
        softmax_e4m3_step<Traits>(scores, score_scale, state, carry.prob[0], alpha);  // O is still 0: no rescale
    }
    if (n > 2 && issues_copies(at)) issue_key_chunk<Traits>(streams, p, g, map, 4, at);
    ptx::converge_warp();
    if (n > 1) {
        wait_chunk<Traits>(map, 2, at.group);  // K_1
        issue_scores<Traits>(map.q, ring_chunk<Traits>(map, 2), at.group, carry.s);
    }
    // Steps in pairs (P in set 0, then set 1), then the last one to three steps, whose waits differ.
    uint32_t (&even)[Traits::kPvSteps][4] = carry.prob[0];
    uint32_t (&odd)[Traits::kPvSteps][4] = carry.prob[1];
    int32_t j = 0;
    for (; j + 3 < n; j += 2) {
        pipelined_step<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, carry, j, even, odd);
        pipelined_step<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, carry, j + 1, odd, even);
    }
    if (n - j == 3) {
        pipelined_step<Traits, true, true>(p, g, at, map, streams, score_scale, o, state, carry, j, even, odd);
        pipelined_step<Traits, true, false>(p, g, at, map, streams, score_scale, o, state, carry, j + 1, odd, even);
        pipelined_step<Traits, false, false>(p, g, at, map, streams, score_scale, o, state, carry, j + 2, even, odd);
    } else if (n - j == 2) {
        pipelined_step<Traits, true, false>(p, g, at, map, streams, score_scale, o, state, carry, j, even, odd);
        pipelined_step<Traits, false, false>(p, g, at, map, streams, score_scale, o, state, carry, j + 1, odd, even);
    } else if (n - j == 1) {
        pipelined_step<Traits, false, false>(p, g, at, map, streams, score_scale, o, state, carry, j, even, odd);
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::hopper::e4m3pv
