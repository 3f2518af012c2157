// mainloop.cuh - the key loop of the Hopper-tier BF16 kernel for one warpgroup: per 32-key step,
// S = Q K^T over the warpgroup's 256 dims (16 wgmma m64n32k16 from shared memory), the
// partial-score exchange with the other warpgroup, the online softmax (exp2, O rescaled at every
// growth of a row maximum, as the mma tier) and O += P V (2 wgmma m64n256k16, P from registers).
//
// Software pipeline: step j enters with P_j and Q K_j+1^T in flight. It waits for Q K_j+1^T,
// issues P_j V_j (after a barrier of its own warpgroup), and while P V runs it posts its partial
// S_j+1, refills the ring, collects the partner's partial S_j+1 (the exchange is a one-way
// hand-off per warpgroup: neither waits for the other except for the scores it needs), runs the
// softmax of S_j+1 into the other P register set and issues Q K_j+2^T right behind P_j V_j, so
// the tensor cores do not idle through the next exchange. O is rescaled only after P_j V_j
// completes (no non-wgmma instruction redefines wgmma registers in flight: ptxas would serialize
// the wgmmas, and the build refuses that), with Q K_j+2^T still in flight: the rescale decision is
// per warp, so a wgmma wait inside it would have the warps of one warpgroup execute
// wgmma.wait_group at different instructions, which PTX does not allow (compute-sanitizer
// synccheck flags it). Q K_j+2^T is waited for at the start of step j+1, before its P V issue.
// Steps run in pairs (the two P sets) and the last ones are peeled so every wait has a fixed
// count.
//
// Ring (4 slots; chunk 2j = K_j, chunk 2j+1 = V_j, chunk c in slot c % 4), filled by TMA: per
// warpgroup one mbarrier per slot, chunk c completing phase c / 4 of its slot's barrier; lane 0 of
// each of the warpgroup's warps issues a quarter of every chunk's copies (KvTmaStream), and every
// thread waits on the barrier of a chunk before it reads it. Step j issues V_j+1 into V_j-1's
// slot and K_j+3 into K_j+1's slot right behind the P V issue and the post: the warpgroup
// barrier before the P V issue is reached by each of its threads only after waiting for
// Q K_j+1^T (this step) and P_j-1 V_j-1 (the step before), and only the warpgroup reads its half
// of a slot, so neither is read any more. K is prefetched two steps ahead, V one; V_j and K_j+2,
// issued together in step j-1, are probed without waiting before the wait for Q K_j+1^T and
// waited for right after it (commit b027f76: the probes' latency hides behind that wait, and no
// barrier wait sits between the softmax and the next score product any more; +0.5% on every
// case, +1.5% at TP4). The prologue issues Q (cp.async), K_0, K_1 and V_0, and K_2 once S_0 is
// exchanged (it takes K_0's slot). The last tile's V rows past kv_end are zeroed before its P V.
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_exchange.cuh"
#include "kernels/common/wgmma_loads.cuh"
#include "kernels/common/wgmma_products.cuh"
#include "kernels/common/wgmma_softmax.cuh"
#include "kernels/hopper/bf16_d512/loads.cuh"
#include "wideattn.h"

namespace wideattn::hopper::bf16 {

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
    SharedMap map;
    map.q = base + Plan::kQ;
    map.ring = base + Plan::kRing;
    map.exchange = base + Plan::kExchange;
    map.barriers = base + Plan::kBarriers;
    return map;
}

template <class Traits>
__device__ __forceinline__ uint32_t ring_chunk(const SharedMap& map, int32_t chunk) {
    return map.ring + (chunk % Traits::kRingSlots) * Traits::kChunkBytes;
}

// The mbarrier the warpgroup's copies of `chunk` complete on: one per ring slot and warpgroup,
// completing one phase per use of the slot, so chunk c is phase c / kRingSlots of its barrier.
template <class Traits>
__device__ __forceinline__ uint32_t chunk_barrier(const SharedMap& map, int32_t chunk, int32_t group) {
    return map.barriers + ((chunk % Traits::kRingSlots) * Traits::kWarpGroups + group) * Traits::kBarrierBytes;
}

// Waits until the warpgroup's half of `chunk` has landed (readable by its wgmmas).
template <class Traits>
__device__ __forceinline__ void wait_chunk(const SharedMap& map, int32_t chunk, int32_t group) {
    ptx::mbarrier_wait(chunk_barrier<Traits>(map, chunk, group),
                       static_cast<uint32_t>(chunk / Traits::kRingSlots) & 1u);
}

