// mainloop.cuh - the key loop of decode_bf16kfvw_d512, per 64-key tile of the ring (both
// warpgroups on the same tile; warpgroup g owns dims 256 g .. 256 g + 255):
// - partial scores S^T (64 keys x 8 heads) of the warpgroup's share of the dims: one wgmma
//   m64n16k16 bf16 per unrotated 16-dim block of its dims (A: the stage's V by descriptor, B: Q''s
//   two terms), issued first and running under the rotated part, which is decode_bf16kfv_d512's:
//   for the rotated Q loads q = g, g + 2, ... each warp builds the bf16 K of its 16 keys (both dims
//   of each RoPE pair, from the stage) and multiplies it with bf16 q by mma.sync m16n8k16 (the
//   accumulator layout of a warp's 16 rows is the wgmma accumulator's).
// - the two warpgroups' partial scores meet in shared memory (one block barrier), so both hold the
//   same scores s = (S_hi + S_lo + S_rot) softmax_scale log2 e and run the same online softmax: the
//   tile maximum of each head over the warpgroup's 4 warps in shared memory (the warpgroup's named
//   barrier), P = 2^(s - max) in bf16 into the warpgroup's P^T tile (layout.h, p_offset).
// - P V: O^T (the warpgroup's 256 dims x 8 heads) += V^T P^T, one wgmma m64n8k16 bf16 per 64-dim
//   slab and 16 keys, V^T read transposed (MN-major) from the stage, all 16 in flight, one wait.
// Fragment layout of a thread (warp w of the warpgroup, g = lane / 4, t = lane % 4): score element
// e is key 16 w + g + 8 (e / 2) of the tile, head 2 t + e % 2; o[D][e] is dim pv_row_dim(group, D,
// 16 w + g + 8 (e / 2)) of head 2 t + e % 2.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/warpgroup_max.cuh"
#include "kernels/decode_bf16kfv_d512/keys.cuh"
#include "kernels/decode_bf16kfvw_d512/layout.h"
#include "kernels/decode_bf16kfvw_d512/loads.cuh"
#include "kernels/decode_bf16kfvw_d512/traits.h"

