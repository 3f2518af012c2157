// wgmma_mainloop.cuh - the key loop of the Hopper-tier kernel for one warpgroup: per 32-key
// step, S = Q K^T over the warpgroup's 256 dims (16 wgmma m64n32k16 from shared memory), the
// partial-score exchange with the other warpgroup, the online softmax (exp2, lazy rescale, as
// the mma tier) and O += P V (2 wgmma m64n256k16, P from registers).
//
// Ring schedule (4 slots; chunk 2j = K_j, chunk 2j+1 = V_j, chunk c in slot c % 4): step j
// waits for K_j, runs Q K^T, passes the exchange barrier (after which no thread of the
// warpgroup reads K_j or V_j-1 any more), issues V_j+1 and K_j+2 into those two slots, runs the
// softmax, waits for V_j and runs P V. Every thread commits one group per chunk in chunk order,
// so "all but the newest N groups" names the same chunks on every thread.
#pragma once

#include <cstdint>

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

// Shared-memory map of one block (offsets from the 1024-byte aligned base).
struct SharedMap {
    uint32_t q;
    uint32_t ring;
    uint32_t exchange;
};

constexpr int32_t kExchangeBarrier = 1;   // both warpgroups (named barrier ids; 0 is __syncthreads)
constexpr int32_t kGroupBarrierBase = 2;  // + warpgroup: its own loads have landed
constexpr int32_t kScoreStepBytes = Wt::kWgmmaK * Wt::kElemBytes;     // k16 step inside a 128-byte row
constexpr int32_t kStepsPerSlab = Wt::kSlabDims / Wt::kWgmmaK;
constexpr int32_t kQSlabBytes = Wt::kRowsPerBlock * Wt::kSwizzleBytes;
constexpr int32_t kChunkSlabBytes = Wt::kTileKeys * Wt::kSwizzleBytes;

// Waits for this thread's groups older than the newest kPending, publishes them to the async
// proxy and meets the rest of the warpgroup: the warpgroup's chunks are then readable by wgmma.
template <int kPending>
__device__ __forceinline__ void group_loads_landed(int32_t group) {
    mma::cp_async_wait<kPending>();
    fence_proxy_async_shared();
    mma::named_barrier_sync(kGroupBarrierBase + group, Wt::kWarpGroupThreads);
}

// Partial scores of the warpgroup (64 rows x 32 keys over its 256 dims).
__device__ __forceinline__ void partial_scores(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                               float (&s)[Wt::kKeyNTiles][4]) {
    const uint64_t q_desc = swizzle128_descriptor(q_shared + group * Wt::kSlabsPerGroup * kQSlabBytes, Wt::kVecBytes,
                                                  Wt::kAtomBytes);
    const uint64_t k_desc = swizzle128_descriptor(k_chunk + group * Wt::kSlabsPerGroup * kChunkSlabBytes,
                                                  Wt::kVecBytes, Wt::kAtomBytes);
    wgmma_fence();
#pragma unroll
    for (int32_t step = 0; step < Wt::kQkSteps; ++step) {
        const int32_t slab = step / kStepsPerSlab;
        const int32_t inside = (step % kStepsPerSlab) * kScoreStepBytes;
        wgmma_m64n32k16_ss(s, descriptor_plus(q_desc, slab * kQSlabBytes + inside),
                           descriptor_plus(k_desc, slab * kChunkSlabBytes + inside), step > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) pin(s[n][e]);
}

// Own + partner partial scores (bitwise identical in both warpgroups), scaled to log2 units.
__device__ __forceinline__ void exchange_scores(const wideattn_prefill_params& p, uint32_t exchange, int32_t parity,
                                                const GroupPlace& at, float (&s)[Wt::kKeyNTiles][4]) {
    constexpr int32_t kQuadBytes = Wt::kWarpGroupThreads * Wt::kVecBytes;
    const uint32_t own = exchange + (parity * Wt::kWarpGroups + at.group) * Wt::kExchangeTileBytes +
                         at.thread * Wt::kVecBytes;
    const uint32_t other = exchange + (parity * Wt::kWarpGroups + (1 - at.group)) * Wt::kExchangeTileBytes +
                           at.thread * Wt::kVecBytes;
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
        mma::store_shared_f32x4(own + n * kQuadBytes, s[n][0], s[n][1], s[n][2], s[n][3]);
    mma::named_barrier_sync(kExchangeBarrier, Wt::kThreads);
    const float scale = p.softmax_scale * mma::kLog2e;
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n) {
        const float4 partner = mma::load_shared_f32x4(other + n * kQuadBytes);
        s[n][0] = (s[n][0] + partner.x) * scale;
        s[n][1] = (s[n][1] + partner.y) * scale;
        s[n][2] = (s[n][2] + partner.z) * scale;
        s[n][3] = (s[n][3] + partner.w) * scale;
    }
}

