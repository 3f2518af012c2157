// k_from_v.h - K rebuilt from V (WIDEATTN_FLAG_K_FROM_V, include/wideattn.h): the one definition
// of the arithmetic, for the CPU reference (accuracy/reference_cpu.cpp), the host-side checks in
// the tests and the kernels, so every implementation rounds at the same steps as transformers'
// Gemma 4 global layers (docs/design.md section 2, "K from V in Gemma 4's global layers").
//
// Per key at `position` and dim d of D: x[d] = bf16(V[d] * w[d]); inv_freq[i] (fp32) for the D/2
// frequencies (the caller's table or computed from theta); angle = fp32(position * inv_freq[i]);
// c, s = bf16(cos(angle)), bf16(sin(angle)); K[d] = bf16(bf16(x[d] * c) + bf16(rotate_half(x)[d] * s))
// with rotate_half(x)[d] = -x[d + D/2] for d < D/2 and x[d - D/2] after. A frequency with inv_freq 0 has angle 0, c = 1, s = 0: the
// same operations leave x unchanged, as they do in transformers.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "fp8/codec/e4m3.h"  // fp8::float_bits, fp8::bits_float
#include "kernels/common/kernel_desc.h"

namespace wideattn {

// The kernels' second argument for a "k_from_v" kernel is this struct by value (the library's
// validated copy of the caller's, zeroed for a call without WIDEATTN_FLAG_K_FROM_V).
using KFromV = wideattn_k_from_v;

// The size of wideattn_k_from_v's first version (C API 0.5.0): the fields before inv_freq. A struct
// of this size has no table (inv_freq is taken as NULL).
constexpr size_t kKFromVSizeWithoutInvFreq = offsetof(wideattn_k_from_v, inv_freq);
// The size of its second version (C API 0.6.0): up to inv_freq. A struct of this size has no cos /
// sin table (cos_sin taken as NULL).
constexpr size_t kKFromVSizeWithoutCosSin = offsetof(wideattn_k_from_v, cos_sin);

// The cos / sin table (wideattn_k_from_v.cos_sin): per position a row of rotary_dims / 2 entries,
// each the bf16 cos (low half) and the bf16 sin (high half) of one frequency. The decode kernels
// read a lane's two frequencies d, d + 1 as one 8-byte word, so the rows hold whole pairs
// (rotary_dims a multiple of kCosSinRotaryDimsMultiple) and the table is 8-byte aligned.
constexpr size_t kCosSinEntryBytes = 4;
constexpr size_t kCosSinAlignment = 8;
constexpr int32_t kCosSinRotaryDimsMultiple = 4;

// Feature of a kernel that rebuilds K from V: it takes a KFromV as its second argument (on every
// launch) and serves calls with and without WIDEATTN_FLAG_K_FROM_V (unless it also has
// kFeatureKFromVOnly); selection gives a call with the flag only such a kernel.
constexpr char kFeatureKFromV[] = "k_from_v";
// Feature of a "k_from_v" kernel that serves only calls with WIDEATTN_FLAG_K_FROM_V (it has no
// k_cache path): selection never gives it a K+V call, pinned or not.
constexpr char kFeatureKFromVOnly[] = "k_from_v_only";

// Whether a params struct asks for K from V.
WIDEATTN_HOST_DEVICE constexpr bool k_from_v_call(int32_t flags) { return (flags & WIDEATTN_FLAG_K_FROM_V) != 0; }

// fp32 -> nearest-even bf16, returned as the fp32 value it stands for (NaN stays a quiet NaN).
WIDEATTN_HOST_DEVICE inline float round_to_bf16(float value) {
    uint32_t word = fp8::float_bits(value);
    constexpr uint32_t kExponent = 0x7f800000u, kMantissa = 0x007fffffu, kQuiet = 0x00400000u;
    if ((word & kExponent) == kExponent && (word & kMantissa) != 0) {
        word |= kQuiet;
    } else {
        word += 0x7fffu + ((word >> 16) & 1u);
    }
    return fp8::bits_float(word & 0xffff0000u);
}

// inv_freq[i] of "proportional" RoPE: 1 / fp32(theta ^ (2i / D)) for the first rotary_dims / 2
// frequencies, 0 for the rest. transformers computes the power in fp32 and then the fp32
// reciprocal; the power here is fp64 rounded once to fp32 (the correctly rounded fp32 power in
// all but vanishingly rare cases, and the same bits on the host and the device), because CUDA's
// powf has up to 2 ulps of error and one ulp of inv_freq[1] moves the angle at position 131072 by
// 0.007 rad, two bf16 ulps of cos.
WIDEATTN_HOST_DEVICE inline float rope_inv_freq(float theta, int32_t i, int32_t head_dim, int32_t rotary_dims) {
    if (2 * i >= rotary_dims) return 0.0f;
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(pow(static_cast<double>(theta), static_cast<double>(exponent)));
    return 1.0f / power;
}

// inv_freq[i] of a description: the entry of its table when kfv.inv_freq is set (the model's own
// frequencies, used as they are), else rope_inv_freq from rope_theta; 0 from rotary_dims / 2 on
// either way (the table holds rotary_dims / 2 entries and is not read past them). The table is a
// device pointer in the kernels' copy of the description and a host pointer in the CPU
// reference's.
WIDEATTN_HOST_DEVICE inline float k_from_v_inv_freq(const KFromV& kfv, int32_t i, int32_t head_dim) {
    if (2 * i >= kfv.rotary_dims) return 0.0f;
    if (kfv.inv_freq) {
#if defined(__CUDA_ARCH__)
        return __ldg(kfv.inv_freq + i);
#else
        return kfv.inv_freq[i];
#endif
    }
    return rope_inv_freq(kfv.rope_theta, i, head_dim, kfv.rotary_dims);
}

// The fp32 angle of a key at `position` (its index in the sequence) for one frequency: one fp32
// product, as transformers' (inv_freq @ position_ids) with an inner dimension of 1.
WIDEATTN_HOST_DEVICE inline float rope_angle(int32_t position, float inv_freq) {
    return static_cast<float>(position) * inv_freq;
}

// cos and sin of an fp32 angle in fp32, each rounded to bf16 (transformers returns them cast to
// the activations' dtype). On the device these are cosf / sinf with their full range reduction
// (angles reach 2.6e5 rad), the functions torch's CUDA kernels call; __cosf / __sinf lose all
// accuracy there.
struct RopeCosSin {
    float c, s;
};
WIDEATTN_HOST_DEVICE inline RopeCosSin rope_cos_sin(float angle) {
#if defined(__CUDA_ARCH__)
    return {round_to_bf16(cosf(angle)), round_to_bf16(sinf(angle))};
#else
    return {round_to_bf16(std::cos(angle)), round_to_bf16(std::sin(angle))};
#endif
}

// The largest |angle| rope_cos_sin_reduced reduces itself (2^18 rad: positions up to 262144 at
// inv_freq <= 1). Up to it the quadrant, rounded from the exact product angle * fp32(2/pi), is off
// by at most 0.007 of a quadrant, so the reduced argument stays within |r| <= 0.796 (pi/4 + 0.011),
// where the polynomials keep their accuracy (past 2^20 r and the error grow: 5.4 ulps near 2^22).
constexpr float kRopeReducedMaxAngle = 262144.0f;

// cos and sin of an fp32 angle with |angle| <= kRopeReducedMaxAngle (the caller checks), in fp32:
// within 1.54 ulps of the exact values, measured over every such fp32 angle of either sign, so within
// 2 ulps of the correctly rounded fp32 values (tests/test_rope_sincos.cpp on the models' angles).
// The quadrant k is the nearest integer to angle * 2/pi (the fma with 1.5 * 2^23 rounds it and
// leaves k mod 4 in the low bits); r = angle - k * pi/2 by a Cody-Waite reduction with pi/2 split
// into three fp32 terms (72 bits), one fma each: the first step cancels exactly and the other two
// round once each, so r keeps ~1 ulp of relative accuracy even where it is tiny (the fp32 angle
// nearest a multiple of pi/2 below 2^18, 252.898209, leaves |r| = 4.2e-9; the split misses < 2e-18
// rad). The polynomials are Cephes' sinf / cosf ones on [-pi/4, pi/4]. Every step is an fmaf or a
// single rounding, so the host gives the device's bits. On the device (sm_90a, nvcc 13.0) this is
// 26 instructions: 11 FFMA, 2 FMUL and 1 FADD for k, r and the polynomials, 12 for the quadrant's
// swap and signs; cosf and sinf take ~40 each below 105615 rad and a Payne-Hanek loop through local
// memory above it. The sine of -0 is +0 (RoPE angles are >= 0).
WIDEATTN_HOST_DEVICE inline void rope_cos_sin_reduced_f32(float angle, float* c, float* s) {
    constexpr float kTwoOverPi = 6.36619747e-1f;
    constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23: the sum's ulp is 1 for |k| < 2^22
    constexpr float kPiOver2Hi = 1.57079637e+0f, kPiOver2Mid = -4.37113883e-8f, kPiOver2Lo = -1.71512451e-15f;
    constexpr float kSin1 = -1.66666546e-1f, kSin2 = 8.33216087e-3f, kSin3 = -1.95152959e-4f;
    constexpr float kCos1 = -5.0e-1f, kCos2 = 4.16666456e-2f, kCos3 = -1.38873163e-3f, kCos4 = 2.44331571e-5f;
    const float shifted = fmaf(angle, kTwoOverPi, kRoundShift);
    const float k = shifted - kRoundShift;
    float r = fmaf(k, -kPiOver2Hi, angle);
    r = fmaf(k, -kPiOver2Mid, r);
    r = fmaf(k, -kPiOver2Lo, r);
    const float r2 = r * r;
    const float sin_r = fmaf(r * r2, fmaf(r2, fmaf(r2, kSin3, kSin2), kSin1), r);
    const float cos_r = fmaf(r2, fmaf(r2, fmaf(r2, fmaf(r2, kCos4, kCos3), kCos2), kCos1), 1.0f);
    const uint32_t quadrant = fp8::float_bits(shifted);
    // cos(k pi/2 + r), sin(k pi/2 + r) for k mod 4 = 0..3: (C, S), (-S, C), (-C, -S), (S, -C).
    const bool odd = (quadrant & 1u) != 0;
    const float c_unsigned = odd ? sin_r : cos_r, s_unsigned = odd ? cos_r : sin_r;
    *c = ((quadrant + 1u) & 2u) != 0 ? -c_unsigned : c_unsigned;
    *s = (quadrant & 2u) != 0 ? -s_unsigned : s_unsigned;
}

// The fp32 values that rope_cos_sin_reduced rounds: the reduction's results, or past its range
// (angles past kRopeReducedMaxAngle, infinities and NaN) rope_cos_sin's values, already bf16. For
// kernels that round two values to bf16 by one cvt.rn.bf16x2.
WIDEATTN_HOST_DEVICE inline RopeCosSin rope_cos_sin_reduced_unrounded(float angle) {
    if (!(fabsf(angle) <= kRopeReducedMaxAngle)) return rope_cos_sin(angle);
    RopeCosSin cs;
    rope_cos_sin_reduced_f32(angle, &cs.c, &cs.s);
    return cs;
}

// rope_cos_sin with the reduction above in place of cosf / sinf, the same bits on the host and the
// device: its bf16 values differ from the correctly rounded bf16 only where the exact value lies
// within ~2 fp32 ulps of a bf16 rounding boundary, as cosf / sinf's do. ~45 instructions on the
// device with the two bf16 roundings and the range check.
WIDEATTN_HOST_DEVICE inline RopeCosSin rope_cos_sin_reduced(float angle) {
    const RopeCosSin cs = rope_cos_sin_reduced_unrounded(angle);
    return {round_to_bf16(cs.c), round_to_bf16(cs.s)};
}

// The fp32 value of a bf16 given by its bits.
WIDEATTN_HOST_DEVICE inline float bf16_bits_value(uint32_t bits) { return fp8::bits_float(bits << 16); }

// Whether the key at `position` takes its cos / sin from the description's table (one is given
// and holds the position); frequencies below rotary_dims / 2 only.
WIDEATTN_HOST_DEVICE inline bool k_from_v_table_holds(const KFromV& kfv, int32_t position) {
    return kfv.cos_sin != nullptr && position >= 0 && position < kfv.cos_sin_positions;
}

// Entry [position][i] of the table (k_from_v_table_holds(kfv, position), 2 i < rotary_dims): the
// bf16 cos and sin as they are stored. A device pointer in the kernels' copy of the description, a
// host pointer in the CPU reference's.
WIDEATTN_HOST_DEVICE inline RopeCosSin k_from_v_table_entry(const KFromV& kfv, int32_t position, int32_t i) {
    const uint32_t* row = static_cast<const uint32_t*>(kfv.cos_sin) +
                          static_cast<int64_t>(position) * (kfv.rotary_dims / 2);
#if defined(__CUDA_ARCH__)
    const uint32_t entry = __ldg(row + i);
#else
    const uint32_t entry = row[i];
#endif
    return {bf16_bits_value(entry & 0xffffu), bf16_bits_value(entry >> 16)};
}

// The bf16 (cos, sin) pair of a table entry as its 32 bits (cos low): how
// wideattn_k_from_v_cos_sin stores rope_cos_sin_reduced's values.
WIDEATTN_HOST_DEVICE inline uint32_t k_from_v_table_bits(RopeCosSin cs) {
    return (fp8::float_bits(cs.c) >> 16) | (fp8::float_bits(cs.s) & 0xffff0000u);
}

// The mode's c[i], s[i] for the key at `position`: the table's entry where it holds the position,
// else the formula with cos / sin by rope_cos_sin (cosf / sinf; the fp64 reference kernel and the
// CPU reference); 1 and 0 from rotary_dims / 2 on.
WIDEATTN_HOST_DEVICE inline RopeCosSin k_from_v_cos_sin(const KFromV& kfv, int32_t position, int32_t i,
                                                       int32_t head_dim) {
    if (2 * i >= kfv.rotary_dims) return {1.0f, 0.0f};
    if (k_from_v_table_holds(kfv, position)) return k_from_v_table_entry(kfv, position, i);
    return rope_cos_sin(rope_angle(position, k_from_v_inv_freq(kfv, i, head_dim)));
}

// The scaled, pre-RoPE key element: bf16(V[d] * w[d]).
WIDEATTN_HOST_DEVICE inline float k_from_v_scaled(float v, float w) { return round_to_bf16(v * w); }

// One rotated key element from the scaled elements x = x[d] and its partner x[d +- D/2], with the
// bf16 cos / sin of d's frequency; `first_half`: d < D/2 (the partner enters negated).
WIDEATTN_HOST_DEVICE inline float rope_rotate(float x, float partner, RopeCosSin cs, bool first_half) {
    const float rotated = first_half ? -partner : partner;
    return round_to_bf16(round_to_bf16(x * cs.c) + round_to_bf16(rotated * cs.s));
}

}  // namespace wideattn
