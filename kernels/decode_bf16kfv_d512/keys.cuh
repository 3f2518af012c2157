// keys.cuh - K from V in the single-token BF16 decode kernel (decode_bf16kfv_d512): the block's
// tables (k_norm's weight and the RoPE frequencies, staged in shared memory) and S^T = K Q^T of a
// 16-key sub-tile with K built in registers from its two V chunks. A plain ldmatrix of a V chunk
// gives the layout of decode_bf16_d512's K fragments (kernels/decode_bf16_d512/mainloop.cuh), and
// the chunks of dims 0-255 and 256-511 hold the two dims of a RoPE pair at the same place of the
// same lane, so each lane rotates its own pairs. The arithmetic and its rounding steps are those
// of kernels/common/k_from_v.h:
// - k-steps whose 16 dims all have inv_freq 0 (from rotary_dims / 2 on; 12 of 16 with Gemma 4's
//   description): K = bf16(V w), 2.5 instructions an element (two bf16 unpacks, two products and
//   one cvt.rn.bf16x2 a pair). The reference's rotation leaves such an element unchanged when its
//   partner is finite; with a non-finite partner it makes it NaN, which this path does not (the
//   key's score and P V are non-finite either way: the partner is in the same V row).
// - the other k-steps: the steps of k_from_v_scaled and rope_rotate, each bf16 rounding of two
//   values by one cvt.rn.bf16x2, and per (key, frequency) cos / sin by rope_cos_sin_reduced (a
//   Cody-Waite reduction, not cosf / sinf's Payne-Hanek path) with both rounded by one cvt.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/k_from_v_tables.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/decode_bf16_d512/mainloop.cuh"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn::decode_bf16 {

constexpr uint32_t kF32Bytes = kKFromVTableEntryBytes;

// bf16(v w) of the two bf16 of `word` (dims d, d + 1) with their weights, packed again.
__device__ __forceinline__ uint32_t scaled_pair(uint32_t word, float2 w) {
    return ptx::pack_bf16x2(ptx::bf16_low(word) * w.x, ptx::bf16_high(word) * w.y);
}

// The K of A-fragment register r of k-step `step` (0 .. 15 of a chunk) in both chunks, built from
// the V words in place (lo: dims d, d + 1; hi: d + 256, d + 257), for a k-step without rotation.
template <class Traits>
__device__ __forceinline__ void scale_step(uint32_t (&lo)[4], uint32_t (&hi)[4], uint32_t weight, int32_t lane,
                                           int32_t step) {
    const int32_t t = lane % 4;
#pragma unroll
    for (int32_t half = 0; half < 2; ++half) {
        // Registers 2 half and 2 half + 1 (keys g, g + 8) share their dims.
        const int32_t dim = Traits::kMmaK * step + Traits::kMmaK / 2 * half + 2 * t;
        const float2 w_lo = ptx::load_shared_f32x2(weight + kF32Bytes * dim);
        const float2 w_hi = ptx::load_shared_f32x2(weight + kF32Bytes * (dim + Traits::kHalfDim));
#pragma unroll
        for (int32_t key = 0; key < 2; ++key) {
            const int32_t r = 2 * half + key;
            lo[r] = scaled_pair(lo[r], w_lo);
            hi[r] = scaled_pair(hi[r], w_hi);
        }
    }
}

// Both values of `word` as floats (the low bf16 first).
__device__ __forceinline__ float2 unpack_bf16x2(uint32_t word) { return {ptx::bf16_low(word), ptx::bf16_high(word)}; }

// Two fp32 values each rounded to bf16 (returned as the floats they stand for) by one
// cvt.rn.bf16x2: round_to_bf16 of k_from_v.h for every non-NaN value (a NaN stays a NaN).
__device__ __forceinline__ float2 round_pair_to_bf16(float a, float b) { return unpack_bf16x2(ptx::pack_bf16x2(a, b)); }

// The mode's bf16 cos and sin of one (position, frequency): rope_cos_sin_reduced's values, the
// rounding of both by one cvt; past its range (or for a non-finite angle) rope_cos_sin's.
__device__ __forceinline__ float2 kfv_cos_sin(int32_t position, float inv_freq) {
    const float angle = rope_angle(position, inv_freq);
    if (fabsf(angle) <= kRopeReducedMaxAngle) {
        float c, s;
        rope_cos_sin_reduced_f32(angle, &c, &s);
        return round_pair_to_bf16(c, s);
    }
    const RopeCosSin cs = rope_cos_sin(angle);
    return {cs.c, cs.s};
}

