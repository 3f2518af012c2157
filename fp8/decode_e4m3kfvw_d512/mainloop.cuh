// mainloop.cuh - a warpgroup's key loop in decode_e4m3kfvw_d512, per 64-key tile of its ring:
// - scores S^T (64 keys x 16 terms): for every 32-dim block that does not rotate one wgmma
//   m64n16k32 e4m3 of the stage's V codes (A, by descriptor) against Q''s two terms (B), issued
//   before and running under the rotated dims' part, which is decode_e4m3kfvb_d512's: each warp
//   builds the bf16 K of its 16 keys from their codes (build_k_pair_from_codes) and multiplies it
//   with bf16 Q by mma.sync (a native bf16 unit on sm_90; the accumulator layout of a warp's 16
//   rows is the wgmma accumulator's). s = ((S_hi + S_lo 2^-4) 2^-a + S_rot) softmax_scale log2 e.
// - softmax: the tile maximum of each head meets across the warpgroup's 4 warps in shared memory
//   (named barrier of the warpgroup), rows sums stay per-thread partials; P = 2^(s - max + 8) as
//   two e4m3 terms into the warpgroup's P^T tile (layout.h, p_offset).
// - P V: O^T (512 dims x 16 terms) += V^T P^T, one wgmma m64n16k32 e4m3 per 64-dim block and 32
//   keys, V^T in registers by transposed ldmatrix from the stage and byte permutes (the keys of a
//   register in pv_key_position order, as P^T holds them).
// The plain loop (group_key_loop) loads the table words of the next tile's first
// kCosSinAheadBlocks rotated pair blocks right after a tile's scores, before its softmax and P V.
// The pipelined loop (group_key_loop_pipelined, decode_e4m3kfvwp_d512) runs the same steps with a
// tile's P V wgmma in flight under the next tile's scores.
// Fragment layout of a thread (warp w of the warpgroup, g = lane / 4, t = lane % 4): score element
// e is key 16w + g + 8 (e / 2) of the tile, head 2t + e % 2; o[D][n][e] is dim pv_row_dim(D, 16w
// + g + 8 (e / 2)), term n (0 high, 1 low) of head 2t + e % 2.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/decode_e4m3kfv_d512/keys.cuh"
#include "fp8/decode_e4m3kfvw_d512/layout.h"
#include "fp8/decode_e4m3kfvw_d512/loads.cuh"
#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/warpgroup_max.cuh"

