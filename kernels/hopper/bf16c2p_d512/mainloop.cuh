// mainloop.cuh - the key loops of wgmma_bf16c2p_d512's two consumer warpgroups.
//
// Home (row group c of CTA c): per 32-key step S = Q K^T over all 512 dims (32 wgmma m64n32k16
// from shared memory, the even and odd 16-dim steps into two accumulators whose sum is S), scaled
// to log2 units, masked, the online softmax (exp2, O rescaled at every growth of a row maximum) and
// O += P V over the CTA's dims (2 wgmma m64n256k16, P from registers); after each softmax its P and
// rescale factors go to the partner CTA's fed warpgroup (exchange.cuh). Step j enters with P_j in
// registers and Q K_j+1^T in flight; it waits for Q K_j+1^T, issues P_j V_j, then runs the softmax
// of S_j+1 into the other P register set with Q K_j+2^T issued in quarters between its stages,
// posts P_j+1, waits for P_j V_j and rescales O (every wgmma wait is reached by all four warps of
// the warpgroup at the same instruction).
//
// Fed (row group 1 - c of CTA c): per step it waits for its P_j-1 V_j-1, reads the partner's P_j
// and rescale factors, rescales O when a factor differs from 1 (the home warpgroup's rescale
// decision: the factors are 1 exactly where it leaves O as it is), and issues P_j V_j over the
// CTA's dims with P from registers. Its O therefore takes the home warpgroup's arithmetic on the
// same values in the same order.
//
// Both read the CTA's V tiles (a slot is released by the warps of both); only the home warpgroup
// reads K. The last tile's V rows past kv_end are zeroed by both warpgroups, which meet before
// either P V reads the tile.
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
#include "kernels/hopper/bf16c2_d512/loads.cuh"
#include "kernels/hopper/bf16c2p_d512/exchange.cuh"
#include "kernels/hopper/bf16c2p_d512/loads.cuh"
#include "wideattn.h"

