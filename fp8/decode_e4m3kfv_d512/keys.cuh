// keys.cuh - K from V in the single-token e4m3 decode kernel (decode_e4m3kfv_d512): the block's
// tables (k_norm's weight and the RoPE frequencies, staged in shared memory, and the power of two
// that puts every K value in f16's range), and the K operand of a 16-key sub-tile built in
// registers from its V codes: a plain ldmatrix of the V chunk gives the layout of
// decode_e4m3_d512's K fragments (mainloop.cuh there), and dim blocks c and c + 8 hold dims d and
// d + 256 at the same place of the same lane, so each lane rotates its own pairs. The arithmetic
// and its rounding steps are those of kernels/common/k_from_v.h, done on pairs of dims (bf16
// roundings by cvt.rn.bf16x2, the rotation by rope_rotate_bf16x2 of k_from_v_tables.cuh in bf16x2
// arithmetic, cos / sin from the caller's table (wideattn_k_from_v.cos_sin) where it holds every
// key of the sub-tile, else by the Cody-Waite reduction of rope_cos_sin_reduced), as
// decode_bf16kfv_d512's keys.cuh; the unrotated pair blocks first, with the table's words for the
// first kCosSinBlocksAhead rotated ones in flight. With bf16 keys (decode_e4m3kfvb_d512) the
// product path turns the codes into bf16 by bit operations (e4m3x4_to_scaled_bf16x2x2) and K's
// words pair dims (d, d + 2) and (d + 1, d + 3), Q and the product table staged to match.
#pragma once

#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "fp8/codec/e4m3.h"
#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/ptx_mma.cuh"

namespace wideattn::decode_e4m3 {

constexpr uint32_t kF32Bytes = kKFromVTableEntryBytes;

// Stages k_norm's weight and the frequencies into shared memory (stage_k_from_v_tables), and each
// warp's largest finite |w| into its slot of w_amax. Visible to the block after its next barrier.
template <class Traits>
__device__ __forceinline__ void stage_tables(const KFromV& kfv, uint32_t weight, uint32_t freq, uint32_t w_amax) {
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const float2 w = stage_k_from_v_tables<Traits>(kfv, weight, freq);
    float amax = 0.0f;
    if (fabsf(w.x) <= FLT_MAX) amax = fmaxf(amax, fabsf(w.x));
    if (fabsf(w.y) <= FLT_MAX) amax = fmaxf(amax, fabsf(w.y));
#pragma unroll
    for (int32_t offset = Traits::kWarpSize / 2; offset > 0; offset /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
    if (thread % Traits::kWarpSize == 0)
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(w_amax + kF32Bytes * (thread / Traits::kWarpSize)), "f"(amax)
                     : "memory");
}

// The power of two 2^shift of the block's K: with v_scale' = v_scale 2^-shift every K value is
// 2^-shift times the reference's (each rounding step of k_from_v.h commutes with a power of two
// while nothing underflows fp32) and lies below 2^(kKTopLog2 + 1) in magnitude. Reads the warps'
// slots of w_amax (after a block barrier). Returns 2^shift; *scaled_v_scale = v_scale 2^-shift.
template <class Traits>
__device__ __forceinline__ float k_power_of_two(uint32_t w_amax, float v_scale, float* scaled_v_scale) {
    const float amax = max_of_warp_slots<Traits>(w_amax);
    const int32_t shift = Traits::k_shift(v_scale, amax);
    *scaled_v_scale = v_scale * Traits::power_of_two(-shift);
    return Traits::power_of_two(shift);
}

// x = bf16((v v_scale) w) of the two values of an f16x2 word of dequantised V codes with their
// fp32 weights, packed: k_from_v_scaled's steps, both roundings by one cvt.rn.bf16x2.
__device__ __forceinline__ uint32_t scaled_pair(uint32_t word, float v_scale, float w_low, float w_high) {
    const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&word));
    return ptx::pack_bf16x2(v.x * v_scale * w_low, v.y * v_scale * w_high);
}

// scaled_pair of the two f16x2 words of dims (d, d + 1) and (d + 2, d + 3) with their weights w, packed
// in Traits::kBf16Keys' pair order (below): (d, d + 2) and (d + 1, d + 3), the same fp32 steps and
// roundings, the words packed from the four products instead of reordered after.
__device__ __forceinline__ void scaled_pairs_interleaved(const uint32_t (&words)[2], float v_scale, float4 w,
                                                         uint32_t (&k)[2]) {
    const float2 low = __half22float2(*reinterpret_cast<const __half2*>(&words[0]));
    const float2 high = __half22float2(*reinterpret_cast<const __half2*>(&words[1]));
    k[0] = ptx::pack_bf16x2(low.x * v_scale * w.x, high.x * v_scale * w.z);
    k[1] = ptx::pack_bf16x2(low.y * v_scale * w.y, high.y * v_scale * w.w);
}

