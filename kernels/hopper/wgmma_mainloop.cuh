// wgmma_mainloop.cuh - the key loop of the Hopper-tier kernel for one warpgroup: per 32-key
// step, S = Q K^T over the warpgroup's 256 dims (16 wgmma m64n32k16 from shared memory), the
// partial-score exchange with the other warpgroup, the online softmax (exp2, lazy rescale, as
// the mma tier) and O += P V (2 wgmma m64n256k16, P from registers).
//
// Software pipeline: step j enters with P_j and Q K_j+1^T in flight. It waits for Q K_j+1^T,
// issues P_j V_j (after a barrier of its own warpgroup), and while P V runs it posts its partial
// S_j+1, refills the ring, collects the partner's partial S_j+1 (the bf16 kernel's exchange is a
// one-way hand-off per warpgroup: neither waits for the other except for the scores it needs),
// runs the softmax of S_j+1 into the other P register set and issues Q K_j+2^T right behind
// P_j V_j, so the tensor cores do not idle through the next exchange. O is rescaled only after P_j V_j completes (no non-wgmma
// instruction redefines wgmma registers in flight: ptxas would serialize the wgmmas, and the
// build refuses that); Q K_j+2^T is waited for at the start of step j+1, before its P V issue,
// for the same reason. Steps run in pairs (the two P sets) and the last ones are peeled so every
// wait has a fixed count.
//
// Ring (4 slots; chunk 2j = K_j, chunk 2j+1 = V_j, chunk c in slot c % 4), filled by TMA: per
// warpgroup one mbarrier per slot, chunk c completing phase c / 4 of its slot's barrier; lane 0 of
// each of the warpgroup's warps issues a quarter of every chunk's copies (KvTmaStream), and every
// thread waits on the barrier of a chunk before it reads it. Step j issues V_j+1 into V_j-1's
// slot and K_j+3 into K_j+1's slot right behind the P V issue and the post: the warpgroup
// barrier before the P V issue is reached by each of its threads only after waiting for
// Q K_j+1^T (this step) and P_j-1 V_j-1 (the step before), and only the warpgroup reads its half
// of a slot, so neither is read any more. K
// is prefetched two steps ahead, V one; V_j and K_j+2, issued together in step j-1, are probed
// without waiting before the wait for Q K_j+1^T and waited for right after it (session 7: the
// probes' latency hides behind that wait, and no barrier wait sits between the softmax and the
// next score product any more; +0.5% on every case, +1.5% at TP4). The prologue issues Q
// (cp.async), K_0, K_1 and V_0, and K_2 once S_0 is exchanged (it takes K_0's slot). The last
// tile's V rows past kv_end are zeroed before its P V.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>

#include "kernels/common/kv_tensor_map.h"
#include "kernels/hopper/wgmma_loads.cuh"
#include "kernels/hopper/wgmma_primitives.cuh"
#include "kernels/mma/mma_block_geometry.cuh"
#include "kernels/mma/mma_mainloop.cuh"

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
__device__ __forceinline__ GroupPlace group_place() {
    constexpr uint32_t kFullMask = 0xffffffffu;
    GroupPlace at;
    at.group = __shfl_sync(kFullMask, static_cast<int32_t>(threadIdx.x / Wt::kWarpGroupThreads), 0);
    at.thread = threadIdx.x % Wt::kWarpGroupThreads;
    at.row_tile = at.thread / Wt::kWarpSize;
    at.lane = threadIdx.x % Wt::kWarpSize;
    return at;
}

// The dynamic shared memory's base rounded up to kSmemAlign (swizzle atoms need 1024 bytes).
__device__ __forceinline__ uint32_t aligned_shared_base(const void* smem) {
    return (mma::shared_address(smem) + Wt::kSmemAlign - 1) & ~static_cast<uint32_t>(Wt::kSmemAlign - 1);
}

using mma::zero_output;

// Shared-memory map of one block (offsets from the 1024-byte aligned base).
struct SharedMap {
    uint32_t q;
    uint32_t ring;
    uint32_t exchange;
    uint32_t barriers;  // kRingSlots x kWarpGroups mbarriers of the K/V ring (bf16 kernel)
};