namespace wideattn::kfvw {

// What every tile of a warpgroup's loop reads: its shared memory, the block's tables and scales.
struct TileContext {
    uint32_t fold;       // Q' (two e4m3 terms)
    uint32_t q_shared;   // bf16 Q (the rotated dims)
    uint32_t weight;     // fp32 weights, or the bf16 w v_scale products (kProduct)
    uint32_t freq;
    uint32_t p_tile;     // the warpgroup's P^T tile
    uint32_t max_slots;  // the warpgroup's tile maxima [warp][head]
    CosSinTable table;
    int32_t rotated_blocks;
    int32_t first_position;
    float v_scale;
    float unscale;      // 2^-a
    float score_scale;  // softmax_scale log2 e
};

// The online-softmax state of the thread's two heads (2t, 2t + 1) over the warpgroup's keys is
// decode_e4m3_d512's WarpRows: the maxima (here the same in every thread of the warpgroup with the
// same t) and the thread's part of the sums of 2^(s - max + kProbScaleLog2).
using decode_e4m3::WarpRows;

// The cos / sin table words of a warp's keys for the rotated pair blocks 0 .. kBlocks - 1, loaded a
// tile ahead (load_cos_sin_ahead); set only where the table holds the warp's valid keys.
template <int32_t kBlocks>
struct CosSinAhead {
    decode_e4m3::BlockCosSin block[kBlocks];
};

template <>
struct CosSinAhead<0> {};

using NoCosSinAhead = CosSinAhead<0>;

// Whether rotated_scores takes the table for the warp's keys position0 .. (keys_valid of them).
__device__ __forceinline__ bool rotated_from_table(const TileContext& ctx, int32_t position0, int32_t keys_valid) {
    return ctx.table.holds(position0, min(keys_valid, Traits::kSubTileKeys));
}

// The table words rotated_scores reads for the pair blocks below kBlocks of the warp's keys
// position0 .. (keys_valid of them), loaded where it takes the table (the same decision), by the
// same load_block_cos_sin.
template <int32_t kBlocks>
__device__ __forceinline__ void load_cos_sin_ahead(const TileContext& ctx, int32_t lane, int32_t position0,
                                                   int32_t keys_valid, CosSinAhead<kBlocks>& ahead) {
    if (ctx.rotated_blocks == 0 || keys_valid <= 0 || !rotated_from_table(ctx, position0, keys_valid)) return;
#pragma unroll
    for (int32_t c = 0; c < kBlocks; ++c)
        if (c < ctx.rotated_blocks)
            decode_e4m3::load_block_cos_sin<Traits>(ctx.table, lane, c, position0, &ahead.block[c]);
}

// The rotated dims' scores of the warp's 16 keys (decode_e4m3kfvb_d512's arithmetic: bf16 K from
// the codes, rotated with the table's cos / sin where it holds the valid keys, else the formula's,
// in a bf16 mma.sync against bf16 Q), added to acc ([16-dim half][element]). The table words of
// the pair blocks below kAhead come from `ahead` (loaded for these keys by load_cos_sin_ahead),
// the others' are loaded here.
template <bool kProduct, int32_t kAhead>
__device__ __forceinline__ void rotated_scores(const TileContext& ctx, uint32_t stage, int32_t warp, int32_t lane,
                                               int32_t position0, int32_t keys_valid,
                                               const CosSinAhead<kAhead>& ahead, float (&acc)[2][4]) {
    if (ctx.rotated_blocks == 0 || keys_valid <= 0) return;
    const int32_t key = warp * Traits::kSubTileKeys + (lane / 8 % 2) * 8 + lane % 8;
    // Pair block c: its codes (dims of the block and of its partners), K built from them with the
    // cos / sin of `words` (Build: the table's) or of the formula, its scores added to acc.
    const auto block_scores = [&](int32_t c, auto build, const decode_e4m3::BlockCosSin& words) {
        uint32_t codes[2][4], lo[2][4], hi[2][4];
        ptx::ldmatrix_x4(codes[0], stage + stage_offset(key, 2 * c + lane / 16));
        ptx::ldmatrix_x4(codes[1], stage + stage_offset(key, 2 * (c + Traits::kPairBlockOffset) + lane / 16));
        decode_e4m3::build_k_pair_from_codes<Traits, decltype(build)::value, kProduct>(
            codes, ctx.weight, ctx.freq, lane, c, position0, ctx.v_scale, words, lo, hi);
#pragma unroll
        for (int32_t b = 0; b < 2; ++b)
            decode_e4m3::accumulate_dim_block<Traits, true>(acc, lo[b], hi[b], ctx.q_shared,
                                                             c + b * Traits::kPairBlockOffset, lane);
    };
    using FromTable = std::integral_constant<KFromVBuild, KFromVBuild::kRotateTable>;
    using FromFormula = std::integral_constant<KFromVBuild, KFromVBuild::kRotate>;
    if (rotated_from_table(ctx, position0, keys_valid)) {
        if constexpr (kAhead > 0) {
#pragma unroll
            for (int32_t c = 0; c < kAhead; ++c)
                if (c < ctx.rotated_blocks) block_scores(c, FromTable{}, ahead.block[c]);
        }
#pragma unroll 1
        for (int32_t c = kAhead; c < ctx.rotated_blocks; ++c) {
            decode_e4m3::BlockCosSin words;
            decode_e4m3::load_block_cos_sin<Traits>(ctx.table, lane, c, position0, &words);
            block_scores(c, FromTable{}, words);
        }
    } else {
        const decode_e4m3::BlockCosSin unused{};
#pragma unroll 1
        for (int32_t c = 0; c < ctx.rotated_blocks; ++c) block_scores(c, FromFormula{}, unused);
    }
}

// Issues (and commits, not waited for) the unrotated dims' scores of a stage into s: one k32 wgmma
// per 32-dim block of the pair blocks rotated_blocks .. 7 and their partners.
__device__ __forceinline__ void issue_folded_scores(const TileContext& ctx, uint32_t stage, float (&s)[2][4]) {
    ptx::wgmma_fence();
#pragma unroll 1
    for (int32_t c = ctx.rotated_blocks; c < Traits::kPairBlockOffset; ++c) {
#pragma unroll
        for (int32_t b = 0; b < 2; ++b) {
            const FoldScoreStep step = fold_score_step<Traits>(stage, ctx.fold, c + b * Traits::kPairBlockOffset);
            ptx::wgmma_m64n16k32_e4m3_ss(s, step.v, step.q, 1);
        }
    }
    ptx::wgmma_commit();
}

// The tile's scores in log2 units, keys past kv_end at -inf: the thread's 4 (score element e).
// `folded` is the unrotated dims' score accumulator, zeroed by the caller (before any wgmma it
// leaves in flight: a register defined under a wgmma in flight makes ptxas serialise the wgmma);
// before_wait() runs after the rotated dims' part, before the wait for the score wgmma (and for
// any wgmma the caller left in flight); `ahead`: rotated_scores' words loaded a tile ahead.
template <bool kProduct, int32_t kAhead, class BeforeWait>
__device__ __forceinline__ void tile_scores(const TileContext& ctx, uint32_t stage, int32_t warp, int32_t lane,
                                            int32_t tile_key0, int32_t kv_end, const CosSinAhead<kAhead>& ahead,
                                            float (&folded)[2][4], float (&s)[4], const BeforeWait& before_wait) {
    const int32_t g = lane / 4;
    issue_folded_scores(ctx, stage, folded);
    float rotated[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const int32_t warp_key0 = tile_key0 + warp * Traits::kSubTileKeys;
    rotated_scores<kProduct>(ctx, stage, warp, lane, ctx.first_position + warp_key0, kv_end - warp_key0, ahead,
                             rotated);
    before_wait();
    ptx::wgmma_wait<0>();
    ptx::pin_all(folded);
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const int32_t key = warp_key0 + g + 8 * (e / 2);
        const float unrotated = (folded[0][e] + folded[1][e] * Traits::kLowTermWeight) * ctx.unscale;
        s[e] = key < kv_end ? (unrotated + (rotated[0][e] + rotated[1][e])) * ctx.score_scale : -INFINITY;
    }
}

// tile_scores with nothing else in flight.
template <bool kProduct, int32_t kAhead>
__device__ __forceinline__ void tile_scores(const TileContext& ctx, uint32_t stage, int32_t warp, int32_t lane,
                                            int32_t tile_key0, int32_t kv_end, const CosSinAhead<kAhead>& ahead,
                                            float (&s)[4]) {
    float folded[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    tile_scores<kProduct>(ctx, stage, warp, lane, tile_key0, kv_end, ahead, folded, s, [] {});
}

// The softmax step of a tile: the warpgroup's tile maxima (posted by the warps, read after the
// group barrier), O^T rescaled where a maximum grows, P = 2^(s - max + kProbScaleLog2) as two e4m3
// terms stored into the P^T tile. Ends with the async-proxy fence and the group barrier, after
// which the P V wgmma may read the tile.
__device__ __forceinline__ void tile_softmax(const TileContext& ctx, float (&s)[4], int32_t group, int32_t warp,
                                             int32_t lane, WarpRows& rows,
                                             float (&o)[Traits::kPvDimBlocks][2][4]) {
    const int32_t g = lane / 4, t = lane % 4;
    float tile_max[2];
    warpgroup_tile_max<Traits>(s, ctx.max_slots, group, warp, lane, tile_max);
    decode_e4m3::raise_row_max(tile_max, rows, o);
    float prob[4];
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const float m = rows.max_log2[e % 2];
        const float base = (m == -INFINITY ? 0.0f : m) - Traits::kProbScaleLog2;
        prob[e] = fast_exp2(s[e] - base);
        rows.sum[e % 2] += prob[e];
    }
    uint32_t hi, lo;
    split_e4m3x4(prob, hi, lo);
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        constexpr int32_t kBitsPerByte = 8;
        const int32_t key = warp * Traits::kSubTileKeys + g + 8 * (e / 2);
        const int32_t head = 2 * t + e % 2;
        const uint32_t high_code = (hi >> (kBitsPerByte * e)) & 0xffu, low_code = (lo >> (kBitsPerByte * e)) & 0xffu;
        asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(ctx.p_tile + p_offset(head, key)), "r"(high_code) : "memory");
        asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(ctx.p_tile + p_offset(Traits::kGroup + head, key)),
                     "r"(low_code)
                     : "memory");
    }
    ptx::fence_proxy_async_shared();
    warpgroup_barrier<Traits>(group);
}

