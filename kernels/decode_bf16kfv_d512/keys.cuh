// keys.cuh - K from V in the single-token BF16 decode kernel (decode_bf16kfv_d512): the block's
// tables (k_norm's weight and the RoPE frequencies, staged in shared memory) and S^T = K Q^T of a
// 16-key sub-tile with K built in registers from its two V chunks. A plain ldmatrix of a V chunk
// gives the layout of decode_bf16_d512's K fragments (kernels/decode_bf16_d512/mainloop.cuh), and
// the chunks of dims 0-255 and 256-511 hold the two dims of a RoPE pair at the same place of the
// same lane, so each lane rotates its own pairs. The arithmetic and its rounding steps are those
// of kernels/common/k_from_v.h, done on bf16 pairs where its operands are bf16 values
// (mul / add / sub.rn.bf16x2 round the exact result once, as fp32 then round_to_bf16 does):
// - x = bf16(V w): with weights that are all bf16 values (a bf16 checkpoint's: Gemma 4's k_norm
//   multiplies by the weight itself), one mul.rn.bf16x2 a register; otherwise two fp32 products
//   and one cvt.rn.bf16x2 a pair.
// - k-steps whose 16 dims all have inv_freq 0 (from rotary_dims / 2 on; 12 of 16 with Gemma 4's
//   description): K = x. The reference's rotation leaves such an element unchanged when its
//   partner is finite; with a non-finite partner it makes it NaN, which this path does not (the
//   key's score and P V are non-finite either way: the partner is in the same V row).
// - the other k-steps: k_from_v.h's rope_rotate on bf16 pairs (rope_rotate_bf16x2 of
//   k_from_v_tables.cuh, shared with decode_e4m3kfv_d512), K = bf16(bf16(x c) -+ bf16(x' s)), with
//   cos / sin per (key, frequency) from the caller's table (wideattn_k_from_v.cos_sin) when it
//   holds every key of the sub-tile, else by rope_cos_sin_reduced (a Cody-Waite reduction, not
//   cosf / sinf's Payne-Hanek path), the cos and the sin of two frequencies rounded by one cvt each.
// The unrotated k-steps come first: the table's words for the first kCosSinQLoadsAhead rotated Q
// loads are loaded before them, so their reads are in flight while those run.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/decode_bf16_d512/mainloop.cuh"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn::decode_bf16 {

constexpr uint32_t kF32Bytes = kKFromVTableEntryBytes;
constexpr uint32_t kBf16Bytes = kKFromVBf16EntryBytes;  // one entry of the bf16 copy of k_norm's weight

// x = bf16(v w) of the two bf16 of `word` (dims d, d + 1), packed: by one mul.rn.bf16x2 with the
// weights' bf16 pair `w_bf16` when kBf16Weights (every weight a bf16 value), else from the fp32
// weights `w`.
template <bool kBf16Weights>
__device__ __forceinline__ uint32_t scaled_pair(uint32_t word, float2 w, uint32_t w_bf16) {
    if constexpr (kBf16Weights)
        return ptx::mul_bf16x2(word, w_bf16);
    else
        return ptx::pack_bf16x2(ptx::bf16_low(word) * w.x, ptx::bf16_high(word) * w.y);
}

// The weights of dims dim, dim + 1 in the table kBf16Weights reads (the other stays unused).
template <bool kBf16Weights>
__device__ __forceinline__ void load_weight_pair(uint32_t weight, uint32_t weight_bf16, int32_t dim, float2* w,
                                                 uint32_t* w_bf16) {
    if constexpr (kBf16Weights)
        *w_bf16 = ptx::load_shared_u32(weight_bf16 + kBf16Bytes * dim);
    else
        *w = ptx::load_shared_f32x2(weight + kF32Bytes * dim);
}

// The table's words that the rotation of Q load q reads in a lane: [k-step][half][key], the word of
// frequencies d, d + 1 (d the first dim of the register) at the key's position.
template <class Traits>
struct QLoadCosSin {
    uint2 word[Traits::kKStepsPerQLoad][2][2];
};

template <class Traits>
__device__ __forceinline__ void load_q_cos_sin(const CosSinTable& table, int32_t lane, int32_t q, int32_t position0,
                                               QLoadCosSin<Traits>* out) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t h = 0; h < Traits::kKStepsPerQLoad; ++h)