constexpr int32_t kExchangeBarrier = 1;   // both warpgroups (named barrier ids; 0 is __syncthreads)
constexpr int32_t kGroupBarrierBase = 2;  // + warpgroup: ring barriers set up, Q landed, ring slots free
constexpr int32_t kBlockLoadsBarrier = 4; // both warpgroups (the 8-bit kernel): fp16 V written, score products issued
constexpr int32_t kPostedScoresBase = 5;  // + parity x kWarpGroups + warpgroup (the bf16 kernel): partial scores posted
constexpr int32_t kHardwareBarriers = 16;
static_assert(kPostedScoresBase + Wt::kExchangeParities * Wt::kWarpGroups <= kHardwareBarriers,
              "the posted-scores barriers fit in the 16 hardware barriers");

// The barrier on which warpgroup `group` signals its partial scores of exchange parity `parity`.
__device__ __forceinline__ uint32_t posted_scores_barrier(int32_t group, int32_t parity) {
    return kPostedScoresBase + parity * Wt::kWarpGroups + group;
}

// Waits for this thread's groups older than the newest kPending, publishes them to the async
// proxy and meets the rest of the warpgroup: the warpgroup's chunks are then readable by wgmma.
template <int kPending>
__device__ __forceinline__ void group_loads_landed(int32_t group) {
    mma::cp_async_wait<kPending>();
    fence_proxy_async_shared();
    mma::named_barrier_sync(kGroupBarrierBase + group, Wt::kWarpGroupThreads);
}

// This thread's partial scores into the exchange buffer of `parity` (the wgmma accumulator `s`
// is only read: ptxas serializes wgmma when accumulator registers are redefined while another
// wgmma is in flight).
__device__ __forceinline__ void store_partial_scores(uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                     const float (&s)[Wt::kKeyNTiles][4]) {
    constexpr int32_t kQuadBytes = Wt::kWarpGroupThreads * Wt::kVecBytes;
    const uint32_t own = exchange + (parity * Wt::kWarpGroups + at.group) * Wt::kExchangeTileBytes +
                         at.thread * Wt::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
        mma::store_shared_f32x4(own + n * kQuadBytes, s[n][0], s[n][1], s[n][2], s[n][3]);
}

// Own + partner partial scores (bitwise identical in both warpgroups: the same two addends)
// times `scale` (the softmax scale in log2 units, times any dequantisation scales; kUnitScale
// when softmax_step applies it), into `scores`; the partner's are in the buffer of `parity`.
__device__ __forceinline__ void add_partner_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                   const float (&s)[Wt::kKeyNTiles][4],
                                                   float (&scores)[Wt::kKeyNTiles][4]) {
    constexpr int32_t kQuadBytes = Wt::kWarpGroupThreads * Wt::kVecBytes;
    const uint32_t other = exchange + (parity * Wt::kWarpGroups + (1 - at.group)) * Wt::kExchangeTileBytes +
                           at.thread * Wt::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n) {
        const float4 partner = mma::load_shared_f32x4(other + n * kQuadBytes);
        scores[n][0] = (s[n][0] + partner.x) * scale;
        scores[n][1] = (s[n][1] + partner.y) * scale;
        scores[n][2] = (s[n][2] + partner.z) * scale;
        scores[n][3] = (s[n][3] + partner.w) * scale;
    }
}

// The exchange as one rendezvous of both warpgroups (the 8-bit kernel's steps and both kernels'
// first tile).
__device__ __forceinline__ void exchange_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                const float (&s)[Wt::kKeyNTiles][4],
                                                float (&scores)[Wt::kKeyNTiles][4]) {
    store_partial_scores(exchange, parity, at, s);
    mma::named_barrier_sync(kExchangeBarrier, Wt::kThreads);
    add_partner_scores(scale, exchange, parity, at, s, scores);
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
__device__ __forceinline__ void post_scores(uint32_t exchange, int32_t parity, const GroupPlace& at,
                                            const float (&s)[Wt::kKeyNTiles][4]) {
    store_partial_scores(exchange, parity, at, s);
    mma::named_barrier_arrive(posted_scores_barrier(at.group, parity), Wt::kThreads);
}

__device__ __forceinline__ void collect_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                               const float (&s)[Wt::kKeyNTiles][4],
                                               float (&scores)[Wt::kKeyNTiles][4]) {
    mma::named_barrier_sync(posted_scores_barrier(1 - at.group, parity), Wt::kThreads);
    add_partner_scores(scale, exchange, parity, at, s, scores);
}