namespace wideattn::hopper::bf16c2p {

// Named barrier ids of this kernel (0 is __syncthreads): kConsumersBarrier for both consumer
// warpgroups (the last tile's zeroed V rows), kGroupBarrierBase + kHomeGroup (wgmma_block.cuh's
// group_loads_landed: the home row group's Q landed).
constexpr int32_t kConsumersBarrier = 1;
static_assert(kConsumersBarrier < kGroupBarrierBase, "the barrier ids differ");

// What a consumer warpgroup works on.
template <class Traits>
struct Consumer {
    GroupPlace at;        // group: kHomeGroup or kFedGroup
    int32_t thread;       // index over both consumer warpgroups
    PartnerMap<Traits> partner;
};

// The operand slabs start at the tile's (or Q's) first slab.
constexpr int32_t kFirstSlab = 0;

// The home warpgroup issues a score product in this many parts with softmax work between them:
// one part ahead of each of home_softmax's four stages.
constexpr int32_t kScoreQuarters = 4;

template <class Traits>
__device__ __forceinline__ void issue_pv(float (&o)[Traits::kDimNTiles][4],
                                         const uint32_t (&prob)[Traits::kPvSteps][4], uint32_t v) {
    issue_pv_as<Traits, false>(o, prob, v, kFirstSlab);
}

// Score steps [kFrom, kTo) of Q K^T, the even steps into s[0] and the odd ones into s[1] (two
// independent accumulation chains; S = s[0] + s[1]), neither fenced nor committed: the caller
// fences before the first part and commits after the last.
template <class Traits, int32_t kFrom, int32_t kTo>
__device__ __forceinline__ void issue_score_steps(uint32_t q_shared, uint32_t k_chunk, float (&s)[2][Traits::kKeyNTiles][4]) {
#pragma unroll
    for (int32_t step = kFrom; step < kTo; ++step) {
        const ScoreDescriptors d = score_step_descriptors<Traits, Traits::kScoreSlabs>(q_shared, k_chunk, kFirstSlab, step);
        ptx::wgmma_m64n32k16_ss(s[step % 2], d.q, d.k, step > 1 ? 1 : 0);
    }
}

// All score steps of Q K^T into the two chains of s, fenced and committed as one wgmma group.
template <class Traits>
__device__ __forceinline__ void issue_scores_two_chains(uint32_t q_shared, uint32_t k_chunk,
                                                        float (&s)[2][Traits::kKeyNTiles][4]) {
    ptx::wgmma_fence();
    issue_score_steps<Traits, 0, Traits::kScoreSlabs * Traits::kStepsPerSlab>(q_shared, k_chunk, s);
    ptx::wgmma_commit();
}

// The last tile j: its V rows past kv_end must not carry a page's unused slots into P V. Both
// warpgroups read this V tile, so both zero a share and meet before either P V; they reach the
// barrier from different code (the home and fed loops), hence its unaligned form.
template <class Traits>
__device__ __forceinline__ void zero_last_value_rows(const BlockGeometry& g, const Consumer<Traits>& c, const SharedMap& map,
                                                     int32_t j) {
    const int32_t rows_valid = g.kv_end - j * Traits::kTileKeys;
    if (rows_valid < Traits::kTileKeys) {
        bf16c2::zero_value_rows_from<Traits>(v_tile<Traits>(map, j), rows_valid, c.thread);
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync_unaligned(kConsumersBarrier, Traits::kConsumerThreads);
    }
}

// Quarter kQuarter of the score steps of Q K_j+2^T into s_free when kIssue (nothing otherwise).
template <class Traits, bool kIssue, int32_t kQuarter>
__device__ __forceinline__ void issue_score_quarter(uint32_t q_shared, uint32_t k_chunk,
                                                    float (&s_free)[2][Traits::kKeyNTiles][4]) {
    constexpr int32_t kSteps = Traits::kScoreSlabs * Traits::kStepsPerSlab;
    static_assert(kSteps % kScoreQuarters == 0, "whole quarters");
    if constexpr (kIssue)
        issue_score_steps<Traits, kQuarter * kSteps / kScoreQuarters, (kQuarter + 1) * kSteps / kScoreQuarters>(
            q_shared, k_chunk, s_free);
}

// The home warpgroup's softmax of tile `tile` from its completed Q K^T `s` (two partial sums):
// scaled to log2 units, masked, the online-softmax step (softmax_step's arithmetic), P into `prob`,
// and P with the rescale factors (1 where O is not rescaled) posted to the partner. kIssue: the
// score product of the tile after next (K at k_next, into s_free) is issued in quarters between the
// softmax's stages and committed before the post; without this the warp waits at the issue of its
// 32 wgmmas until the tensor cores have nearly run them and only then starts the softmax (ncu,
// 2026-12-06: a third of the home warps' samples on wgmma issue). Returns whether O must be
// rescaled by alpha.
template <class Traits, bool kIssue>
__device__ __forceinline__ bool home_softmax(const wideattn_prefill_params& p, const BlockGeometry& g,
                                             const Consumer<Traits>& c, const SharedMap& map, int32_t tile,
                                             const float (&s)[2][Traits::kKeyNTiles][4], RowState& state,
                                             uint32_t (&prob)[Traits::kPvSteps][4], float (&alpha)[2],
                                             uint32_t k_next, float (&s_free)[2][Traits::kKeyNTiles][4]) {
    static_assert(kScoreQuarters == 4, "one part ahead of each of the four stages below");
    if constexpr (kIssue) ptx::wgmma_fence();
    issue_score_quarter<Traits, kIssue, 0>(map.q, k_next, s_free);
    const float scale = p.softmax_scale * kLog2e;
    float scores[Traits::kKeyNTiles][4];
#pragma unroll
    for (int32_t n = 0; n < Traits::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) scores[n][e] = __fmul_rn(__fadd_rn(s[0][n][e], s[1][n][e]), scale);
    mask_scores<Traits>(g, tile, c.at.lane, scores);
    float tile_max[2];
    score_row_maxima<Traits, false>(scores, kUnitScale, tile_max);
    issue_score_quarter<Traits, kIssue, 1>(map.q, k_next, s_free);
    const bool rescale = raise_max_if_grown<Traits>(tile_max, state, alpha);
    exponentiate_from_maxima<Traits, false, 0, Traits::kKeyNTiles / 2>(scores, kUnitScale, state, 0.0f);
    issue_score_quarter<Traits, kIssue, 2>(map.q, k_next, s_free);
    exponentiate_from_maxima<Traits, false, Traits::kKeyNTiles / 2>(scores, kUnitScale, state, 0.0f);
    pack_probs<Traits>(scores, prob);
    issue_score_quarter<Traits, kIssue, 3>(map.q, k_next, s_free);
    if constexpr (kIssue) ptx::wgmma_commit();
    const float sent[2] = {rescale ? alpha[0] : 1.0f, rescale ? alpha[1] : 1.0f};
    post_probs<Traits>(map, c.partner, tile, c.at.thread, prob, sent);
    return rescale;
}

// The home warpgroup's loop state: two score accumulator sets (each the two partial sums of
// issue_score_steps) and two P register sets, used alternately (step j reads the scores of tile
// j + 1 from one set while Q K_j+2^T accumulates into the other, and P_j from one P set while the
// softmax writes P_j+1 into the other).
template <class Traits>
struct HomeCarry {
    float s[2][2][Traits::kKeyNTiles][4];
    uint32_t prob[2][Traits::kPvSteps][4];
};

// Home step j, entering with P_j in `prob` and Q K_j+1^T in flight into `s_next`. kHasNext: tile
// j+1 exists; kIssueNext: tile j+2 exists. Issues P_j V_j and then Q K_j+2^T into `s_free` before
// the softmax of tile j+1, so that product runs while the softmax does.
template <class Traits, bool kHasNext, bool kIssueNext>
__device__ __forceinline__ void home_step(const wideattn_prefill_params& p, const BlockGeometry& g,
                                          const Consumer<Traits>& c, const SharedMap& map,
                                          float (&o)[Traits::kDimNTiles][4], RowState& state, int32_t j,
                                          float (&s_next)[2][Traits::kKeyNTiles][4],
                                          float (&s_free)[2][Traits::kKeyNTiles][4],
                                          uint32_t (&prob)[Traits::kPvSteps][4],
                                          uint32_t (&prob_next)[Traits::kPvSteps][4]) {
    using B = Barriers<Traits>;
    const bool v_landed = ptx::mbarrier_test(B::full_v(map, j), use_parity<Traits::kVSlots>(j));
    const bool k_landed =
        !kIssueNext || ptx::mbarrier_test(B::full_k(map, j + 2), use_parity<Traits::kKSlots>(j + 2));
    ptx::wgmma_wait<0>();  // Q K_j+1^T done (and every older group)
    ptx::pin_all(s_next[0]);
    ptx::pin_all(s_next[1]);
    if (kHasNext) release_slot(B::empty_k(map, j + 1), c.at);
    if (!v_landed) ptx::mbarrier_wait(B::full_v(map, j), use_parity<Traits::kVSlots>(j));
    if (!k_landed) ptx::mbarrier_wait(B::full_k(map, j + 2), use_parity<Traits::kKSlots>(j + 2));
    if (!kHasNext) zero_last_value_rows<Traits>(g, c, map, j);
    issue_pv<Traits>(o, prob, v_tile<Traits>(map, j));
    if (kHasNext) {
        float alpha[2];
        const bool rescale = home_softmax<Traits, kIssueNext>(p, g, c, map, j + 1, s_next, state, prob_next, alpha,
                                                              kIssueNext ? k_tile<Traits>(map, j + 2) : 0u, s_free);
        if (kIssueNext)
            ptx::wgmma_wait<1>();  // P_j V_j done; Q K_j+2^T may still run
        else
            ptx::wgmma_wait<0>();
        ptx::pin_all(o);
        ptx::pin_all(prob);
        release_slot(B::empty_v(map, j), c.at);
        if (rescale) rescale_output(o, alpha);
    } else {
        ptx::wgmma_wait<0>();
        ptx::pin_all(o);
        release_slot(B::empty_v(map, j), c.at);
    }
}

// The home warpgroup's key loop; o accumulates unnormalised P V over the CTA's dims, state holds
// the running maxima and this thread's partial row sums.
template <class Traits>
__device__ __forceinline__ void home_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                              const Consumer<Traits>& c, const SharedMap& map,
                                              float (&o)[Traits::kDimNTiles][4], RowState& state) {
    using B = Barriers<Traits>;
    HomeCarry<Traits> carry;
    const int32_t n = g.num_tiles;
    if (n > 0) {
        group_loads_landed<Traits, 0>(Traits::kHomeGroup);  // Q (cp.async)
        ptx::mbarrier_wait(B::full_k(map, 0), use_parity<Traits::kKSlots>(0));
        issue_scores_two_chains<Traits>(map.q, k_tile<Traits>(map, 0), carry.s[0]);
        ptx::wgmma_wait<0>();
        ptx::pin_all(carry.s[0][0]);
        ptx::pin_all(carry.s[0][1]);
        release_slot(B::empty_k(map, 0), c.at);
        float alpha[2];
        home_softmax<Traits, false>(p, g, c, map, 0, carry.s[0], state, carry.prob[0], alpha, 0u, carry.s[1]);
    }
    if (n > 1) {
        ptx::mbarrier_wait(B::full_k(map, 1), use_parity<Traits::kKSlots>(1));
        issue_scores_two_chains<Traits>(map.q, k_tile<Traits>(map, 1), carry.s[1]);
    }
    // Step j reads the scores of tile j + 1 from s[(j + 1) % 2] and issues tile j + 2's into s[j % 2].
    int32_t j = 0;
    for (; j + 3 < n; j += 2) {
        home_step<Traits, true, true>(p, g, c, map, o, state, j, carry.s[1], carry.s[0], carry.prob[0], carry.prob[1]);
        home_step<Traits, true, true>(p, g, c, map, o, state, j + 1, carry.s[0], carry.s[1], carry.prob[1],
                                      carry.prob[0]);
    }
    if (n - j == 3) {
        home_step<Traits, true, true>(p, g, c, map, o, state, j, carry.s[1], carry.s[0], carry.prob[0], carry.prob[1]);
        home_step<Traits, true, false>(p, g, c, map, o, state, j + 1, carry.s[0], carry.s[1], carry.prob[1],
                                       carry.prob[0]);
        home_step<Traits, false, false>(p, g, c, map, o, state, j + 2, carry.s[1], carry.s[0], carry.prob[0],
                                        carry.prob[1]);
    } else if (n - j == 2) {
        home_step<Traits, true, false>(p, g, c, map, o, state, j, carry.s[1], carry.s[0], carry.prob[0], carry.prob[1]);
        home_step<Traits, false, false>(p, g, c, map, o, state, j + 1, carry.s[0], carry.s[1], carry.prob[1],
                                        carry.prob[0]);
    } else if (n - j == 1) {
        home_step<Traits, false, false>(p, g, c, map, o, state, j, carry.s[1], carry.s[0], carry.prob[0],
                                        carry.prob[1]);
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    ptx::cp_async_wait<0>();
}

// The fed warpgroup's key loop over the n tiles of the block: O (its rows, the CTA's dims) from the
// partner's P and rescale factors.
template <class Traits>
__device__ __forceinline__ void fed_mainloop(const BlockGeometry& g, const Consumer<Traits>& c, const SharedMap& map,
                                             float (&o)[Traits::kDimNTiles][4]) {
    using B = Barriers<Traits>;
    constexpr uint32_t kFullMask = 0xffffffffu;
    const int32_t n = g.num_tiles;
    uint32_t prob[Traits::kPvSteps][4] = {};
    for (int32_t j = 0; j < n; ++j) {
        ptx::wgmma_wait<0>();  // P_j-1 V_j-1 done: O and the P registers are free
        ptx::pin_all(o);
        ptx::pin_all(prob);
        if (j > 0) release_slot(B::empty_v(map, j - 1), c.at);
        float alpha[2];
        receive_probs<Traits>(map, c.partner, j, rearm_after<Traits::kMessageParities>(j, n), c.at.thread, prob,
                              alpha);
        if (__any_sync(kFullMask, alpha[0] != 1.0f || alpha[1] != 1.0f)) rescale_output(o, alpha);
        ptx::mbarrier_wait(B::full_v(map, j), use_parity<Traits::kVSlots>(j));
        if (j + 1 == n) zero_last_value_rows<Traits>(g, c, map, j);
        issue_pv<Traits>(o, prob, v_tile<Traits>(map, j));
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
    if (n > 0) release_slot(B::empty_v(map, n - 1), c.at);
}

}  // namespace wideattn::hopper::bf16c2p
