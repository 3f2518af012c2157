// mainloop.cuh - the key loop of the Hopper-tier 8-bit kernel for one warpgroup: the software
// pipeline of the bf16 Hopper kernel (kernels/hopper/bf16_d512/mainloop.cuh, from the block
// machinery both share in kernels/common/) with e4m3 scores (8 wgmma m64n32k32 over the
// warpgroup's 256 dims, Q and K codes from shared memory), fp16 P and an fp16 P V whose V is
// converted from staged e4m3 codes one step ahead. Dequantisation scales: q_scale * k_scale
// joins the softmax scale; v_scale multiplies O in the epilogue.
//
// Step j: wait for K_j+1 (warpgroup barrier), issue Q K_j+1^T, stage V_j+2, meet the other
// warpgroup (every thread converted V_j and fenced it in step j-1; both score products are
// issued before either P V), issue P_j V_j, wait for S_j+1, exchange it, refill K_j+3, run the
// softmax of S_j+1, convert V_j+1 (its codes were staged in step j-1) into the fp16 slot P V
// does not read, wait for P_j V_j, rescale O if needed.
//
// Rings: K_j in key slot j % 2 (K_j+3 takes K_j+1's slot once the exchange shows Q K_j+1^T
// done everywhere), staged V_j in staging slot j % 2 (V_j+2 takes V_j's slot, converted in
// step j-1 by the same thread), fp16 V_j in value slot j % 2. Groups, one per chunk in this
// order: prologue [Q, K_0], [K_1], [V_0 codes], [V_1 codes], then after S_0 [K_2]; step j
// [V_j+2 codes], [K_j+3].
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3q_d512/loads.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_exchange.cuh"
#include "kernels/common/wgmma_loads.cuh"
#include "kernels/common/wgmma_products.cuh"
#include "kernels/common/wgmma_softmax.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3q {

// Shared-memory addresses of one block's regions (Traits::SmemPlan from the aligned base).
template <class Traits>
struct CodeSharedMap {
    uint32_t q;
    uint32_t key_ring;
    uint32_t staged_ring;
    uint32_t value_ring;
    uint32_t exchange;

    __device__ __forceinline__ static CodeSharedMap at(uint32_t base) {
        using Plan = typename Traits::SmemPlan;
        CodeSharedMap map;
        map.q = base + Plan::kQ;
        map.key_ring = base + Plan::kKeyRing;
        map.staged_ring = base + Plan::kStagedRing;
        map.value_ring = base + Plan::kValueRing;
        map.exchange = base + Plan::kExchange;
        return map;
    }

    __device__ __forceinline__ uint32_t key(int32_t tile) const {
        return key_ring + (tile % Traits::kKeySlots) * Traits::kCodeChunkBytes;
    }
    __device__ __forceinline__ uint32_t staged(int32_t tile) const {
        return staged_ring + (tile % Traits::kStagedSlots) * Traits::kCodeChunkBytes;
    }
    __device__ __forceinline__ uint32_t value(int32_t tile) const {
        return value_ring + (tile % Traits::kHalfValueSlots) * Traits::kHalfChunkBytes;
    }
};

// Q K^T on e4m3 codes issued (committed, not waited for) into s: the same slab geometry as bf16
// (128-byte rows, 32-byte steps), half the slabs, k32 wgmmas.
template <class Traits>
__device__ __forceinline__ void issue_code_scores(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                                  float (&s)[Traits::kKeyNTiles][4]) {
    issue_scores_over<Traits, Traits::kCodeSlabsPerGroup, true>(q_shared, k_chunk, group, s);
}

// fp16 P V issued (committed, not waited for) into o; V in the 16-bit MN-major layout.
template <class Traits>
__device__ __forceinline__ void issue_half_pv(float (&o)[Traits::kDimNTiles][4],
                                              const uint32_t (&prob)[Traits::kPvSteps][4], uint32_t v_chunk,
                                              int32_t group) {
    issue_pv_as<Traits, true>(o, prob, v_chunk, group);
}

// Fence of this thread's shared-memory writes to the async proxy, then both warpgroups meet.
template <class Traits>
__device__ __forceinline__ void block_writes_visible() {
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(kBlockLoadsBarrier, Traits::kThreads);
}

