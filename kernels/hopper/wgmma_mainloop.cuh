// wgmma_mainloop.cuh - the key loop of the Hopper-tier kernel for one warpgroup: per 32-key
// step, S = Q K^T over the warpgroup's 256 dims (16 wgmma m64n32k16 from shared memory), the
// partial-score exchange with the other warpgroup, the online softmax (exp2, lazy rescale, as
// the mma tier) and O += P V (2 wgmma m64n256k16, P from registers).
//
// Software pipeline: step j enters with P_j and Q K_j+1^T in flight. It waits for Q K_j+1^T,
// issues P_j V_j (after a barrier of both warpgroups, so both score products were issued first),
// and while P V runs it exchanges S_j+1, refills the ring, runs the softmax of S_j+1 into the
// other P register set and issues Q K_j+2^T right behind P_j V_j, so the tensor cores do not
// idle through the next exchange. O is rescaled only after P_j V_j completes (no non-wgmma
// instruction redefines wgmma registers in flight: ptxas would serialize the wgmmas, and the
// build refuses that); Q K_j+2^T is waited for at the start of step j+1, before its P V issue,
// for the same reason. Steps run in pairs (the two P sets) and the last ones are peeled so every
// wait has a fixed count.
//
// Ring (4 slots; chunk 2j = K_j, chunk 2j+1 = V_j, chunk c in slot c % 4): step j issues V_j+1
// into V_j-1's slot as soon as its warpgroup has met after P_j-1 V_j-1 (the barrier for K_j+1),
// and K_j+3 into K_j+1's slot after the exchange (no thread reads K_j+1 any more): K is
// prefetched two steps ahead, V about one and a half. The prologue issues [Q, K_0], [K_1],
// [V_0], and [K_2] once S_0 is exchanged (K_2 takes K_0's slot); every thread commits one group
// per chunk in that order, so "all but the newest N groups" names the same chunks everywhere.
#pragma once

#include <cstdint>
#include <cuda_fp16.h>

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
};

constexpr int32_t kExchangeBarrier = 1;   // both warpgroups (named barrier ids; 0 is __syncthreads)
constexpr int32_t kGroupBarrierBase = 2;  // + warpgroup: its own loads have landed
constexpr int32_t kBlockLoadsBarrier = 4; // both warpgroups: loads landed, score products issued

// Waits for this thread's groups older than the newest kPending, publishes them to the async
// proxy and meets the rest of the warpgroup: the warpgroup's chunks are then readable by wgmma.
template <int kPending>
__device__ __forceinline__ void group_loads_landed(int32_t group) {
    mma::cp_async_wait<kPending>();
    fence_proxy_async_shared();
    mma::named_barrier_sync(kGroupBarrierBase + group, Wt::kWarpGroupThreads);
}

// As group_loads_landed, met by both warpgroups.
template <int kPending>
__device__ __forceinline__ void block_loads_landed() {
    mma::cp_async_wait<kPending>();
    fence_proxy_async_shared();
    mma::named_barrier_sync(kBlockLoadsBarrier, Wt::kThreads);
}

// Own + partner partial scores (bitwise identical in both warpgroups) times `scale` (the
// softmax scale in log2 units, times any dequantisation scales), into `scores` (the wgmma accumulator `s` is only read: ptxas serializes wgmma when
// accumulator registers are redefined while another wgmma is in flight).
__device__ __forceinline__ void exchange_scores(float scale, uint32_t exchange, int32_t parity, const GroupPlace& at,
                                                const float (&s)[Wt::kKeyNTiles][4],
                                                float (&scores)[Wt::kKeyNTiles][4]) {
    constexpr int32_t kQuadBytes = Wt::kWarpGroupThreads * Wt::kVecBytes;
    const uint32_t own = exchange + (parity * Wt::kWarpGroups + at.group) * Wt::kExchangeTileBytes +
                         at.thread * Wt::kVecBytes;
    const uint32_t other = exchange + (parity * Wt::kWarpGroups + (1 - at.group)) * Wt::kExchangeTileBytes +
                           at.thread * Wt::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
        mma::store_shared_f32x4(own + n * kQuadBytes, s[n][0], s[n][1], s[n][2], s[n][3]);
    mma::named_barrier_sync(kExchangeBarrier, Wt::kThreads);
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n) {
        const float4 partner = mma::load_shared_f32x4(other + n * kQuadBytes);
        scores[n][0] = (s[n][0] + partner.x) * scale;
        scores[n][1] = (s[n][1] + partner.y) * scale;
        scores[n][2] = (s[n][2] + partner.z) * scale;
        scores[n][3] = (s[n][3] + partner.w) * scale;
    }
}