// Bottom-right causal mask and the kv_end limit for key tile `tile`.
__device__ __forceinline__ void mask_scores(const mma::BlockGeometry& g, int32_t tile, int32_t lane,
                                            float (&s)[Wt::kKeyNTiles][4]) {
    mma::mask_tile_scores<Wt::kTileKeys, Wt::kAccumN>(g, tile, lane, s);
}

// The scale argument of exchange_scores or softmax_step when the other one applies the scale.
constexpr float kUnitScale = 1.0f;

// P fragments as bf16 pairs (the bf16 kernel) or fp16 pairs (the e4m3 kernel's fp16 P V).
struct PackBf16 {
    __device__ static __forceinline__ uint32_t pack(float low, float high) { return mma::pack_bf16x2(low, high); }
};
struct PackF16 {
    __device__ static __forceinline__ uint32_t pack(float low, float high) {
        const __half2 packed = __floats2half2_rn(low, high);
        return *reinterpret_cast<const uint32_t*>(&packed);
    }
};

// Online softmax with lazy rescale (warp-uniform decision; both warpgroups decide alike since
// their scores are bitwise equal): updates the running max and sums, writes P as the A
// fragments of the P V wgmmas, and returns whether O must be multiplied by alpha (row g, row
// g + 8) before the next P V; the caller does that once no wgmma writes O any more.
// kFoldScale: s is unscaled and `scale` (> 0) is applied here, the row max before scaling (for
// scale > 0, max(s) * scale rounds to max(s * scale)) and each exp2 argument as one fused
// s * scale - max (the 8-bit kernel: 2% faster there, session 7); otherwise s is already scaled
// by exchange_scores and `scale` is unused (the bf16 kernel: folding measured 0.7% slower).
template <class PackPair = PackBf16, bool kFoldScale = false>
__device__ __forceinline__ bool softmax_step(float (&s)[Wt::kKeyNTiles][4], float scale, mma::RowState& state,
                                             uint32_t (&prob)[Wt::kPvSteps][4], float (&alpha)[2]) {
    constexpr uint32_t kFullMask = 0xffffffffu;
    float tile_max[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float m = -INFINITY;
#pragma unroll
        for (int32_t n = 0; n < Wt::kKeyNTiles; ++n) m = fmaxf(m, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        tile_max[r] = kFoldScale ? m * scale : m;
    }
    const bool rescale = mma::raise_max_if_grown<Wt>(tile_max, state, alpha);
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r];
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            s[n][e] = mma::fast_exp2(kFoldScale ? fmaf(s[n][e], scale, -base[e / 2]) : s[n][e] - base[e / 2]);
            state.sum[e / 2] += s[n][e];
        }
#pragma unroll
    for (int32_t kk = 0; kk < Wt::kPvSteps; ++kk) {
        prob[kk][0] = PackPair::pack(s[2 * kk][0], s[2 * kk][1]);
        prob[kk][1] = PackPair::pack(s[2 * kk][2], s[2 * kk][3]);
        prob[kk][2] = PackPair::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        prob[kk][3] = PackPair::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    return rescale;
}

using mma::rescale_output;

__device__ __forceinline__ uint32_t ring_chunk(const SharedMap& map, int32_t chunk) {
    return map.ring + (chunk % Wt::kRingSlots) * Wt::kChunkBytes;
}