// The two bf16 of a word as an f16x2 word (exact: the power of two keeps K in f16's range).
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t word) {
    return pack_f16x2(ptx::bf16_low(word), ptx::bf16_high(word));
}

// kProduct (Traits::kBf16Keys, decode_e4m3kfvb_d512, in a block whose v_scale is a power of two
// and every w v_scale a bf16 value: stage_weight_products): x = bf16((v v_scale) w) is one
// mul.rn.bf16x2 of the code's value (e4m3x4_to_scaled_bf16x2x2, exact) and w v_scale (scaled by
// the inverse power of two): v v_scale is then exact and v (w v_scale) has at most 4 + 8
// significant bits, so the fp32 steps round nothing before the bf16 rounding the product makes
// once; K then enters a bf16 mma as the reference's bf16 values, unscaled, against bf16 Q as the
// call gives it.

// Traits::kBf16Keys' pair order: a word of K holds dims (d, d + 2) or (d + 1, d + 3) of the four
// dims d .. d + 3 of a lane's code word, not (d, d + 1) and (d + 2, d + 3); Q (load_q_bf16) and the
// kProduct table (stage_weight_products) are staged in the same order, so the score mma adds the
// same products. interleave_pairs: (d, d + 1), (d + 2, d + 3) -> (d, d + 2), (d + 1, d + 3).
__device__ __forceinline__ void interleave_pairs(uint32_t (&pairs)[2]) {
    low_and_high_halves(pairs[0], pairs[1], &pairs[0], &pairs[1]);
}

// kProduct's codes as bf16 without an f16 step (fp8/codec/e4m3.h, e4m3x4_to_scaled_bf16x2x2): the
// values times 2^-kCodeExponentShift, (b0, b2) and (b1, b3) of a code word, the pair order above. A
// NaN code becomes a finite value: nan_code_rows (block.cuh) restores the NaN.
using fp8::e4m3x4_to_scaled_bf16x2x2;
constexpr int32_t kCodeExponentShift = fp8::kE4m3ToBf16ExponentShift;

// The kProduct table's two words for dims d .. d + 3 (d a multiple of 4): .x the products
// w v_scale 2^kCodeExponentShift of dims (d, d + 2), .y of (d + 1, d + 3) (the pair order above).
__device__ __forceinline__ uint2 load_weight_products(uint32_t products, int32_t dim) {
    uint2 w;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(w.x), "=r"(w.y) : "r"(products + kKFromVBf16EntryBytes * dim)
                 : "memory");
    return w;
}

// Stages the kProduct table at `products`: bf16(w v_scale) 2^kCodeExponentShift of the thread's
// two dims (`w`, the weights stage_k_from_v_tables returned) in the pair order above, and returns
// whether the block may take kProduct: v_scale a positive normal power of two and every weight a
// finite bf16 value whose product with it is zero or a normal float below 2^kProductTopLog2 in
// magnitude (so the product is exact and its scaled bf16 finite). Ends with a block barrier, which
// also makes the other tables visible.
template <class Traits>
__device__ __forceinline__ bool stage_weight_products(float2 w, float v_scale, uint32_t products) {
    constexpr uint32_t kMantissaAndSign = 0x807fffffu, kExponentMask = 0x7f800000u;
    const uint32_t scale_bits = __float_as_uint(v_scale);
    const uint32_t scale_exponent = scale_bits & kExponentMask;
    const bool power_of_two = (scale_bits & kMantissaAndSign) == 0 && scale_exponent != 0 && scale_exponent != kExponentMask;
    const float p0 = w.x * v_scale, p1 = w.y * v_scale;
    constexpr int32_t kProductTopLog2 = fp8::kFloatExponentBias + 1 - kCodeExponentShift;  // 2^128: bf16's overflow
    const float top = ldexpf(1.0f, kProductTopLog2);
    const auto exact = [top](float weight, float product) {
        return is_bf16_value(weight) && isfinite(weight) &&
               (product == 0.0f ? weight == 0.0f : (fabsf(product) < top && fabsf(product) >= FLT_MIN));
    };
    // Thread j holds dims 2j, 2j + 1: slots (0, 2) of its group of four for j even, (1, 3) for j odd.
    const float up = ldexpf(1.0f, kCodeExponentShift);
    const uint32_t scaled = ptx::pack_bf16x2(p0 * up, p1 * up);
    const int32_t j = static_cast<int32_t>(threadIdx.x);
    const uint32_t slot = products + kKFromVBf16EntryBytes * (4 * (j / 2) + j % 2);
    asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(slot), "h"(static_cast<uint16_t>(scaled & 0xffffu)) : "memory");
    asm volatile("st.shared.u16 [%0], %1;\n" ::"r"(slot + 2 * kKFromVBf16EntryBytes), "h"(static_cast<uint16_t>(scaled >> 16))
                 : "memory");
    return __syncthreads_and(power_of_two && exact(w.x, p0) && exact(w.y, p1)) != 0;
}