// Bottom-right causal mask and the kv_end limit for key tile `tile`.
__device__ __forceinline__ void mask_scores(const mma::BlockGeometry& g, int32_t tile, int32_t lane,
                                            float (&s)[Wt::kKeyNTiles][4]) {
    mma::mask_tile_scores<Wt::kTileKeys, Wt::kAccumN>(g, tile, lane, s);
}

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
template <class PackPair = PackBf16>
__device__ __forceinline__ bool softmax_step(float (&s)[Wt::kKeyNTiles][4], mma::RowState& state,
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
        tile_max[r] = m;
    }
    const bool rescale = mma::raise_max_if_grown<Wt>(tile_max, state, alpha);
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r];
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            s[n][e] = mma::fast_exp2(s[n][e] - base[e / 2]);
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

// Issues the prologue's loads (Q and the first chunks) as the first three groups the loop
// expects; the fourth (K_2) follows the exchange of S_0 in wgmma_mainloop.
__device__ __forceinline__ void issue_prologue(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map, int64_t first_token,
                                               int32_t tile_len, KvTileStream& k_stream, KvTileStream& v_stream) {
    const int32_t* table_row = p.block_table + g.table_offset;
    issue_q_rows<Wt::kElemBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    k_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 0));
    mma::cp_async_commit();
    if (g.num_tiles > 1) k_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 2));
    mma::cp_async_commit();
    v_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 1));
    mma::cp_async_commit();
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
                                               const GroupPlace& at, const SharedMap& map, KvTileStream& k_stream,
                                               KvTileStream& v_stream, float (&o)[Wt::kDimNTiles][4],
                                               mma::RowState& state, LoopCarry& carry, int32_t j,
                                               uint32_t (&prob)[Wt::kPvSteps][4],
                                               uint32_t (&prob_next)[Wt::kPvSteps][4]) {
    const int32_t* table_row = p.block_table + g.table_offset;
    wgmma_wait<0>();  // Q K_j+1^T (issued at the end of the previous step) done
    pin_all(carry.s);
    block_loads_landed<1>();  // V_j (pending: K_j+2); both warpgroups issued Q K_j+1^T
    issue_pv(o, prob, ring_chunk(map, 2 * j + 1), at.group);
    float scores[Wt::kKeyNTiles][4];
    if (kHasNext) {
        exchange_scores(p.softmax_scale * mma::kLog2e, map.exchange, (j + 1) % Wt::kExchangeParities, at, carry.s,
                        scores);
    }
    // After the exchange no thread reads K_j+1, and every thread has waited for P_j-1 V_j-1.
    if (kHasNext) v_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 2 * j + 3));
    mma::cp_async_commit();
    if (j + 3 < g.num_tiles) k_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 2 * j + 6));
    mma::cp_async_commit();
    if (kHasNext) {
        mask_scores(g, j + 1, at.lane, scores);
        float alpha[2];
        const bool rescale = softmax_step(scores, state, prob_next, alpha);
        if (kIssueNext) {
            group_loads_landed<2>(at.group);  // K_j+2 (pending: V_j+1, K_j+3)
            issue_scores(map.q, ring_chunk(map, 2 * j + 4), at.group, carry.s);
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
                                               KvTileStream& k_stream, KvTileStream& v_stream,
                                               float (&o)[Wt::kDimNTiles][4], mma::RowState& state) {
    const int32_t* table_row = p.block_table + g.table_offset;
    LoopCarry carry;
    const int32_t n = g.num_tiles;
    if (n > 0) {
        float scores[Wt::kKeyNTiles][4];
        float alpha[2];
        group_loads_landed<2>(at.group);  // Q, K_0 (pending: K_1, V_0)
        issue_scores(map.q, ring_chunk(map, 0), at.group, carry.s);
        wgmma_wait<0>();
        pin_all(carry.s);
        exchange_scores(p.softmax_scale * mma::kLog2e, map.exchange, 0, at, carry.s, scores);
        mask_scores(g, 0, at.lane, scores);
        softmax_step(scores, state, carry.prob[0], alpha);  // O is still 0: no rescale
    }
    if (n > 2) k_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 4));
    mma::cp_async_commit();
    if (n > 1) {
        group_loads_landed<2>(at.group);  // K_1 (pending: V_0, K_2)
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
