// k_from_v_tables.cuh - the device pieces shared by the kernels that rebuild K from V
// (decode_e4m3kfv_d512, decode_bf16kfv_d512): the shared-memory tables, k_norm's weight (head_dim
// fp32) and inv_freq of the head_dim / 2 frequencies (fp32, 0 from rotary_dims / 2 on), staged
// once per block, one frequency and two weights per thread, and read back as vectors by the K
// build; and the rotation of a lane's bf16 pairs (rope_rotate_bf16x2).
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/ptx_mma.cuh"

namespace wideattn {

constexpr uint32_t kKFromVTableEntryBytes = sizeof(float);  // one table entry in shared memory

// Stages the two tables at `weight` and `freq` (k_from_v_inv_freq: the caller's entries below
// rotary_dims / 2, or computed from rope_theta; 0 past them), read within their validated extents
// (head_dim and rotary_dims / 2 entries). Needs Traits::kThreads == head_dim / 2. Returns the
// thread's two weights. Visible to the block after its next barrier.
template <class Traits>
__device__ __forceinline__ float2 stage_k_from_v_tables(const KFromV& kfv, uint32_t weight, uint32_t freq) {
    static_assert(Traits::kHeadDim == 2 * Traits::kThreads, "one frequency and two weights per thread");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    // Two scalar loads: the table is only 4-byte aligned (dispatch/validation.cpp).
    const float2 w = make_float2(__ldg(kfv.k_norm_scale + 2 * thread), __ldg(kfv.k_norm_scale + 2 * thread + 1));
    const float inv_freq = k_from_v_inv_freq(kfv, thread, Traits::kHeadDim);
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(weight + 2 * kKFromVTableEntryBytes * thread), "f"(w.x),
                 "f"(w.y)
                 : "memory");
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(freq + kKFromVTableEntryBytes * thread), "f"(inv_freq) : "memory");
    return w;
}

// k_from_v.h's rope_rotate of two RoPE pairs at once: x_first holds x of dims d, d + 1 (bf16
// pair), x_second their partners d + D/2, d + D/2 + 1; inv_freq0 / inv_freq1 the frequencies of
// dims d and d + 1. Returns K of the first dims in *k_first and of the partners in *k_second:
// K = bf16(bf16(x c) - bf16(x' s)) and bf16(bf16(x' c) + bf16(x s)) (rotate_half's bf16(-x' s) is
// -bf16(x' s): round to nearest even is odd-symmetric), each step by mul / sub / add.rn.bf16x2
// (the exact result rounded once, as the fp32 step then round_to_bf16 for bf16 operands), with
// cos / sin by rope_cos_sin_reduced, the cos and the sin of the two frequencies rounded by one
// cvt each.
__device__ __forceinline__ void rope_rotate_bf16x2(uint32_t x_first, uint32_t x_second, int32_t position,
                                                   float inv_freq0, float inv_freq1, uint32_t* k_first,
                                                   uint32_t* k_second) {
    const RopeCosSin cs0 = rope_cos_sin_reduced_unrounded(rope_angle(position, inv_freq0));
    const RopeCosSin cs1 = rope_cos_sin_reduced_unrounded(rope_angle(position, inv_freq1));
    const uint32_t c = ptx::pack_bf16x2(cs0.c, cs1.c), s = ptx::pack_bf16x2(cs0.s, cs1.s);
    *k_first = ptx::sub_bf16x2(ptx::mul_bf16x2(x_first, c), ptx::mul_bf16x2(x_second, s));
    *k_second = ptx::add_bf16x2(ptx::mul_bf16x2(x_second, c), ptx::mul_bf16x2(x_first, s));
}

}  // namespace wideattn