namespace wideattn::kfvw_bf16 {

using decode_e4m3::kFullMask;
using decode_e4m3::WarpRows;

// What every tile of the loop reads: shared memory, the block's tables and scales.
struct TileContext {
    uint32_t fold;         // Q' (two bf16 terms; bf16 q where a dim rotates)
    uint32_t weight;       // fp32 weights
    uint32_t weight_bf16;  // bf16 weight pairs (read when every weight is a bf16 value)
    uint32_t freq;
    uint32_t p_tile;       // the warpgroup's P^T tile
    uint32_t max_slots;    // the warpgroup's tile maxima [warp][head]
    uint32_t exchange;     // the partial scores [group][thread][4]
    CosSinTable table;
    int32_t rotated_q_loads;
    int32_t first_position;
    float score_scale;  // softmax_scale log2 e
};

// Adds K Q^T of rotated Q load q (k-steps 2q, 2q + 1 of dims 0-255 and 256-511) of the warp's 16
// keys to acc ([dims 0-255, 256-511][element]), K built from the stage by build_k_step (kBuild:
// kRotateTable with the table's `words`, or kRotate with the formula's cos / sin).
template <KFromVBuild kBuild, bool kBf16Weights>
__device__ __forceinline__ void rotated_q_load(const TileContext& ctx, uint32_t stage, int32_t warp, int32_t lane,
                                               int32_t q, int32_t position0,
                                               const decode_bf16::QLoadCosSin<Traits>& words, float (&acc)[2][4]) {
    constexpr int32_t kStepVecs = Traits::kMmaK * Traits::kElemBytes / Traits::kVecBytes;  // 2
    constexpr int32_t kHalfVecs = Traits::kHalfDim * Traits::kElemBytes / Traits::kVecBytes;  // 32
    const int32_t key = warp * Traits::kSubTileKeys + (lane / 8 % 2) * 8 + lane % 8;
    const int32_t q_vec = Traits::kKStepsPerQLoad * kStepVecs * q + lane / 8;
    uint32_t b_lo[4], b_hi[4];
    ptx::ldmatrix_x4(b_lo, ctx.fold + fold_offset(lane % 8, q_vec));
    ptx::ldmatrix_x4(b_hi, ctx.fold + fold_offset(lane % 8, kHalfVecs + q_vec));
#pragma unroll
    for (int32_t h = 0; h < Traits::kKStepsPerQLoad; ++h) {
        const int32_t step = Traits::kKStepsPerQLoad * q + h;
        uint32_t a_lo[4], a_hi[4];
        ptx::ldmatrix_x4(a_lo, stage + stage_offset(key, kStepVecs * step + lane / 16));
        ptx::ldmatrix_x4(a_hi, stage + stage_offset(key, kHalfVecs + kStepVecs * step + lane / 16));
        decode_bf16::build_k_step<Traits, kBuild, kBf16Weights>(a_lo, a_hi, ctx.weight, ctx.weight_bf16, ctx.freq,
                                                                words.word[h], lane, step, position0);
        ptx::mma_bf16_16816(acc[0], a_lo, b_lo[2 * h], b_lo[2 * h + 1]);
        ptx::mma_bf16_16816(acc[1], a_hi, b_hi[2 * h], b_hi[2 * h + 1]);
    }
}

// The rotated dims' scores of the warp's 16 keys over the warpgroup's rotated Q loads (group,
// group + 2, ... below rotated_q_loads): decode_bf16kfv_d512's arithmetic, with the table's cos /
// sin where it holds the warp's valid keys, else the formula's. Nothing for a warp without a valid key.
template <bool kBf16Weights>
__device__ __forceinline__ void rotated_scores(const TileContext& ctx, uint32_t stage, int32_t group, int32_t warp,
                                               int32_t lane, int32_t position0, int32_t keys_valid,
                                               float (&acc)[2][4]) {
    if (keys_valid <= 0) return;
    if (ctx.table.holds(position0, min(keys_valid, Traits::kSubTileKeys))) {
#pragma unroll 1
        for (int32_t q = group; q < ctx.rotated_q_loads; q += Traits::kWarpGroups) {
            decode_bf16::QLoadCosSin<Traits> words;
            decode_bf16::load_q_cos_sin<Traits>(ctx.table, lane, q, position0, &words);
            rotated_q_load<KFromVBuild::kRotateTable, kBf16Weights>(ctx, stage, warp, lane, q, position0, words, acc);
        }
    } else {
        const decode_bf16::QLoadCosSin<Traits> unused{};
#pragma unroll 1
        for (int32_t q = group; q < ctx.rotated_q_loads; q += Traits::kWarpGroups)
            rotated_q_load<KFromVBuild::kRotate, kBf16Weights>(ctx, stage, warp, lane, q, position0, unused, acc);
    }
}

// Issues (and commits, not waited for) the unrotated dims' scores of the warpgroup's dims into s:
// one m64n16k16 per 16-dim block from the first unrotated one of its half to its end.
__device__ __forceinline__ void issue_folded_scores(const TileContext& ctx, uint32_t stage, int32_t group,
                                                    float (&s)[2][4]) {
    ptx::wgmma_fence();
#pragma unroll 1
    for (int32_t j = Traits::kScoreStepsPerQLoad * ctx.rotated_q_loads; j < Traits::kGroupScoreSteps; ++j) {
        const FoldScoreStep step = fold_score_step<Traits>(stage, ctx.fold, group * Traits::kGroupScoreSteps + j);
        ptx::wgmma_m64n16k16_bf16_ss(s, step.v, step.q, 1);
    }
    ptx::wgmma_commit();
}

// The tile's scores in log2 units, keys past kv_end at -inf: the thread's 4 (score element e), the
// same in both warpgroups (the sum of the two partial scores, each warpgroup's posted for the other).
template <bool kBf16Weights>
__device__ __forceinline__ void tile_scores(const TileContext& ctx, uint32_t stage, int32_t group, int32_t warp,
                                            int32_t lane, int32_t tile_key0, int32_t kv_end, float (&s)[4]) {
    const int32_t g = lane / 4;
    float folded[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    issue_folded_scores(ctx, stage, group, folded);
    float rotated[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const int32_t warp_key0 = tile_key0 + warp * Traits::kSubTileKeys;
    rotated_scores<kBf16Weights>(ctx, stage, group, warp, lane, ctx.first_position + warp_key0, kv_end - warp_key0,
                                 rotated);
    ptx::wgmma_wait<0>();
    ptx::pin_all(folded);
    float part[4];
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) part[e] = (folded[0][e] + folded[1][e]) + (rotated[0][e] + rotated[1][e]);
    const int32_t slot = static_cast<int32_t>(threadIdx.x) % Traits::kWarpGroupThreads;
    const uint32_t own = ctx.exchange + static_cast<uint32_t>((group * Traits::kWarpGroupThreads + slot) * 16);
    const uint32_t other =
        ctx.exchange + static_cast<uint32_t>(((1 - group) * Traits::kWarpGroupThreads + slot) * 16);
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(own), "f"(part[0]), "f"(part[1]), "f"(part[2]),
                 "f"(part[3])
                 : "memory");
    __syncthreads();
    const float4 theirs = ptx::load_shared_f32x4(other);
    const float other_part[4] = {theirs.x, theirs.y, theirs.z, theirs.w};
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const int32_t key = warp_key0 + g + 8 * (e / 2);
        // fp32 addition commutes: both warpgroups get the same bits.
        s[e] = key < kv_end ? (part[e] + other_part[e]) * ctx.score_scale : -INFINITY;
    }
}