// The block's Q rows as bf16, as the call gives them, in the layout load_q writes f16 Q in (rows of
// tokens past `tokens` zero), each group of four dims in the pair order above (d, d + 2, d + 1,
// d + 3). Ends with a block barrier after which Q is readable.
template <class Traits>
__device__ __forceinline__ void load_q_bf16(const wideattn_prefill_params& p, uint32_t q_shared, int64_t first_token,
                                            int32_t tokens, int32_t kv_head) {
    constexpr int32_t kVecs = Traits::kRows * kQSourceVecsPerRow<Traits>;
    static_assert(kVecs % Traits::kThreads == 0, "every thread copies whole vectors");
#pragma unroll
    for (int32_t i = 0; i < kVecs / Traits::kThreads; ++i) {
        const int32_t v = static_cast<int32_t>(threadIdx.x) + i * Traits::kThreads;
        const uint4 raw = load_q_vector<Traits>(p, first_token, tokens, kv_head, v);
        uint32_t first[2] = {raw.x, raw.y}, second[2] = {raw.z, raw.w};
        interleave_pairs(first);
        interleave_pairs(second);
        const uint32_t address =
            q_shared + swizzled<Traits::kQRowBytes, Traits>(v / kQSourceVecsPerRow<Traits>, v % kQSourceVecsPerRow<Traits>);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(first[0]), "r"(first[1]),
                     "r"(second[0]), "r"(second[1])
                     : "memory");
    }
    __syncthreads();
}

// The table's words that the rotation of pair block c reads in a lane: [matrix q][pair], the
// word of frequencies (d, d + 1) and (d + 2, d + 3) of the matrix's dims d .. d + 3 at its key's
// position.
struct BlockCosSin {
    uint2 word[4][2];
};

template <class Traits>
__device__ __forceinline__ void load_block_cos_sin(const CosSinTable& table, int32_t lane, int32_t c,
                                                   int32_t position0, BlockCosSin* out) {
    constexpr int32_t kCodesPerWord = 4;
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t q = 0; q < 4; ++q)
#pragma unroll
        for (int32_t pair = 0; pair < 2; ++pair)
            out->word[q][pair] = table.pair(position0 + g + 8 * (q % 2),
                                            Traits::kDimBlock * c + Traits::kVecBytes * (q / 2) +
                                                kCodesPerWord * t + 2 * pair);
}

