// keys.cuh - K from V in the K-from-V decode blocks whose warps share sub-tiles
// (decode_bf16kfvw12_d512, decode_bf16kfvw16_d512): one warp's partial S^T = K Q^T of a 16-key
// sub-tile over its own k-steps (traits.h: k-steps j = kDimSplit ls + rank of both halves of the
// dims), K built in registers from the V of its slot with decode_bf16kfv_d512's build_k_step
// (kernels/decode_bf16kfv_d512/keys.cuh: the arithmetic of kernels/common/k_from_v.h on bf16 pairs,
// cos / sin from the caller's table where it holds the sub-tile's keys, else by
// rope_cos_sin_reduced). The warp's unrotated k-steps first, with the table words of its first
// kCosSinStepsAhead rotated k-steps in flight, then the rotated ones.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/decode_bf16_d512/mainloop.cuh"
#include "kernels/decode_bf16kfv_d512/keys.cuh"
#include "kernels/decode_bf16kfvw12_d512/traits.h"

namespace wideattn::decode_bf16 {

// The table words the rotation of global k-step `step` reads in a lane, [half][key]: the word of
// frequencies d, d + 1 (d = 16 step + 8 half + 2t) at the position of key g + 8 key.
template <class Traits>
__device__ __forceinline__ void load_step_cos_sin(const CosSinTable& table, int32_t lane, int32_t step,
                                                  int32_t position0, uint2 (&words)[2][2]) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t half = 0; half < 2; ++half)
#pragma unroll
        for (int32_t key = 0; key < 2; ++key)
            words[half][key] = table.pair(position0 + g + Traits::kMmaM / 2 * key,
                                          Traits::kMmaK * step + Traits::kMmaK / 2 * half + 2 * t);
}

// Adds K Q^T of the warp's local k-step `ls` (global k-step kDimSplit ls + rank of both halves)
// to acc[0] (low half) and acc[1] (high half), K built from the slot's V by build_k_step.
template <class Traits, KFromVBuild kBuild, bool kBf16Weights>
__device__ __forceinline__ void kfvw_scores_step(uint32_t slot, uint32_t q_shared, uint32_t weight,
                                                 uint32_t weight_bf16, uint32_t freq, int32_t lane, int32_t rank,
                                                 int32_t ls, int32_t position0, const uint2 (&words)[2][2],
                                                 float (&acc)[2][4]) {
    const int32_t step = Traits::kDimSplit * ls + rank;
    // Q^T B fragments of the step in both halves: matrices 0, 1 the low half's vectors 2 step,
    // 2 step + 1, matrices 2, 3 the high half's.
    const int32_t matrix = lane / 8;
    const int32_t q_vec = (matrix / 2) * Traits::kHalfVecs + 2 * step + matrix % 2;
    uint32_t b[4];
    ptx::ldmatrix_x4(b, q_shared + swizzled<Traits::kQRowBytes, Traits>(lane % 8, q_vec));
    uint32_t a_lo[4], a_hi[4];
    ptx::ldmatrix_x4(a_lo, chunk_row_address<Traits>(slot, lane, ls));
    ptx::ldmatrix_x4(a_hi, chunk_row_address<Traits>(slot, lane, Traits::kWarpSteps + ls));
    build_k_step<Traits, kBuild, kBf16Weights>(a_lo, a_hi, weight, weight_bf16, freq, words, lane, step, position0);
    ptx::mma_bf16_16816(acc[0], a_lo, b[0], b[1]);
    ptx::mma_bf16_16816(acc[1], a_hi, b[2], b[3]);
}

// The warp's partial S^T of one sub-tile (unscaled, over its dims): the lane's 4 values in part.
// `rotated`: the warp's local k-steps that hold a rotating dim (a prefix: ls < rotated), the same
// for every sub-tile of the launch.
template <class Traits, bool kBf16Weights>
__device__ __forceinline__ void kfvw_partial_scores(uint32_t slot, uint32_t q_shared, uint32_t weight,
                                                    uint32_t weight_bf16, uint32_t freq, const CosSinTable& table,
                                                    int32_t lane, int32_t rank, int32_t rotated, int32_t position0,
                                                    int32_t keys_valid, float (&part)[4]) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const bool from_table = table.holds(position0, min(keys_valid, Traits::kSubTileKeys));
    uint2 ahead[Traits::kCosSinStepsAhead][2][2];
    if (from_table) {
#pragma unroll
        for (int32_t ls = 0; ls < Traits::kCosSinStepsAhead; ++ls)
            if (ls < rotated)
                load_step_cos_sin<Traits>(table, lane, Traits::kDimSplit * ls + rank, position0, ahead[ls]);
    }
#pragma unroll 1
    for (int32_t ls = rotated; ls < Traits::kWarpSteps; ++ls)
        kfvw_scores_step<Traits, KFromVBuild::kScale, kBf16Weights>(slot, q_shared, weight, weight_bf16, freq, lane,
                                                                   rank, ls, position0, ahead[0], acc);
    if (from_table) {
#pragma unroll
        for (int32_t ls = 0; ls < Traits::kCosSinStepsAhead; ++ls)
            if (ls < rotated)
                kfvw_scores_step<Traits, KFromVBuild::kRotateTable, kBf16Weights>(
                    slot, q_shared, weight, weight_bf16, freq, lane, rank, ls, position0, ahead[ls], acc);
#pragma unroll 1
        for (int32_t ls = Traits::kCosSinStepsAhead; ls < rotated; ++ls) {
            uint2 words[2][2];
            load_step_cos_sin<Traits>(table, lane, Traits::kDimSplit * ls + rank, position0, words);
            kfvw_scores_step<Traits, KFromVBuild::kRotateTable, kBf16Weights>(slot, q_shared, weight, weight_bf16,
                                                                             freq, lane, rank, ls, position0, words,
                                                                             acc);
        }
    } else {
#pragma unroll 1
        for (int32_t ls = 0; ls < rotated; ++ls)
            kfvw_scores_step<Traits, KFromVBuild::kRotate, kBf16Weights>(slot, q_shared, weight, weight_bf16, freq,
                                                                        lane, rank, ls, position0, ahead[0], acc);
    }
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) part[e] = acc[0][e] + acc[1][e];
}

}  // namespace wideattn::decode_bf16