// The mbarrier the warpgroup's copies of `chunk` complete on: one per ring slot and warpgroup,
// completing one phase per use of the slot, so chunk c is phase c / kRingSlots of its barrier.
__device__ __forceinline__ uint32_t chunk_barrier(const SharedMap& map, int32_t chunk, int32_t group) {
    return map.barriers + ((chunk % Wt::kRingSlots) * Wt::kWarpGroups + group) * Wt::kBarrierBytes;
}

// Waits until the warpgroup's half of `chunk` has landed (readable by its wgmmas).
__device__ __forceinline__ void wait_chunk(const SharedMap& map, int32_t chunk, int32_t group) {
    mbarrier_wait(chunk_barrier(map, chunk, group), static_cast<uint32_t>(chunk / Wt::kRingSlots) & 1u);
}

// Whether the warpgroup's half of `chunk` has landed, without waiting.
__device__ __forceinline__ bool chunk_landed(const SharedMap& map, int32_t chunk, int32_t group) {
    return mbarrier_test(chunk_barrier(map, chunk, group), static_cast<uint32_t>(chunk / Wt::kRingSlots) & 1u);
}

// The threads that issue a warpgroup's K/V copies: lane 0 of each warp, a quarter of every chunk
// each (KvTmaStream::issue), so no warp of the warpgroup lags the others by a whole chunk's issue.
__device__ __forceinline__ bool issues_copies(const GroupPlace& at) { return at.lane == 0; }

// This thread's share of the copies of ring chunk `chunk` from `stream` (K or V), issued.
__device__ __forceinline__ void issue_chunk(KvTmaStream& stream, const wideattn_prefill_params& p,
                                            const int32_t* table_row, int32_t kv_end, const SharedMap& map,
                                            int32_t chunk, const GroupPlace& at) {
    stream.issue(p, table_row, kv_end, ring_chunk(map, chunk), chunk_barrier(map, chunk, at.group), at.row_tile);
}

// Q K^T issued (committed, not waited for) into s, over the warpgroup's kSlabs 128-byte slabs of
// Q and K in 32-byte steps: bf16 (k16 per wgmma) or, kCodes, e4m3 codes (k32 per wgmma).
template <int32_t kSlabs, bool kCodes>
__device__ __forceinline__ void issue_scores_over(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                                  float (&s)[Wt::kKeyNTiles][4]) {
    wgmma_fence();
#pragma unroll
    for (int32_t step = 0; step < kSlabs * kStepsPerSlab; ++step) {
        const ScoreDescriptors d = score_step_descriptors<kSlabs>(q_shared, k_chunk, group, step);
        if constexpr (kCodes)
            wgmma_m64n32k32_e4m3_ss(s, d.q, d.k, step > 0 ? 1 : 0);
        else
            wgmma_m64n32k16_ss(s, d.q, d.k, step > 0 ? 1 : 0);
    }
    wgmma_commit();
}

__device__ __forceinline__ void issue_scores(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                             float (&s)[Wt::kKeyNTiles][4]) {
    static_assert(Wt::kSlabsPerGroup * kStepsPerSlab == Wt::kQkSteps, "bf16 score steps");
    issue_scores_over<Wt::kSlabsPerGroup, false>(q_shared, k_chunk, group, s);
}

// P V issued (committed, not waited for) into o: bf16 P and V, or (kHalf) fp16.
template <bool kHalf>
__device__ __forceinline__ void issue_pv_as(float (&o)[Wt::kDimNTiles][4], const uint32_t (&prob)[Wt::kPvSteps][4],
                                            uint32_t v_chunk, int32_t group) {
    wgmma_fence();
#pragma unroll
    for (int32_t kk = 0; kk < Wt::kPvSteps; ++kk) {
        const SmemDescriptor b = pv_step_descriptor(v_chunk, group, kk);
        if constexpr (kHalf)
            wgmma_m64n256k16_f16_rs(o, prob[kk], b);
        else
            wgmma_m64n256k16_rs(o, prob[kk], b);
    }
    wgmma_commit();
}

__device__ __forceinline__ void issue_pv(float (&o)[Wt::kDimNTiles][4], const uint32_t (&prob)[Wt::kPvSteps][4],
                                         uint32_t v_chunk, int32_t group) {
    issue_pv_as<false>(o, prob, v_chunk, group);
}