// Bottom-right causal mask and the kv_end limit for key tile `tile`.
__device__ __forceinline__ void mask_scores(const mma::BlockGeometry& g, int32_t tile, int32_t lane,
                                            float (&s)[Wt::kKeyNTiles][4]) {
    const int32_t tile_key0 = tile * Wt::kTileKeys;
    const int32_t warp_key_end = min(g.row_key_end, g.kv_end);  // smallest limit of the warp's rows
    if (tile_key0 + Wt::kTileKeys <= warp_key_end) return;
#pragma unroll
    for (int32_t n = 0; n < Wt::kKeyNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t key = tile_key0 + n * Wt::kAccumN + 2 * (lane % 4) + (e % 2);
            if (key >= min(g.row_key_end + e / 2, g.kv_end)) s[n][e] = -INFINITY;
        }
}

// Online softmax with lazy rescale (warp-uniform decision; both warpgroups decide alike since
// their scores are bitwise equal). Returns P as the A fragments of the P V wgmmas.
__device__ __forceinline__ void softmax_update(float (&s)[Wt::kKeyNTiles][4], float (&o)[Wt::kDimNTiles][4],
                                               mma::RowState& state, uint32_t (&prob)[Wt::kPvSteps][4]) {
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
    const bool grows = tile_max[0] > state.max_log2[0] + Wt::kRescaleThresholdLog2 ||
                       tile_max[1] > state.max_log2[1] + Wt::kRescaleThresholdLog2;
    if (__any_sync(kFullMask, grows)) {
        float alpha[2];
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) {
            const float updated = fmaxf(state.max_log2[r], tile_max[r]);
            alpha[r] = updated == -INFINITY ? 1.0f : mma::fast_exp2(state.max_log2[r] - updated);
            state.max_log2[r] = updated;
            state.sum[r] *= alpha[r];
        }
#pragma unroll
        for (int32_t n = 0; n < Wt::kDimNTiles; ++n) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
    }
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
        prob[kk][0] = mma::pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);
        prob[kk][1] = mma::pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);
        prob[kk][2] = mma::pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        prob[kk][3] = mma::pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

// o += P V over the warpgroup's 256 dims (V MN-major: 64-dim slabs LBO apart, 8-key atoms SBO apart).
__device__ __forceinline__ void accumulate_pv(float (&o)[Wt::kDimNTiles][4], const uint32_t (&prob)[Wt::kPvSteps][4],
                                              uint32_t v_chunk, int32_t group) {
    const uint64_t v_desc = swizzle128_descriptor(v_chunk + group * Wt::kSlabsPerGroup * kChunkSlabBytes,
                                                  kChunkSlabBytes, Wt::kAtomBytes);
    wgmma_fence();
#pragma unroll
    for (int32_t kk = 0; kk < Wt::kPvSteps; ++kk)
        wgmma_m64n256k16_rs(o, prob[kk], descriptor_plus(v_desc, kk * Wt::kWgmmaK * Wt::kSwizzleBytes));
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int32_t n = 0; n < Wt::kDimNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) pin(o[n][e]);
}

__device__ __forceinline__ uint32_t ring_chunk(const SharedMap& map, int32_t chunk) {
    return map.ring + (chunk % Wt::kRingSlots) * Wt::kChunkBytes;
}

// The whole key loop of one warpgroup; o accumulates unnormalised P V, state holds the running
// max and this thread's partial row sums.
__device__ __forceinline__ void wgmma_mainloop(const wideattn_prefill_params& p, const mma::BlockGeometry& g,
                                               const GroupPlace& at, const SharedMap& map,
                                               KvTileStream& k_stream, KvTileStream& v_stream,
                                               float (&o)[Wt::kDimNTiles][4], mma::RowState& state) {
    const int32_t* table_row = p.block_table + g.table_offset;
    uint32_t prob[Wt::kPvSteps][4];
    for (int32_t j = 0; j < g.num_tiles; ++j) {
        group_loads_landed<2>(at.group);  // K_j (pending: V_j, K_j+1)
        float s[Wt::kKeyNTiles][4];
        partial_scores(map.q, ring_chunk(map, 2 * j), at.group, s);
        exchange_scores(p, map.exchange, j % Wt::kExchangeParities, at, s);
        if (j + 1 < g.num_tiles) v_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 2 * j + 3));
        mma::cp_async_commit();
        if (j + 2 < g.num_tiles) k_stream.issue(p, table_row, g.kv_end, ring_chunk(map, 2 * j + 4));
        mma::cp_async_commit();
        mask_scores(g, j, at.lane, s);
        softmax_update(s, o, state, prob);
        group_loads_landed<3>(at.group);  // V_j (pending: K_j+1, V_j+1, K_j+2)
        accumulate_pv(o, prob, ring_chunk(map, 2 * j + 1), at.group);
    }
    mma::cp_async_wait<0>();
}

}  // namespace wideattn::hopper
