// keys.cuh - K from V in the single-token e4m3 decode kernel (decode_e4m3kfv_d512): the block's
// tables (k_norm's weight and the RoPE frequencies, staged in shared memory, and the power of two
// that puts every K value in f16's range), and the K operand of a 16-key sub-tile built in
// registers from its V codes: a plain ldmatrix of the V chunk gives the layout of
// decode_e4m3_d512's K fragments (mainloop.cuh there), and dim blocks c and c + 8 hold dims d and
// d + 256 at the same place of the same lane, so each lane rotates its own pairs. The arithmetic
// and its rounding steps are those of kernels/common/k_from_v.h.
#pragma once

#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

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

// The K of 16 keys x dim blocks c (dims 32c ..) and c + kPairBlockOffset (their partners 256 on)
// as f16 A fragments, in the layout of load_k_block (fp8/decode_e4m3_d512/mainloop.cuh): lo[b] k
// 0-7 of each 16-dim half of block b (0: c, 1: c + 8), hi[b] k 8-15. The keys' positions are
// position0 + key; v_scale is the block's scaled v_scale (k_power_of_two).
template <class Traits>
__device__ __forceinline__ void build_k_pair(uint32_t v_stage, uint32_t weight, uint32_t freq, int32_t lane,
                                             int32_t c, int32_t position0, float v_scale, uint32_t (&lo)[2][4],
                                             uint32_t (&hi)[2][4]) {
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
        const float4 w_first = ptx::load_shared_f32x4(weight + kF32Bytes * dim);
        const float4 w_second = ptx::load_shared_f32x4(weight + kF32Bytes * (dim + Traits::kHalfDim));
        const float4 inv_freq = ptx::load_shared_f32x4(freq + kF32Bytes * dim);
        const float wf[4] = {w_first.x, w_first.y, w_first.z, w_first.w};
        const float ws[4] = {w_second.x, w_second.y, w_second.z, w_second.w};
        const float fr[4] = {inv_freq.x, inv_freq.y, inv_freq.z, inv_freq.w};
        uint32_t first_h[2], second_h[2];
        e4m3x4_to_f16x2x2(codes[0][q], first_h[0], first_h[1]);
        e4m3x4_to_f16x2x2(codes[1][q], second_h[0], second_h[1]);
        float k_first[4], k_second[4];
#pragma unroll
        for (int32_t e = 0; e < kCodesPerWord; ++e) {
            const uint32_t word_first = first_h[e / 2], word_second = second_h[e / 2];
            const __half v_first = __ushort_as_half(static_cast<unsigned short>(e % 2 ? word_first >> 16 : word_first));
            const __half v_second =
                __ushort_as_half(static_cast<unsigned short>(e % 2 ? word_second >> 16 : word_second));
            const float x_first = k_from_v_scaled(__half2float(v_first) * v_scale, wf[e]);
            const float x_second = k_from_v_scaled(__half2float(v_second) * v_scale, ws[e]);
            RopeCosSin cs{1.0f, 0.0f};
            if (fr[e] != 0.0f) cs = rope_cos_sin(rope_angle(position, fr[e]));
            k_first[e] = rope_rotate(x_first, x_second, cs, true);
            k_second[e] = rope_rotate(x_second, x_first, cs, false);
        }
        lo[0][q] = pack_f16x2(k_first[0], k_first[1]);
        hi[0][q] = pack_f16x2(k_first[2], k_first[3]);
        lo[1][q] = pack_f16x2(k_second[0], k_second[1]);
        hi[1][q] = pack_f16x2(k_second[2], k_second[3]);
    }
}

// S^T of one sub-tile with K built from its V chunk (scaled to log2 units, keys past kv_end at
// -inf), the lane's 4 values: subtile_scores of decode_e4m3_d512 with build_k_pair for the loads.
template <class Traits>
__device__ __forceinline__ void subtile_scores_kfv(uint32_t v_stage, uint32_t q_shared, uint32_t weight, uint32_t freq,
                                                   int32_t lane, int32_t position0, float v_scale, float score_scale,
                                                   int32_t keys_valid, float (&s)[4]) {
    const int32_t g = lane / 4;
    float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll 1
    for (int32_t c = 0; c < Traits::kPairBlockOffset; ++c) {
        uint32_t lo[2][4], hi[2][4];
        build_k_pair<Traits>(v_stage, weight, freq, lane, c, position0, v_scale, lo, hi);
#pragma unroll
        for (int32_t b = 0; b < 2; ++b)
            accumulate_dim_block<Traits>(acc, lo[b], hi[b], q_shared, c + b * Traits::kPairBlockOffset, lane);
    }
#pragma unroll
    for (int32_t e = 0; e < 4; ++e) {
        const int32_t key = g + 8 * (e / 2);
        s[e] = key < keys_valid ? (acc[0][e] + acc[1][e]) * score_scale : -INFINITY;
    }
}

}  // namespace wideattn::decode_e4m3