template <typename T, int32_t kRows, int32_t kCols>
__device__ __forceinline__ void pin_all(T (&values)[kRows][kCols]) {
#pragma unroll
    for (int32_t r = 0; r < kRows; ++r)
#pragma unroll
        for (int32_t c = 0; c < kCols; ++c) pin(values[r][c]);
}

// Issues the prologue's loads: Q (cp.async, one group), then, once the warpgroup's ring barriers
// are set up, K_0, K_1 and V_0 when those tiles exist; K_2 follows the exchange of S_0 in
// wgmma_mainloop.
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, int64_t first_token,
                                               int32_t tile_len, KvTmaStream& k_stream, KvTmaStream& v_stream) {
    issue_q_rows<Wt::kElemBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    mma::cp_async_commit();
    if (at.thread == 0) {
        for (int32_t slot = 0; slot < Wt::kRingSlots; ++slot)
            mbarrier_init(chunk_barrier(map, slot, at.group), KvTmaStream::kIssuers);
        fence_mbarrier_init();
    }
    mma::named_barrier_sync(kGroupBarrierBase + at.group, Wt::kWarpGroupThreads);
    if (!issues_copies(at)) return;
    const int32_t* table_row = p.block_table + g.table_offset;
    if (g.num_tiles > 0) issue_chunk(k_stream, p, table_row, g.kv_end, map, 0, at);
    if (g.num_tiles > 1) issue_chunk(k_stream, p, table_row, g.kv_end, map, 2, at);
    if (g.num_tiles > 0) issue_chunk(v_stream, p, table_row, g.kv_end, map, 1, at);
}

// Loop state carried between steps: Q K_j+1^T, in flight at the start of step j, and P in two
// register sets used alternately (P_j is read by the P V in flight while P_j+1 is written).
struct LoopCarry {
    float s[Wt::kKeyNTiles][4];
    uint32_t prob[2][Wt::kPvSteps][4];
};

// Step j. kHasNext: tile j+1 exists (its scores are in flight); kIssueNext: tile j+2 exists.
template <bool kHasNext, bool kIssueNext>
__device__ __forceinline__ void pipelined_step(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, KvTmaStream& k_stream,
                                               KvTmaStream& v_stream, float (&o)[Wt::kDimNTiles][4],
                                               mma::RowState& state, LoopCarry& carry, int32_t j,
                                               uint32_t (&prob)[Wt::kPvSteps][4],
                                               uint32_t (&prob_next)[Wt::kPvSteps][4]) {
    const int32_t* table_row = p.block_table + g.table_offset;
    // V_j and K_j+2 were issued together a step ago: probe both before the wait for the score
    // product, so the probes' latency hides behind it, and wait here for whichever has not landed.
    const bool v_landed = chunk_landed(map, 2 * j + 1, at.group);
    const bool k_landed = !kIssueNext || chunk_landed(map, 2 * j + 4, at.group);
    wgmma_wait<0>();  // Q K_j+1^T (issued at the end of the previous step) done
    pin_all(carry.s);
    if (!v_landed) wait_chunk(map, 2 * j + 1, at.group);  // V_j
    if (!k_landed) wait_chunk(map, 2 * j + 4, at.group);  // K_j+2
    if (!kHasNext) {
        // The last tile: rows past kv_end must not carry a page's unused slots into P V.
        const int32_t rows_valid = g.kv_end - j * Wt::kTileKeys;
        if (rows_valid < Wt::kTileKeys) {
            zero_value_rows_from(ring_chunk(map, 2 * j + 1), rows_valid, at.group, at.thread);
            fence_proxy_async_shared();
        }
    }
    // The warpgroup meets (not the block: the other warpgroup runs on until the exchange), so past
    // here every thread of it has waited for Q K_j+1^T and P_j-1 V_j-1, and the zeroed rows are
    // visible.
    mma::named_barrier_sync(kGroupBarrierBase + at.group, Wt::kWarpGroupThreads);
    issue_pv(o, prob, ring_chunk(map, 2 * j + 1), at.group);
    // The refills are issued between posting this warpgroup's partial scores and collecting the
    // partner's, where a warpgroup that is ahead would otherwise wait.
    const int32_t parity = (j + 1) % Wt::kExchangeParities;  // of S_j+1's exchange buffer
    if (kHasNext) post_scores(map.exchange, parity, at, carry.s);
    if (issues_copies(at)) {
        if (kHasNext) issue_chunk(v_stream, p, table_row, g.kv_end, map, 2 * j + 3, at);
        if (j + 3 < g.num_tiles) issue_chunk(k_stream, p, table_row, g.kv_end, map, 2 * j + 6, at);
    }
    float scores[Wt::kKeyNTiles][4];
    if (kHasNext) {
        collect_scores(p.softmax_scale * mma::kLog2e, map.exchange, parity, at, carry.s, scores);
    }
    if (kHasNext) {
        mask_scores(g, j + 1, at.lane, scores);
        float alpha[2];
        const bool rescale = softmax_step(scores, kUnitScale, state, prob_next, alpha);
        if (kIssueNext) {
            issue_scores(map.q, ring_chunk(map, 2 * j + 4), at.group, carry.s);  // K_j+2 landed (top of the step)
            wgmma_wait<1>();  // P_j V_j done; Q K_j+2^T may still run
        } else {
            wgmma_wait<0>();
        }
        pin_all(o);
        pin_all(prob);
        if (rescale) {
            wgmma_wait<0>();
            pin_all(o);
            rescale_output(o, alpha);
        }
    } else {
        wgmma_wait<0>();
        pin_all(o);
    }
}