// The softmax step of a tile: the warpgroup's tile maxima (posted by the warps, read after the
// group barrier), O^T rescaled where a maximum grows, P = 2^(s - max) in bf16 stored into the P^T
// tile, the row sums of the fp32 P. Ends with the async-proxy fence and the group barrier, after
// which the P V wgmma may read the tile.
__device__ __forceinline__ void tile_softmax(const TileContext& ctx, const float (&s)[4], int32_t group, int32_t warp,
                                             int32_t lane, WarpRows& rows, float (&o)[Traits::kPvDimBlocks][4]) {
    const int32_t g = lane / 4, t = lane % 4;
    float tile_max[2];
    warpgroup_tile_max<Traits>(s, ctx.max_slots, group, warp, lane, tile_max);
    decode_e4m3::raise_row_max(tile_max, rows, o);
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const float m = rows.max_log2[e % 2];
        const float prob = fast_exp2(s[e] - (m == -INFINITY ? 0.0f : m));
        rows.sum[e % 2] += prob;
        const int32_t key = warp * Traits::kSubTileKeys + g + 8 * (e / 2);
        const uint32_t bits = ptx::pack_bf16x2(prob, 0.0f) & 0xffffu;
        asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(ctx.p_tile + p_offset(2 * t + e % 2, key)), "h"(
                         static_cast<unsigned short>(bits))
                     : "memory");
    }
    ptx::fence_proxy_async_shared();
    warpgroup_barrier<Traits>(group);
}

// O^T += V^T P^T over a tile: per 64-dim slab of the warpgroup and 16 keys one m64n8k16, all in
// flight, waited for at the end (after which the stage and the P^T tile are free).
__device__ __forceinline__ void tile_pv(const TileContext& ctx, uint32_t stage, int32_t group,
                                        float (&o)[Traits::kPvDimBlocks][4]) {
    ptx::wgmma_fence();
#pragma unroll
    for (int32_t d = 0; d < Traits::kPvDimBlocks; ++d)
#pragma unroll
        for (int32_t step = 0; step < Traits::kPvSteps; ++step)
            ptx::wgmma_m64n8k16_bf16_ss_ta(o[d], pv_v_descriptor(stage, group, d, step),
                                           pv_p_descriptor(ctx.p_tile, step));
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::pin_all(o);
}

// The block's key loop over its tiles (the first kStagesInFlight issued by the caller): wait for
// tile i (every thread's copies, fenced for the async proxy, then the block barrier, after which
// every thread is also done with tile i - 1: its wgmma waited for, its ldmatrix done), issue tile
// i + 2 into tile i - 1's stage, the scores, the softmax, P V.
template <bool kBf16Weights>
__device__ __forceinline__ void key_loop(const wideattn_prefill_params& p, const TileStream& stream,
                                         const TileContext& ctx, int32_t group, int32_t warp, int32_t lane,
                                         WarpRows& rows, float (&o)[Traits::kPvDimBlocks][4]) {
    for (int32_t i = 0; i < stream.count; ++i) {
        ptx::cp_async_wait<Traits::kStagesInFlight - 1>();
        ptx::fence_proxy_async_shared();
        __syncthreads();
        stream.issue(p, i + Traits::kStagesInFlight);
        const uint32_t stage = stream.stage(i);
        float s[4];
        tile_scores<kBf16Weights>(ctx, stage, group, warp, lane, i * Traits::kTileKeysW, stream.kv_end, s);
        tile_softmax(ctx, s, group, warp, lane, rows, o);
        tile_pv(ctx, stage, group, o);
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::kfvw_bf16