// kCopyQ: Q codes are cp.async'd into the first group with K_0 (the e4m3-Q kernel); without, the
// caller writes them (block.cuh) and the first group holds K_0 alone.
template <class Traits, bool kCopyQ = true>
__device__ __forceinline__ void issue_code_prologue(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                    const GroupPlace& at, const CodeSharedMap<Traits>& map,
                                                    int64_t first_token, int32_t tile_len,
                                                    CodeTileStream<Traits, true>& k_stream,
                                                    CodeTileStream<Traits, false>& v_stream) {
    const int32_t* table_row = p.block_table + g.table_offset;
    if constexpr (kCopyQ)
        issue_q_rows<Traits, Traits::kCodeBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    k_stream.issue(p, table_row, g.kv_end, map.key(0));
    ptx::cp_async_commit();
    if (g.num_tiles > 1) k_stream.issue(p, table_row, g.kv_end, map.key(1));
    ptx::cp_async_commit();
    v_stream.issue(p, table_row, g.kv_end, map.staged(0));
    ptx::cp_async_commit();
    if (g.num_tiles > 1) v_stream.issue(p, table_row, g.kv_end, map.staged(1));
    ptx::cp_async_commit();
}

template <class Traits>
__device__ __forceinline__ void wgmma_e4m3q_mainloop(const wideattn_prefill_params& p, const BlockGeometry& g,
                                                     const GroupPlace& at, const CodeSharedMap<Traits>& map,
                                                     CodeTileStream<Traits, true>& k_stream,
                                                     CodeTileStream<Traits, false>& v_stream, float score_scale,
                                                     float (&o)[Traits::kDimNTiles][4], RowState& state) {
    const int32_t* table_row = p.block_table + g.table_offset;
    uint32_t prob[Traits::kPvSteps][4];
    float alpha[2];
    if (g.num_tiles > 0) {
        float s[Traits::kKeyNTiles][4], scores[Traits::kKeyNTiles][4];
        group_loads_landed<Traits, 3>(at.group);  // Q, K_0 (pending: K_1, V_0 codes, V_1 codes)
        issue_code_scores<Traits>(map.q, map.key(0), at.group, s);
        ptx::wgmma_wait<0>();
        ptx::pin_all(s);
        exchange_scores<Traits>(kUnitScale, map.exchange, 0, at, s, scores);
        mask_scores<Traits>(g, 0, at.lane, scores);
        softmax_step<Traits, PackF16, true>(scores, score_scale, state, prob, alpha);  // O is still 0: no rescale
    }
    if (g.num_tiles > 2) k_stream.issue(p, table_row, g.kv_end, map.key(2));
    ptx::cp_async_commit();
    if (g.num_tiles > 0) {
        ptx::cp_async_wait<2>();  // V_0 codes (pending: V_1 codes, K_2)
        convert_values<Traits>(map.staged(0), map.value(0), at.group, at.thread);
    }
    for (int32_t j = 0; j < g.num_tiles; ++j) {
        const bool has_next = j + 1 < g.num_tiles;
        float s[Traits::kKeyNTiles][4], scores[Traits::kKeyNTiles][4];
        if (has_next) {
            group_loads_landed<Traits, 2>(at.group);  // K_j+1 (pending: V_j+1 codes, K_j+2)
            issue_code_scores<Traits>(map.q, map.key(j + 1), at.group, s);
        }
        if (j + 2 < g.num_tiles) v_stream.issue(p, table_row, g.kv_end, map.staged(j + 2));
        ptx::cp_async_commit();
        block_writes_visible<Traits>();  // fp16 V_j from every thread; both score products issued
        issue_half_pv<Traits>(o, prob, map.value(j), at.group);
        if (has_next) {
            ptx::wgmma_wait<1>();  // Q K_j+1^T done; P_j V_j may still run
            ptx::pin_all(s);
            exchange_scores<Traits>(kUnitScale, map.exchange, (j + 1) % Traits::kExchangeParities, at, s, scores);
        }
        if (j + 3 < g.num_tiles) k_stream.issue(p, table_row, g.kv_end, map.key(j + 3));
        ptx::cp_async_commit();
        if (has_next) {
            mask_scores<Traits>(g, j + 1, at.lane, scores);
            uint32_t prob_next[Traits::kPvSteps][4];
            const bool rescale = softmax_step<Traits, PackF16, true>(scores, score_scale, state, prob_next, alpha);
            ptx::cp_async_wait<3>();  // V_j+1 codes (pending: K_j+2, V_j+2 codes, K_j+3)
            convert_values<Traits>(map.staged(j + 1), map.value(j + 1), at.group, at.thread);
            ptx::wgmma_wait<0>();
            ptx::pin_all(o);
            ptx::pin_all(prob);
            ptx::pin_all(s);
            if (rescale) rescale_output(o, alpha);
#pragma unroll
            for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk)
#pragma unroll
                for (int32_t e = 0; e < 4; ++e) prob[kk][e] = prob_next[kk][e];
        } else {
            ptx::wgmma_wait<0>();
            ptx::pin_all(o);
        }
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::hopper::e4m3q