// The K of 16 keys x dim blocks c (dims 32c ..) and c + kPairBlockOffset (their partners 256 on)
// as f16 A fragments, in the layout of load_k_block (fp8/decode_e4m3_d512/mainloop.cuh): lo[b] k
// 0-7 of each 16-dim half of block b (0: c, 1: c + 8), hi[b] k 8-15. The keys' positions are
// position0 + key; v_scale is the block's scaled v_scale (k_power_of_two). The steps of
// k_from_v.h on pairs of dims (d, d + 1) of a lane: x = bf16(V w) by one cvt a pair; for a block
// holding a dim below rotary_dims / 2 rope_rotate on bf16 pairs (mul / add / sub.rn.bf16x2, each
// the fp32 step then round_to_bf16 for bf16 operands) with cos / sin by rope_cos_sin_reduced,
// rounded two at a time (kRotate), or the table's `cos_sin` (kRotateTable); for the others
// (kScale) K = x (the reference's rotation by cos 1, sin 0 gives x but for a non-finite partner,
// which makes the key's scores non-finite either way).
// Traits::kBf16Keys: the fragments hold bf16 K unscaled (v_scale is then the call's) for a bf16
// mma; with kProduct (a block that stage_weight_products allows) `weight` is that table and x one
// mul.rn.bf16x2 a pair.
template <class Traits, KFromVBuild kBuild, bool kProduct = false>
__device__ __forceinline__ void build_k_pair(uint32_t v_stage, uint32_t weight, uint32_t freq, int32_t lane,
                                             int32_t c, int32_t position0, float v_scale, const BlockCosSin& cos_sin,
                                             uint32_t (&lo)[2][4], uint32_t (&hi)[2][4]) {
    static_assert(Traits::kBf16Keys || !kProduct, "the product table serves bf16 keys");
    constexpr int32_t kCodesPerWord = 4;
    const int32_t g = lane / 4, t = lane % 4;
    uint32_t codes[2][4];
    ptx::ldmatrix_x4(codes[0], block_row_address<Traits>(v_stage, lane, c));
    ptx::ldmatrix_x4(codes[1], block_row_address<Traits>(v_stage, lane, c + Traits::kPairBlockOffset));
#pragma unroll
    for (int32_t q = 0; q < 4; ++q) {
        // Matrix q: key g + 8 (q % 2), 16-byte vector 2c + q / 2, codes 4t .. 4t + 3.
        const int32_t position = position0 + g + 8 * (q % 2);
        const int32_t dim = Traits::kDimBlock * c + Traits::kVecBytes * (q / 2) + kCodesPerWord * t;
        // K's two words of each half: dims (d, d + 1) and (d + 2, d + 3), or for Traits::kBf16Keys
        // (d, d + 2) and (d + 1, d + 3).
        uint32_t k_first[2], k_second[2];
        if constexpr (kProduct) {
            const uint2 w_first = load_weight_products(weight, dim);
            const uint2 w_second = load_weight_products(weight, dim + Traits::kHalfDim);
            uint32_t first[2], second[2];
            e4m3x4_to_scaled_bf16x2x2(codes[0][q], &first[0], &first[1]);
            e4m3x4_to_scaled_bf16x2x2(codes[1][q], &second[0], &second[1]);
            k_first[0] = ptx::mul_bf16x2(first[0], w_first.x);
            k_first[1] = ptx::mul_bf16x2(first[1], w_first.y);
            k_second[0] = ptx::mul_bf16x2(second[0], w_second.x);
            k_second[1] = ptx::mul_bf16x2(second[1], w_second.y);
        } else {
            uint32_t first_h[2], second_h[2];
            const float4 w_first = ptx::load_shared_f32x4(weight + kF32Bytes * dim);
            const float4 w_second = ptx::load_shared_f32x4(weight + kF32Bytes * (dim + Traits::kHalfDim));
            e4m3x4_to_f16x2x2(codes[0][q], first_h[0], first_h[1]);
            e4m3x4_to_f16x2x2(codes[1][q], second_h[0], second_h[1]);
            if constexpr (Traits::kBf16Keys) {
                scaled_pairs_interleaved(first_h, v_scale, w_first, k_first);
                scaled_pairs_interleaved(second_h, v_scale, w_second, k_second);
            } else {
                // Dims (d, d + 1) and (d + 2, d + 3) of the first half, the same of the second.
                k_first[0] = scaled_pair(first_h[0], v_scale, w_first.x, w_first.y);
                k_first[1] = scaled_pair(first_h[1], v_scale, w_first.z, w_first.w);
                k_second[0] = scaled_pair(second_h[0], v_scale, w_second.x, w_second.y);
                k_second[1] = scaled_pair(second_h[1], v_scale, w_second.z, w_second.w);
            }
        }
        // Frequency f of word `pair`'s element e: d + 2 pair + e, or for kBf16Keys d + pair + 2 e.
        if constexpr (kBuild == KFromVBuild::kRotateTable) {
#pragma unroll
            for (int32_t pair = 0; pair < 2; ++pair) {
                const uint2 word =
                    Traits::kBf16Keys
                        ? (pair == 0 ? make_uint2(cos_sin.word[q][0].x, cos_sin.word[q][1].x)
                                     : make_uint2(cos_sin.word[q][0].y, cos_sin.word[q][1].y))
                        : cos_sin.word[q][pair];
                rope_rotate_bf16x2(k_first[pair], k_second[pair], word, &k_first[pair], &k_second[pair]);
            }
        } else if constexpr (kBuild == KFromVBuild::kRotate) {
            const float4 inv_freq = ptx::load_shared_f32x4(freq + kF32Bytes * dim);
            const float fr[4] = {inv_freq.x, inv_freq.y, inv_freq.z, inv_freq.w};
            constexpr int32_t kPairStep = Traits::kBf16Keys ? 1 : 2, kElementStep = Traits::kBf16Keys ? 2 : 1;
#pragma unroll
            for (int32_t pair = 0; pair < 2; ++pair)
                rope_rotate_bf16x2(k_first[pair], k_second[pair], position, fr[kPairStep * pair],
                                   fr[kPairStep * pair + kElementStep], &k_first[pair], &k_second[pair]);
        }
        if constexpr (Traits::kBf16Keys) {
            lo[0][q] = k_first[0];
            hi[0][q] = k_first[1];
            lo[1][q] = k_second[0];
            hi[1][q] = k_second[1];
        } else {
            lo[0][q] = bf16x2_to_f16x2(k_first[0]);
            hi[0][q] = bf16x2_to_f16x2(k_first[1]);
            lo[1][q] = bf16x2_to_f16x2(k_second[0]);
            hi[1][q] = bf16x2_to_f16x2(k_second[1]);
        }
    }
}