#pragma unroll
        for (int32_t half = 0; half < 2; ++half)
#pragma unroll
            for (int32_t key = 0; key < 2; ++key)
                out->word[h][half][key] =
                    table.pair(position0 + g + Traits::kMmaM / 2 * key,
                               Traits::kMmaK * (Traits::kKStepsPerQLoad * q + h) + Traits::kMmaK / 2 * half + 2 * t);
}

// The K of the A-fragment registers of k-step `step` (0 .. 15 of a chunk) in both chunks, built
// from the V words in place (lo: dims d, d + 1; hi: d + 256, d + 257; registers 2 half and
// 2 half + 1 hold keys g and g + 8 of the same dims): x = bf16(V w) (k_from_v_scaled), then by
// kBuild nothing (no dim of the k-step rotates), rope_rotate_bf16x2 with the formula's cos / sin of
// the keys' positions (position0: the sub-tile's key 0), or with the table's `words` [half][key]
// (load_q_cos_sin).
template <class Traits, KFromVBuild kBuild, bool kBf16Weights>
__device__ __forceinline__ void build_k_step(uint32_t (&lo)[4], uint32_t (&hi)[4], uint32_t weight,
                                             uint32_t weight_bf16, uint32_t freq, const uint2 (&words)[2][2],
                                             int32_t lane, int32_t step, int32_t position0) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t half = 0; half < 2; ++half) {
        const int32_t dim = Traits::kMmaK * step + Traits::kMmaK / 2 * half + 2 * t;
        float2 w_lo{}, w_hi{};
        uint32_t w_lo_bf16 = 0, w_hi_bf16 = 0;
        load_weight_pair<kBf16Weights>(weight, weight_bf16, dim, &w_lo, &w_lo_bf16);
        load_weight_pair<kBf16Weights>(weight, weight_bf16, dim + Traits::kHalfDim, &w_hi, &w_hi_bf16);
        float2 inv_freq{};
        if constexpr (kBuild == KFromVBuild::kRotate) inv_freq = ptx::load_shared_f32x2(freq + kF32Bytes * dim);
#pragma unroll
        for (int32_t key = 0; key < 2; ++key) {
            const int32_t r = 2 * half + key;
            const uint32_t x_lo = scaled_pair<kBf16Weights>(lo[r], w_lo, w_lo_bf16);
            const uint32_t x_hi = scaled_pair<kBf16Weights>(hi[r], w_hi, w_hi_bf16);
            if constexpr (kBuild == KFromVBuild::kScale) {
                lo[r] = x_lo;
                hi[r] = x_hi;
            } else if constexpr (kBuild == KFromVBuild::kRotate) {
                rope_rotate_bf16x2(x_lo, x_hi, position0 + g + Traits::kMmaM / 2 * key, inv_freq.x, inv_freq.y,
                                   &lo[r], &hi[r]);
            } else {
                rope_rotate_bf16x2(x_lo, x_hi, words[half][key], &lo[r], &hi[r]);
            }
        }
    }
}

// Adds K Q^T of Q-load `q` (k-steps 2q, 2q + 1 of both chunks) to acc[0] (dims 0-255) and acc[1]
// (dims 256-511), K built from the chunks' V by build_k_step (`cos_sin`: the Q load's table
// words, read by kRotateTable only).
template <class Traits, KFromVBuild kBuild, bool kBf16Weights>
__device__ __forceinline__ void kfv_scores_q(uint32_t lo_chunk, uint32_t hi_chunk, uint32_t q_shared,
                                             uint32_t weight, uint32_t weight_bf16, uint32_t freq, int32_t lane,
                                             int32_t q, int32_t position0, const QLoadCosSin<Traits>& cos_sin,
                                             float (&acc)[2][4]) {
    constexpr int32_t kStepVecs = Traits::kMmaK * Traits::kElemBytes / Traits::kVecBytes;  // 2
    constexpr int32_t kChunkQVecs = Traits::kChunkRowBytes / Traits::kVecBytes;            // 32
    uint32_t b_lo[4], b_hi[4];
    const int32_t q_vec = 2 * kStepVecs * q + lane / 8;
    ptx::ldmatrix_x4(b_lo, q_shared + swizzled<Traits::kQRowBytes, Traits>(lane % 8, q_vec));
    ptx::ldmatrix_x4(b_hi, q_shared + swizzled<Traits::kQRowBytes, Traits>(lane % 8, kChunkQVecs + q_vec));
#pragma unroll
    for (int32_t h = 0; h < Traits::kKStepsPerQLoad; ++h) {
        const int32_t step = Traits::kKStepsPerQLoad * q + h;
        uint32_t a_lo[4], a_hi[4];
        ptx::ldmatrix_x4(a_lo, chunk_row_address<Traits>(lo_chunk, lane, step));
        ptx::ldmatrix_x4(a_hi, chunk_row_address<Traits>(hi_chunk, lane, step));
        build_k_step<Traits, kBuild, kBf16Weights>(a_lo, a_hi, weight, weight_bf16, freq, cos_sin.word[h], lane, step,
                                                   position0);
        ptx::mma_bf16_16816(acc[0], a_lo, b_lo[2 * h], b_lo[2 * h + 1]);
        ptx::mma_bf16_16816(acc[1], a_hi, b_hi[2 * h], b_hi[2 * h + 1]);
    }
}