// The P V A fragments of a tile: [64-dim block][32-key step][register].
using PvFragments = uint32_t[Traits::kPvDimBlocks][Traits::kPvSteps][4];

// Issues (and commits, not waited for) O^T += V^T P^T for the 64-dim blocks [kFirst, kEnd) of a
// tile: per block D the warp's V^T fragments of its vector 4 D + w (two 32-key steps: one
// transposed ldmatrix.x4 of 4 x 8 keys each, permuted into the 8-bit A layout) into a[D] and two
// wgmma. a and o stay in use by the wgmma until the caller's wait (then pin_pv).
template <int32_t kFirst, int32_t kEnd>
__device__ __forceinline__ void issue_pv(const TileContext& ctx, uint32_t stage, int32_t warp, int32_t lane,
                                         PvFragments& a, float (&o)[Traits::kPvDimBlocks][2][4]) {
    const int32_t row = 8 * (lane / 8) + lane % 8;  // lane L: row L % 8 of matrix L / 8
#pragma unroll
    for (int32_t d = kFirst; d < kEnd; ++d) {
        const int32_t vec = d * Traits::kWarpsPerGroup + warp;
#pragma unroll
        for (int32_t step = 0; step < Traits::kPvSteps; ++step) {
            uint32_t r[4];
            ptx::ldmatrix_x4_trans(r, stage + stage_offset(step * Traits::kPvStepKeys + row, vec));
            a[d][step][0] = mma_e4m3::merge_even_dim(r[0], r[1]);
            a[d][step][1] = mma_e4m3::merge_odd_dim(r[0], r[1]);
            a[d][step][2] = mma_e4m3::merge_even_dim(r[2], r[3]);
            a[d][step][3] = mma_e4m3::merge_odd_dim(r[2], r[3]);
        }
        ptx::wgmma_fence();
#pragma unroll
        for (int32_t step = 0; step < Traits::kPvSteps; ++step)
            ptx::wgmma_m64n16k32_e4m3_rs(o[d], a[d][step], pv_step_descriptor(ctx.p_tile, step));
        ptx::wgmma_commit();
    }
}