// The whole key loop of one warpgroup; o accumulates unnormalised P V, state holds the running
// max and this thread's partial row sums.
__device__ __forceinline__ void wgmma_mainloop(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map,
                                               KvTmaStream& k_stream, KvTmaStream& v_stream,
                                               float (&o)[Wt::kDimNTiles][4], mma::RowState& state) {
    const int32_t* table_row = p.block_table + g.table_offset;
    LoopCarry carry;
    const int32_t n = g.num_tiles;
    if (n > 0) {
        float scores[Wt::kKeyNTiles][4];
        float alpha[2];
        group_loads_landed<0>(at.group);  // Q (cp.async)
        wait_chunk(map, 0, at.group);     // K_0
        issue_scores(map.q, ring_chunk(map, 0), at.group, carry.s);
        wgmma_wait<0>();
        pin_all(carry.s);
        exchange_scores(p.softmax_scale * mma::kLog2e, map.exchange, 0, at, carry.s, scores);
        mask_scores(g, 0, at.lane, scores);
        softmax_step(scores, kUnitScale, state, carry.prob[0], alpha);  // O is still 0: no rescale
    }
    if (n > 2 && issues_copies(at)) issue_chunk(k_stream, p, table_row, g.kv_end, map, 4, at);
    if (n > 1) {
        wait_chunk(map, 2, at.group);  // K_1
        issue_scores(map.q, ring_chunk(map, 2), at.group, carry.s);
    }
    // Steps in pairs (P in set 0, then set 1), then the last one to three steps, whose waits differ.
    uint32_t (&even)[Wt::kPvSteps][4] = carry.prob[0];
    uint32_t (&odd)[Wt::kPvSteps][4] = carry.prob[1];
    int32_t j = 0;
    for (; j + 3 < n; j += 2) {
        pipelined_step<true, true>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
        pipelined_step<true, true>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 1, odd, even);
    }
    if (n - j == 3) {
        pipelined_step<true, true>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
        pipelined_step<true, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 1, odd, even);
        pipelined_step<false, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 2, even, odd);
    } else if (n - j == 2) {
        pipelined_step<true, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
        pipelined_step<false, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j + 1, odd, even);
    } else if (n - j == 1) {
        pipelined_step<false, false>(p, g, at, map, k_stream, v_stream, o, state, carry, j, even, odd);
    }
    wgmma_wait<0>();
    pin_all(o);
    mma::cp_async_wait<0>();
}

}  // namespace wideattn::hopper