// Whether the warpgroup's half of `chunk` has landed, without waiting.
template <class Traits>
__device__ __forceinline__ bool chunk_landed(const SharedMap& map, int32_t chunk, int32_t group) {
    return ptx::mbarrier_test(chunk_barrier<Traits>(map, chunk, group),
                              static_cast<uint32_t>(chunk / Traits::kRingSlots) & 1u);
}

// The threads that issue a warpgroup's K/V copies: lane 0 of each warp, a quarter of every chunk
// each (KvTmaStream::issue), so no warp of the warpgroup lags the others by a whole chunk's issue.
__device__ __forceinline__ bool issues_copies(const GroupPlace& at) { return at.lane == 0; }

// This thread's share of the copies of ring chunk `chunk` from `stream` (K or V), issued.
template <class Traits>
__device__ __forceinline__ void issue_chunk(KvTmaStream<Traits>& stream, const wideattn_prefill_params& p,
                                            const int32_t* table_row, int32_t kv_end, const SharedMap& map,
                                            int32_t chunk, const GroupPlace& at) {
    stream.issue(p, table_row, kv_end, ring_chunk<Traits>(map, chunk), chunk_barrier<Traits>(map, chunk, at.group),
                 at.row_tile);
}

// Q K^T on bf16 Q and K, issued (committed, not waited for) into s.
template <class Traits>
__device__ __forceinline__ void issue_scores(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                             float (&s)[Traits::kKeyNTiles][4]) {
    issue_scores_over<Traits, Traits::kSlabsPerGroup, false>(q_shared, k_chunk, group, s);
}

// P V on bf16 P and V, issued (committed, not waited for) into o.
template <class Traits>
__device__ __forceinline__ void issue_pv(float (&o)[Traits::kDimNTiles][4],
                                         const uint32_t (&prob)[Traits::kPvSteps][4], uint32_t v_chunk,
                                         int32_t group) {
    issue_pv_as<Traits, false>(o, prob, v_chunk, group);
}

// Issues the prologue's loads: Q (cp.async, one group), then, once the warpgroup's ring barriers
// are set up, K_0, K_1 and V_0 when those tiles exist; K_2 follows the exchange of S_0 in
// wgmma_mainloop.
template <class Traits>
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, int64_t first_token,
                                               int32_t tile_len, KvTmaStream<Traits>& k_stream,
                                               KvTmaStream<Traits>& v_stream) {
    issue_q_rows<Traits, Traits::kElemBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    ptx::cp_async_commit();
    if (at.thread == 0) {
        for (int32_t slot = 0; slot < Traits::kRingSlots; ++slot)
            ptx::mbarrier_init(chunk_barrier<Traits>(map, slot, at.group), KvTmaStream<Traits>::kIssuers);
        ptx::fence_mbarrier_init();
    }
    ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    if (issues_copies(at)) {
        const int32_t* table_row = p.block_table + g.table_offset;
        if (g.num_tiles > 0) issue_chunk<Traits>(k_stream, p, table_row, g.kv_end, map, 0, at);
        if (g.num_tiles > 1) issue_chunk<Traits>(k_stream, p, table_row, g.kv_end, map, 2, at);
        if (g.num_tiles > 0) issue_chunk<Traits>(v_stream, p, table_row, g.kv_end, map, 1, at);
    }
    ptx::converge_warp();
}