// After the wait for a tile's P V wgmma: its A fragments and O^T stay where the wgmma used them.
__device__ __forceinline__ void pin_pv(PvFragments& a, float (&o)[Traits::kPvDimBlocks][2][4]) {
#pragma unroll
    for (int32_t d = 0; d < Traits::kPvDimBlocks; ++d) {
        ptx::pin_all(a[d]);
        ptx::pin_all(o[d]);
    }
}

// O^T += V^T P^T over a tile: all 16 wgmma in flight, waited for at the end.
__device__ __forceinline__ void tile_pv(const TileContext& ctx, uint32_t stage, int32_t warp, int32_t lane,
                                        float (&o)[Traits::kPvDimBlocks][2][4]) {
    PvFragments a;
    issue_pv<0, Traits::kPvDimBlocks>(ctx, stage, warp, lane, a, o);
    ptx::wgmma_wait<0>();
    pin_pv(a, o);
}

// Waits for the warpgroup's tile whose copies are the oldest but kStagesInFlight - 1 of the groups
// committed: every thread's copies, fenced for the async proxy, then the group barrier.
__device__ __forceinline__ void wait_group_tile(const GroupStream& stream) {
    ptx::cp_async_wait<Traits::kStagesInFlight - 1>();
    ptx::fence_proxy_async_shared();
    warpgroup_barrier<Traits>(stream.group);
}