// S^T of one sub-tile with K built from its V chunks (scaled to log2 units, keys past kv_end at
// -inf), the lane's 4 values. `rotated_q_loads`: the Q loads (pairs of k-steps) that hold a dim
// below rotary_dims / 2, the same for every block of the launch; kBf16Weights: every k_norm weight
// is a bf16 value (`weight_bf16` holds them as bf16 pairs). The unrotated Q loads first, then the
// rotated ones, with the table's cos / sin when `table` holds the sub-tile's valid keys (their
// words for the first kCosSinQLoadsAhead rotated Q loads loaded before the unrotated ones), else
// with the formula's: the same order either way, so a table with the formula's values gives the
// same bits.
template <class Traits, bool kBf16Weights>
__device__ __forceinline__ void kfv_subtile_scores(uint32_t lo_chunk, uint32_t hi_chunk, uint32_t q_shared,
                                                   uint32_t weight, uint32_t weight_bf16, uint32_t freq,
                                                   const CosSinTable& table, int32_t lane, int32_t rotated_q_loads,
                                                   int32_t position0, float score_scale, int32_t keys_valid,
                                                   float (&s)[4]) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const bool from_table = table.holds(position0, min(keys_valid, Traits::kSubTileKeys));
    QLoadCosSin<Traits> ahead[Traits::kCosSinQLoadsAhead];
    if (from_table) {
#pragma unroll
        for (int32_t q = 0; q < Traits::kCosSinQLoadsAhead; ++q)
            if (q < rotated_q_loads) load_q_cos_sin<Traits>(table, lane, q, position0, &ahead[q]);
    }
#pragma unroll 1
    for (int32_t q = rotated_q_loads; q < Traits::kQLoadsPerChunk; ++q)
        kfv_scores_q<Traits, KFromVBuild::kScale, kBf16Weights>(lo_chunk, hi_chunk, q_shared, weight, weight_bf16, freq,
                                                            lane, q, position0, ahead[0], acc);
    if (from_table) {
#pragma unroll
        for (int32_t q = 0; q < Traits::kCosSinQLoadsAhead; ++q)
            if (q < rotated_q_loads)
                kfv_scores_q<Traits, KFromVBuild::kRotateTable, kBf16Weights>(lo_chunk, hi_chunk, q_shared, weight,
                                                                          weight_bf16, freq, lane, q, position0,
                                                                          ahead[q], acc);
#pragma unroll 1
        for (int32_t q = Traits::kCosSinQLoadsAhead; q < rotated_q_loads; ++q) {
            QLoadCosSin<Traits> words;
            load_q_cos_sin<Traits>(table, lane, q, position0, &words);
            kfv_scores_q<Traits, KFromVBuild::kRotateTable, kBf16Weights>(lo_chunk, hi_chunk, q_shared, weight,
                                                                      weight_bf16, freq, lane, q, position0, words,
                                                                      acc);
        }
    } else {
#pragma unroll 1
        for (int32_t q = 0; q < rotated_q_loads; ++q)
            kfv_scores_q<Traits, KFromVBuild::kRotate, kBf16Weights>(lo_chunk, hi_chunk, q_shared, weight, weight_bf16,
                                                                 freq, lane, q, position0, ahead[0], acc);
    }
    finish_scores(acc, lane, score_scale, keys_valid, s);
}

}  // namespace wideattn::decode_bf16