// K of the pair blocks c, c + kPairBlockOffset (build_k_pair) times Q, added to acc.
template <class Traits, KFromVBuild kBuild, bool kProduct = false>
__device__ __forceinline__ void kfv_pair_scores(uint32_t v_stage, uint32_t q_shared, uint32_t weight, uint32_t freq,
                                                int32_t lane, int32_t c, int32_t position0, float v_scale,
                                                const BlockCosSin& cos_sin, float (&acc)[2][4]) {
    uint32_t lo[2][4], hi[2][4];
    build_k_pair<Traits, kBuild, kProduct>(v_stage, weight, freq, lane, c, position0, v_scale, cos_sin, lo, hi);
#pragma unroll
    for (int32_t b = 0; b < 2; ++b)
        accumulate_dim_block<Traits, Traits::kBf16Keys>(acc, lo[b], hi[b], q_shared, c + b * Traits::kPairBlockOffset,
                                                        lane);
}

// S^T of one sub-tile with K built from its V chunk (scaled to log2 units, keys past kv_end at
// -inf), the lane's 4 values: subtile_scores of decode_e4m3_d512 with build_k_pair for the loads.
// `rotated_blocks`: the pair blocks holding a dim below rotary_dims / 2 (the same for every block
// of the launch), built with the rotation after the others: with the table's cos / sin when
// `table` holds the sub-tile's valid keys (the words of the first kCosSinBlocksAhead loaded before
// the unrotated blocks), else with the formula's; the same order either way, so a table with the
// formula's values gives the same bits.
template <class Traits, bool kProduct = false>
__device__ __forceinline__ void subtile_scores_kfv(uint32_t v_stage, uint32_t q_shared, uint32_t weight, uint32_t freq,
                                                   const CosSinTable& table, int32_t lane, int32_t rotated_blocks,
                                                   int32_t position0, float v_scale, float score_scale,
                                                   int32_t keys_valid, float (&s)[4]) {
    const int32_t g = lane / 4;
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    const bool from_table = table.holds(position0, min(keys_valid, Traits::kSubTileKeys));
    BlockCosSin ahead[Traits::kCosSinBlocksAhead];
    if (from_table) {
#pragma unroll
        for (int32_t c = 0; c < Traits::kCosSinBlocksAhead; ++c)
            if (c < rotated_blocks) load_block_cos_sin<Traits>(table, lane, c, position0, &ahead[c]);
    }
#pragma unroll 1
    for (int32_t c = rotated_blocks; c < Traits::kPairBlockOffset; ++c)
        kfv_pair_scores<Traits, KFromVBuild::kScale, kProduct>(v_stage, q_shared, weight, freq, lane, c, position0, v_scale, ahead[0],
                                                acc);
    if (from_table) {
#pragma unroll
        for (int32_t c = 0; c < Traits::kCosSinBlocksAhead; ++c)
            if (c < rotated_blocks)
                kfv_pair_scores<Traits, KFromVBuild::kRotateTable, kProduct>(v_stage, q_shared, weight, freq, lane, c, position0,
                                                              v_scale, ahead[c], acc);
#pragma unroll 1
        for (int32_t c = Traits::kCosSinBlocksAhead; c < rotated_blocks; ++c) {
            BlockCosSin words;
            load_block_cos_sin<Traits>(table, lane, c, position0, &words);
            kfv_pair_scores<Traits, KFromVBuild::kRotateTable, kProduct>(v_stage, q_shared, weight, freq, lane, c, position0, v_scale,
                                                          words, acc);
        }
    } else {
#pragma unroll 1
        for (int32_t c = 0; c < rotated_blocks; ++c)
            kfv_pair_scores<Traits, KFromVBuild::kRotate, kProduct>(v_stage, q_shared, weight, freq, lane, c, position0, v_scale,
                                                     ahead[0], acc);
    }
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const int32_t key = g + 8 * (e / 2);
        s[e] = key < keys_valid ? (acc[0][e] + acc[1][e]) * score_scale : -INFINITY;
    }
}

}  // namespace wideattn::decode_e4m3