// The warpgroup's key loop over its tiles (the first kStagesInFlight issued by the caller): wait
// for tile i (after the group barrier every thread is also done with tile i - 1), issue tile i + 2
// into tile i - 1's stage, the scores, the table words of tile i + 1's first Form::kCosSinAheadBlocks
// rotated pair blocks (tile 0's before the loop), the softmax, P V.
template <class Form, bool kProduct>
__device__ __forceinline__ void group_key_loop(const wideattn_prefill_params& p, const GroupStream& stream,
                                               const TileContext& ctx, WarpRows& rows,
                                               float (&o)[Traits::kPvDimBlocks][2][4]) {
    constexpr int32_t kAhead = Form::kCosSinAheadBlocks;
    const auto load_ahead = [&](int32_t i, CosSinAhead<kAhead>& ahead) {
        const int32_t warp_key0 = stream.tile_key0(i) + stream.warp * Traits::kSubTileKeys;
        load_cos_sin_ahead(ctx, stream.lane, ctx.first_position + warp_key0, stream.kv_end - warp_key0, ahead);
    };
    CosSinAhead<kAhead> ahead{};
    if (stream.count > 0) load_ahead(0, ahead);
    for (int32_t i = 0; i < stream.count; ++i) {
        wait_group_tile(stream);
        stream.issue(p, i + Traits::kStagesInFlight);
        const uint32_t stage = stream.stage(i);
        float s[4];
        tile_scores<kProduct>(ctx, stage, stream.warp, stream.lane, stream.tile_key0(i), stream.kv_end, ahead, s);
        if (i + 1 < stream.count) load_ahead(i + 1, ahead);
        tile_softmax(ctx, s, stream.group, stream.warp, stream.lane, rows, o);
        tile_pv(ctx, stage, stream.warp, stream.lane, o);
    }
    ptx::cp_async_wait<0>();
}

// The pipelined key loop (Form::kPipelined, decode_e4m3kfvwp_d512): the same arithmetic in the
// same order, tile i's P V wgmma in flight while tile i + 1's score wgmma and rotated build run.
// Prologue: tile 0's wait (then tile 2 issued into the free third stage), scores and softmax. Tile
// i: its P V dim blocks below kPvEarlyBlocks issued; where tile i + 1 exists, its wait (the copies
// of tiles 0 .. i + 2 committed, so kStagesInFlight - 1 may stay pending, as in group_key_loop),
// its score wgmma and rotated build, the P V dim blocks from kPvEarlyBlocks on, one wait for both
// products, then its softmax: the rescale sees O after P V of tile i, and P^T is free (every warp
// waited before the tile-maximum barrier). Tile i + 3 goes into tile i's stage once every warp is
// past the ldmatrix reads of P V i: after the tile-(i + 1) barrier when all its dim blocks were
// issued before it, else after softmax i + 1's barriers.
template <class Form, bool kProduct>
__device__ __forceinline__ void group_key_loop_pipelined(const wideattn_prefill_params& p, const GroupStream& stream,
                                                         const TileContext& ctx, WarpRows& rows,
                                                         float (&o)[Traits::kPvDimBlocks][2][4]) {
    constexpr int32_t kEarly = Form::kPvEarlyBlocks;
    constexpr bool kIssueAfterWait = kEarly == Traits::kPvDimBlocks;
    if (stream.count > 0) {
        float s[4];
        wait_group_tile(stream);
        stream.issue(p, Traits::kStagesInFlight);
        tile_scores<kProduct>(ctx, stream.stage(0), stream.warp, stream.lane, stream.tile_key0(0), stream.kv_end,
                              NoCosSinAhead{}, s);
        tile_softmax(ctx, s, stream.group, stream.warp, stream.lane, rows, o);
    }
    for (int32_t i = 0; i < stream.count; ++i) {
        const uint32_t stage = stream.stage(i);
        float folded[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
        ptx::pin_all(folded);  // zeroed here, not rematerialised under P V
        PvFragments a;
        issue_pv<0, kEarly>(ctx, stage, stream.warp, stream.lane, a, o);
        const auto issue_late_pv = [&] {
            issue_pv<kEarly, Traits::kPvDimBlocks>(ctx, stage, stream.warp, stream.lane, a, o);
        };
        if (i + 1 < stream.count) {
            float s[4];
            wait_group_tile(stream);
            if constexpr (kIssueAfterWait) stream.issue(p, i + Traits::kStages);
            tile_scores<kProduct>(ctx, stream.stage(i + 1), stream.warp, stream.lane, stream.tile_key0(i + 1),
                                  stream.kv_end, NoCosSinAhead{}, folded, s, issue_late_pv);
            pin_pv(a, o);
            tile_softmax(ctx, s, stream.group, stream.warp, stream.lane, rows, o);
            if constexpr (!kIssueAfterWait) stream.issue(p, i + Traits::kStages);
        } else {
            issue_late_pv();
            ptx::wgmma_wait<0>();
            pin_pv(a, o);
        }
    }
    ptx::cp_async_wait<0>();
}

}  // namespace wideattn::kfvw