// Step j. kHasNext: tile j+1 exists (its scores are in flight); kIssueNext: tile j+2 exists.
template <class Traits, bool kHasNext, bool kIssueNext>
__device__ __forceinline__ void pipelined_step(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map,
                                               KvTmaStream<Traits>& k_stream, KvTmaStream<Traits>& v_stream,
                                               float (&o)[Traits::kDimNTiles][4], RowState& state,
                                               LoopCarry<Traits>& carry, int32_t j,
                                               uint32_t (&prob)[Traits::kPvSteps][4],
                                               uint32_t (&prob_next)[Traits::kPvSteps][4]) {
    const int32_t* table_row = p.block_table + g.table_offset;
    // V_j and K_j+2 were issued together a step ago: probe both before the wait for the score
    // product, so the probes' latency hides behind it, and wait here for whichever has not landed.
    const bool v_landed = chunk_landed<Traits>(map, 2 * j + 1, at.group);
    const bool k_landed = !kIssueNext || chunk_landed<Traits>(map, 2 * j + 4, at.group);
    ptx::wgmma_wait<0>();  // Q K_j+1^T (issued at the end of the previous step) done
    ptx::pin_all(carry.s);
    if (!v_landed) wait_chunk<Traits>(map, 2 * j + 1, at.group);  // V_j
    if (!k_landed) wait_chunk<Traits>(map, 2 * j + 4, at.group);  // K_j+2
    if (!kHasNext) {
        // The last tile: rows past kv_end must not carry a page's unused slots into P V.
        const int32_t rows_valid = g.kv_end - j * Traits::kTileKeys;
        if (rows_valid < Traits::kTileKeys) {
            zero_value_rows_from<Traits>(ring_chunk<Traits>(map, 2 * j + 1), rows_valid, at.group, at.thread);
            ptx::fence_proxy_async_shared();
        }
    }
    // The warpgroup meets (not the block: the other warpgroup runs on until the exchange), so past
    // here every thread of it has waited for Q K_j+1^T and P_j-1 V_j-1, and the zeroed rows are
    // visible.
    ptx::named_barrier_sync(kGroupBarrierBase + at.group, Traits::kWarpGroupThreads);
    issue_pv<Traits>(o, prob, ring_chunk<Traits>(map, 2 * j + 1), at.group);
    // The refills are issued between posting this warpgroup's partial scores and collecting the
    // partner's, where a warpgroup that is ahead would otherwise wait.
    const int32_t parity = (j + 1) % Traits::kExchangeParities;  // of S_j+1's exchange buffer
    if (kHasNext) post_scores<Traits>(map.exchange, parity, at, carry.s);
    if (issues_copies(at)) {
        if (kHasNext) issue_chunk<Traits>(v_stream, p, table_row, g.kv_end, map, 2 * j + 3, at);
        if (j + 3 < g.num_tiles) issue_chunk<Traits>(k_stream, p, table_row, g.kv_end, map, 2 * j + 6, at);
    }
    ptx::converge_warp();
    float scores[Traits::kKeyNTiles][4];
    if (kHasNext) {
        collect_scores<Traits>(p.softmax_scale * kLog2e, map.exchange, parity, at, carry.s, scores);
    }
    if (kHasNext) {
        mask_scores<Traits>(g, j + 1, at.lane, scores);
        float alpha[2];
        const bool rescale = softmax_step<Traits>(scores, kUnitScale, state, prob_next, alpha);
        if (kIssueNext) {
            // K_j+2 landed (top of the step).
            issue_scores<Traits>(map.q, ring_chunk<Traits>(map, 2 * j + 4), at.group, carry.s);
            ptx::wgmma_wait<1>();  // P_j V_j done; Q K_j+2^T may still run
        } else {
            ptx::wgmma_wait<0>();
        }
        ptx::pin_all(o);
        ptx::pin_all(prob);
        if (rescale) rescale_output(o, alpha);
    } else {
        ptx::wgmma_wait<0>();
        ptx::pin_all(o);
    }
}

// The whole key loop of one warpgroup; o accumulates unnormalised P V, state holds the running
// max and this thread's partial row sums.
template <class Traits>
__device__ __forceinline__ void wgmma_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map,
                                               KvTmaStream<Traits>& k_stream, KvTmaStream<Traits>& v_stream,
                                               float (&o)[Traits::kDimNTiles][4], RowState& state) {
    const int32_t* table_row = p.block_table + g.table_offset;
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
        exchange_scores<Traits>(p.softmax_scale * kLog2e, map.exchange, 0, at, carry.s, scores);
        mask_scores<Traits>(g, 0, at.lane, scores);
        softmax_step<Traits>(scores, kUnitScale, state, carry.prob[0], alpha);  // O is still 0: no rescale
    }
    if (n > 2 && issues_copies(at)) issue_chunk<Traits>(k_stream, p, table_row, g.kv_end, map, 4, at);
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
        pipelined_step<Traits, true, true>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
        pipelined_step<Traits, true, true>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 1, odd, even);
    }
    if (n - j == 3) {
        pipelined_step<Traits, true, true>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
        pipelined_step<Traits, true, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 1, odd, even);
        pipelined_step<Traits, false, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 2, even, odd);
    } else if (n - j == 2) {
        pipelined_step<Traits, true, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
        pipelined_step<Traits, false, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 1, odd, even);
    } else if (n - j == 1) {
        pipelined_step<Traits, false, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::hopper::bf16
