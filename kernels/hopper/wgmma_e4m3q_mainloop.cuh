// wgmma_e4m3q_mainloop.cuh - the key loop of the Hopper-tier 8-bit kernel for one warpgroup: the
// bf16 kernel's software pipeline (wgmma_mainloop.cuh) with e4m3 scores (8 wgmma m64n32k32 over
// the warpgroup's 256 dims, Q and K codes from shared memory), fp16 P and an fp16 P V whose V is
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

#include "kernels/hopper/wgmma_e4m3q_loads.cuh"
#include "kernels/hopper/wgmma_mainloop.cuh"

namespace wideattn::hopper {

struct CodeSharedMap {
    uint32_t q;
    uint32_t key_ring;
    uint32_t staged_ring;
    uint32_t value_ring;
    uint32_t exchange;

    __device__ __forceinline__ uint32_t key(int32_t tile) const {
        return key_ring + (tile % Et::kKeySlots) * Et::kCodeChunkBytes;
    }
    __device__ __forceinline__ uint32_t staged(int32_t tile) const {
        return staged_ring + (tile % Et::kStagedSlots) * Et::kCodeChunkBytes;
    }
    __device__ __forceinline__ uint32_t value(int32_t tile) const {
        return value_ring + (tile % Et::kHalfValueSlots) * Et::kHalfChunkBytes;
    }
};

// Q K^T on e4m3 codes issued (committed, not waited for) into s: the same slab geometry as bf16
// (128-byte rows, 32-byte steps), half the slabs, k32 wgmmas.
__device__ __forceinline__ void issue_code_scores(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                                  float (&s)[Wt::kKeyNTiles][4]) {
    static_assert(Et::kScoreK * Et::kCodeBytes == kScoreStepBytes &&
                      Et::kCodeSlabsPerGroup * kStepsPerSlab == Et::kQkSteps,
                  "e4m3 score steps are the bf16 kernel's 32-byte steps");
    issue_scores_over<Et::kCodeSlabsPerGroup, true>(q_shared, k_chunk, group, s);
}

// fp16 P V issued (committed, not waited for) into o; V in the bf16 kernel's MN-major layout.
__device__ __forceinline__ void issue_half_pv(float (&o)[Wt::kDimNTiles][4], const uint32_t (&prob)[Wt::kPvSteps][4],
                                              uint32_t v_chunk, int32_t group) {
    issue_pv_as<true>(o, prob, v_chunk, group);
}

// Fence of this thread's shared-memory writes to the async proxy, then both warpgroups meet.
__device__ __forceinline__ void block_writes_visible() {
    fence_proxy_async_shared();
    mma::named_barrier_sync(kBlockLoadsBarrier, Wt::kThreads);
}

__device__ __forceinline__ void issue_code_prologue(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                                    const GroupPlace& at, const CodeSharedMap& map,
                                                    int64_t first_token, int32_t tile_len,
                                                    CodeTileStream<true>& k_stream, CodeTileStream<false>& v_stream) {
    const int32_t* table_row = p.block_table + g.table_offset;
    issue_q_rows<Et::kCodeBytes>(p, map.q, first_token, tile_len, g.kv_head, at.group, at.thread);
    k_stream.issue(p, table_row, g.kv_end, map.key(0));
    mma::cp_async_commit();
    if (g.num_tiles > 1) k_stream.issue(p, table_row, g.kv_end, map.key(1));
    mma::cp_async_commit();
    v_stream.issue(p, table_row, g.kv_end, map.staged(0));
    mma::cp_async_commit();
    if (g.num_tiles > 1) v_stream.issue(p, table_row, g.kv_end, map.staged(1));
    mma::cp_async_commit();
}

__device__ __forceinline__ void wgmma_e4m3q_mainloop(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                                     const GroupPlace& at, const CodeSharedMap& map,
                                                     CodeTileStream<true>& k_stream, CodeTileStream<false>& v_stream,
                                                     float score_scale, float (&o)[Wt::kDimNTiles][4],
                                                     mma::RowState& state) {
    const int32_t* table_row = p.block_table + g.table_offset;
    uint32_t prob[Wt::kPvSteps][4];
    float alpha[2];
    if (g.num_tiles > 0) {
        float s[Wt::kKeyNTiles][4], scores[Wt::kKeyNTiles][4];
        group_loads_landed<3>(at.group);  // Q, K_0 (pending: K_1, V_0 codes, V_1 codes)
        issue_code_scores(map.q, map.key(0), at.group, s);
        wgmma_wait<0>();
        pin_all(s);
        exchange_scores(kUnitScale, map.exchange, 0, at, s, scores);
        mask_scores(g, 0, at.lane, scores);
        softmax_step<PackF16, true>(scores, score_scale, state, prob, alpha);  // O is still 0: no rescale
    }
    if (g.num_tiles > 2) k_stream.issue(p, table_row, g.kv_end, map.key(2));
    mma::cp_async_commit();
    if (g.num_tiles > 0) {
        mma::cp_async_wait<2>();  // V_0 codes (pending: V_1 codes, K_2)
        convert_values(map.staged(0), map.value(0), at.group, at.thread);
    }
    for (int32_t j = 0; j < g.num_tiles; ++j) {
        const bool has_next = j + 1 < g.num_tiles;
        float s[Wt::kKeyNTiles][4], scores[Wt::kKeyNTiles][4];
        if (has_next) {
            group_loads_landed<2>(at.group);  // K_j+1 (pending: V_j+1 codes, K_j+2)
            issue_code_scores(map.q, map.key(j + 1), at.group, s);
        }
        if (j + 2 < g.num_tiles) v_stream.issue(p, table_row, g.kv_end, map.staged(j + 2));
        mma::cp_async_commit();
        block_writes_visible();  // fp16 V_j from every thread; both score products issued
        issue_half_pv(o, prob, map.value(j), at.group);
        if (has_next) {
            wgmma_wait<1>();  // Q K_j+1^T done; P_j V_j may still run
            pin_all(s);
            exchange_scores(kUnitScale, map.exchange, (j + 1) % Wt::kExchangeParities, at, s, scores);
        }
        if (j + 3 < g.num_tiles) k_stream.issue(p, table_row, g.kv_end, map.key(j + 3));
        mma::cp_async_commit();
        if (has_next) {
            mask_scores(g, j + 1, at.lane, scores);
            uint32_t prob_next[Wt::kPvSteps][4];
            const bool rescale = softmax_step<PackF16, true>(scores, score_scale, state, prob_next, alpha);
            mma::cp_async_wait<3>();  // V_j+1 codes (pending: K_j+2, V_j+2 codes, K_j+3)
            convert_values(map.staged(j + 1), map.value(j + 1), at.group, at.thread);
            wgmma_wait<0>();
            pin_all(o);
            pin_all(prob);
            pin_all(s);
            if (rescale) rescale_output(o, alpha);
#pragma unroll
            for (int32_t kk = 0; kk < Wt::kPvSteps; ++kk)
#pragma unroll
                for (int32_t e = 0; e < 4; ++e) prob[kk][e] = prob_next[kk][e];
        } else {
            wgmma_wait<0>();
            pin_all(o);
        }
    }
    mma::cp_async_wait<0>();
}

}  // namespace wideattn::hopper