// The same with the rotation of k_from_v.h (k_from_v_scaled, rope_cos_sin, rope_rotate), each
// bf16 rounding step of it done by round_pair_to_bf16 on two values at once; `position0`: the
// RoPE position of the sub-tile's key 0. The rotation's rotate_half(x) s of a first-half dim is
// bf16(-x' s) = -bf16(x' s) (round to nearest even is odd-symmetric).
template <class Traits>
__device__ __forceinline__ void rotate_step(uint32_t (&lo)[4], uint32_t (&hi)[4], uint32_t weight, uint32_t freq,
                                            int32_t lane, int32_t step, int32_t position0) {
    const int32_t g = lane / 4, t = lane % 4;
#pragma unroll
    for (int32_t half = 0; half < 2; ++half) {
        const int32_t dim = Traits::kMmaK * step + Traits::kMmaK / 2 * half + 2 * t;
        const float2 w_lo = ptx::load_shared_f32x2(weight + kF32Bytes * dim);
        const float2 w_hi = ptx::load_shared_f32x2(weight + kF32Bytes * (dim + Traits::kHalfDim));
        const float2 inv_freq = ptx::load_shared_f32x2(freq + kF32Bytes * dim);
#pragma unroll
        for (int32_t key = 0; key < 2; ++key) {
            const int32_t r = 2 * half + key;
            const int32_t position = position0 + g + Traits::kMmaM / 2 * key;
            const float2 v_lo = unpack_bf16x2(lo[r]), v_hi = unpack_bf16x2(hi[r]);
            // x = bf16(V w) of dims d, d + 1 (first half) and d + 256, d + 257 (their partners).
            const float2 x_lo = round_pair_to_bf16(v_lo.x * w_lo.x, v_lo.y * w_lo.y);
            const float2 x_hi = round_pair_to_bf16(v_hi.x * w_hi.x, v_hi.y * w_hi.y);
            const float2 cs0 = kfv_cos_sin(position, inv_freq.x), cs1 = kfv_cos_sin(position, inv_freq.y);
            // bf16(x c) and bf16(x' s) of both dims, then K = bf16(bf16(x c) -+ bf16(x' s)).
            const float2 lo_c = round_pair_to_bf16(x_lo.x * cs0.x, x_lo.y * cs1.x);
            const float2 hi_s = round_pair_to_bf16(x_hi.x * cs0.y, x_hi.y * cs1.y);
            const float2 hi_c = round_pair_to_bf16(x_hi.x * cs0.x, x_hi.y * cs1.x);
            const float2 lo_s = round_pair_to_bf16(x_lo.x * cs0.y, x_lo.y * cs1.y);
            lo[r] = ptx::pack_bf16x2(lo_c.x - hi_s.x, lo_c.y - hi_s.y);
            hi[r] = ptx::pack_bf16x2(hi_c.x + lo_s.x, hi_c.y + lo_s.y);
        }
    }
}

// Adds K Q^T of Q-load `q` (k-steps 2q, 2q + 1 of both chunks) to acc[0] (dims 0-255) and acc[1]
// (dims 256-511), K built from the chunks' V by rotate_step or scale_step.
template <class Traits, bool kRotate>
__device__ __forceinline__ void kfv_scores_q(uint32_t lo_chunk, uint32_t hi_chunk, uint32_t q_shared,
                                             uint32_t weight, uint32_t freq, int32_t lane, int32_t q,
                                             int32_t position0, float (&acc)[2][4]) {
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
        if constexpr (kRotate)
            rotate_step<Traits>(a_lo, a_hi, weight, freq, lane, step, position0);
        else
            scale_step<Traits>(a_lo, a_hi, weight, lane, step);
        ptx::mma_bf16_16816(acc[0], a_lo, b_lo[2 * h], b_lo[2 * h + 1]);
        ptx::mma_bf16_16816(acc[1], a_hi, b_hi[2 * h], b_hi[2 * h + 1]);
    }
}

// S^T of one sub-tile with K built from its V chunks (scaled to log2 units, keys past kv_end at
// -inf), the lane's 4 values. `rotated_q_loads`: the Q loads (pairs of k-steps) that hold a dim
// below rotary_dims / 2, the same for every block of the launch.
template <class Traits>
__device__ __forceinline__ void kfv_subtile_scores(uint32_t lo_chunk, uint32_t hi_chunk, uint32_t q_shared,
                                                   uint32_t weight, uint32_t freq, int32_t lane,
                                                   int32_t rotated_q_loads, int32_t position0, float score_scale,
                                                   int32_t keys_valid, float (&s)[4]) {
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 1
    for (int32_t q = 0; q < rotated_q_loads; ++q)
        kfv_scores_q<Traits, true>(lo_chunk, hi_chunk, q_shared, weight, freq, lane, q, position0, acc);
#pragma unroll 1
    for (int32_t q = rotated_q_loads; q < Traits::kQLoadsPerChunk; ++q)
        kfv_scores_q<Traits, false>(lo_chunk, hi_chunk, q_shared, weight, freq, lane, q, position0, acc);
    finish_scores(acc, lane, score_scale, keys_valid, s);
}

}  // namespace wideattn::decode_bf16
