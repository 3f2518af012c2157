// e4m3.h - the OCP FP8 E4M3 format (1 sign, 4 exponent bits with bias 7, 3 mantissa bits;
// no infinities; 0x7F / 0xFF are NaN; largest finite 448) as host + device code, so the
// quantisation kernels, their CPU reference and the tests share one definition.
//
// Encoding rounds to nearest even and saturates finite values beyond +-448 to +-448 (the
// convention of FP8 KV caches). NaN and +-inf are not finite: they encode as NaN (0x7F with
// the input's sign) and set *nonfinite, so a caller can report them instead of storing
// finite garbage.
//
// Quantising with a per-tensor scale goes through e4m3_quantize (x times the reciprocal scale;
// a finite x whose product overflows float still saturates), and the scale of a tensor comes
// from e4m3_scale_for_finite_amax (amax / 448, floored at kE4m3MinScale).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/kernel_desc.h"  // WIDEATTN_HOST_DEVICE

namespace wideattn::fp8 {

constexpr float kE4m3Max = 448.0f;
constexpr uint8_t kE4m3NaN = 0x7F;
constexpr int kE4m3MantissaBits = 3;
constexpr int kE4m3ExponentBias = 7;
constexpr int kFloatMantissaBits = 23;
constexpr int kFloatExponentBias = 127;
constexpr uint32_t kFloatAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kFloatInfBits = 0x7F800000u;  // |x| bits at or above this: inf or NaN
constexpr uint32_t kFloatExponentMask = 0x7F800000u;
constexpr uint32_t kFloatMantissaMask = (1u << kFloatMantissaBits) - 1;
constexpr uint32_t kFloatExponentUnit = 1u << kFloatMantissaBits;  // the bits of one more in the exponent
constexpr uint8_t kE4m3MaxCode = 0x7E;           // 448
// Smallest per-tensor scale: 2^-126, the smallest normal float. Its reciprocal 2^126 is
// finite, so quantising with it never divides by zero or multiplies by infinity; an all-zero
// tensor gets this scale (its codes are all zero, and so is code * scale).
constexpr float kE4m3MinScale = 0x1p-126f;
// Smallest normal e4m3 exponent is 2^-6; subnormals step by 2^-9.
constexpr int kE4m3MinNormalExponent = 1 - kE4m3ExponentBias;
constexpr int kE4m3SubnormalStepExponent = kE4m3MinNormalExponent - kE4m3MantissaBits;

WIDEATTN_HOST_DEVICE inline uint32_t float_bits(float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits;
}

WIDEATTN_HOST_DEVICE inline float bits_float(uint32_t bits) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    return x;
}

// Decodes one e4m3 byte.
WIDEATTN_HOST_DEVICE inline float e4m3_to_float(uint8_t code) {
    const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
    const uint32_t exponent = (code >> kE4m3MantissaBits) & 0xFu;
    const uint32_t mantissa = code & 0x7u;
    if (exponent == 0xFu && mantissa == 0x7u) return bits_float(sign | 0x7FC00000u);  // NaN
    if (exponent == 0) {
        // Subnormal (or zero): mantissa * 2^-9.
        const float magnitude = static_cast<float>(mantissa) * bits_float(static_cast<uint32_t>(
                                    kFloatExponentBias + kE4m3SubnormalStepExponent) << kFloatMantissaBits);
        return sign ? -magnitude : magnitude;
    }
    const uint32_t float_exponent = exponent - kE4m3ExponentBias + kFloatExponentBias;
    return bits_float(sign | (float_exponent << kFloatMantissaBits) |
                      (mantissa << (kFloatMantissaBits - kE4m3MantissaBits)));
}

// Encodes one float: round to nearest even, saturate to +-448, NaN/inf -> NaN + *nonfinite.
WIDEATTN_HOST_DEVICE inline uint8_t e4m3_from_float(float x, bool* nonfinite) {
    const uint32_t bits = float_bits(x);
    const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
    const uint32_t magnitude_bits = bits & 0x7FFFFFFFu;
    if (magnitude_bits >= kFloatInfBits) {  // inf or NaN
        *nonfinite = true;
        return static_cast<uint8_t>(sign | kE4m3NaN);
    }
    const float magnitude = bits_float(magnitude_bits);
    if (magnitude >= kE4m3Max) return static_cast<uint8_t>(sign | kE4m3MaxCode);  // saturate
    const int exponent = static_cast<int>(magnitude_bits >> kFloatMantissaBits) - kFloatExponentBias;
    if (exponent < kE4m3MinNormalExponent) {
        // Subnormal range: round magnitude / 2^-9 to the nearest integer, ties to even. The
        // quotient is exact (a power-of-two scale) and < 8 here, so the rounding below is too.
        const float steps = magnitude * bits_float(static_cast<uint32_t>(kFloatExponentBias - kE4m3SubnormalStepExponent)
                                                   << kFloatMantissaBits);
        uint32_t whole = static_cast<uint32_t>(steps);
        const float fraction = steps - static_cast<float>(whole);
        if (fraction > 0.5f || (fraction == 0.5f && (whole & 1u))) ++whole;
        // whole == 8 carries into the smallest normal (exponent field 1, mantissa 0): same bits.
        return static_cast<uint8_t>(sign | whole);
    }
    // Normal range: keep 3 mantissa bits, round to nearest even on the 20 dropped bits.
    constexpr int kDropped = kFloatMantissaBits - kE4m3MantissaBits;
    const uint32_t mantissa = magnitude_bits & ((1u << kFloatMantissaBits) - 1u);
    uint32_t code = (static_cast<uint32_t>(exponent + kE4m3ExponentBias) << kE4m3MantissaBits) | (mantissa >> kDropped);
    const uint32_t dropped = mantissa & ((1u << kDropped) - 1u);
    const uint32_t half = 1u << (kDropped - 1);
    if (dropped > half || (dropped == half && (code & 1u))) ++code;  // may carry into the exponent
    if (code > kE4m3MaxCode) code = kE4m3MaxCode;  // rounding up past 448 saturates (0x7F would be NaN)
    return static_cast<uint8_t>(sign | code);
}

// Quantises x with a per-tensor scale given as its reciprocal: e4m3(x * inverse_scale). Only a
// NaN/inf x is flagged (*nonfinite) and stored as NaN; a finite x whose product overflows float
// (a tiny scale) saturates to +-448 like any other large value. A product that is NaN although
// x is finite (0 * an infinite reciprocal, i.e. a scale of 0) is flagged too: the scale is bad.
WIDEATTN_HOST_DEVICE inline uint8_t e4m3_quantize(float x, float inverse_scale, bool* nonfinite) {
    const uint32_t x_bits = float_bits(x);
    if ((x_bits & kFloatAbsMask) >= kFloatInfBits) {
        *nonfinite = true;
        return static_cast<uint8_t>(((x_bits >> 24) & 0x80u) | kE4m3NaN);
    }
    const float scaled = x * inverse_scale;
    const uint32_t scaled_bits = float_bits(scaled);
    if ((scaled_bits & kFloatAbsMask) == kFloatInfBits)
        return static_cast<uint8_t>(((scaled_bits >> 24) & 0x80u) | kE4m3MaxCode);
    return e4m3_from_float(scaled, nonfinite);
}

// The per-tensor e4m3 scale for a finite amax >= 0: amax / 448 (correctly rounded, so the
// largest |x| maps onto 448), never below kE4m3MinScale. Monotonic in amax, so the scale of a
// maximum is the maximum of the scales: the amax kernel reduces scales instead of amaxes.
WIDEATTN_HOST_DEVICE inline float e4m3_scale_for_finite_amax(float amax) {
    const float scale = amax / kE4m3Max;
    return scale > kE4m3MinScale ? scale : kE4m3MinScale;
}

// The largest power-of-two scale: 448 x 2^119 is finite in float, 256 x 2^120 is not.
constexpr float kE4m3MaxPowerOfTwoScale = 0x1p119f;

// The smallest power of two >= scale, for a finite scale >= kE4m3MinScale (every
// e4m3_scale_for_finite_amax result): with it the largest |x| maps into [224, 448] and every code
// times the scale is exact in fp32, which decode_e4m3kfvb_d512's product path needs. A scale
// above kE4m3MaxPowerOfTwoScale (an amax above 448 x 2^119, about 2.98e38) stays as it is: its
// power of two would decode the largest codes to infinity. Monotonic, so it commutes with max
// like the scale itself: the amax kernel raises *scale with the rounded block scales.
WIDEATTN_HOST_DEVICE inline float e4m3_power_of_two_scale(float scale) {
    const uint32_t bits = float_bits(scale);
    if ((bits & kFloatMantissaMask) == 0 || scale > kE4m3MaxPowerOfTwoScale) return scale;
    return bits_float((bits & kFloatExponentMask) + kFloatExponentUnit);
}

// Four e4m3 codes as two bf16 pairs by bit operations (decode_e4m3kfvb_d512's product path): a
// code's magnitude bits put at bits 10..4 of a bf16 half and its sign at bit 15 are the bf16 of
// its value times 2^-kE4m3ToBf16ExponentShift (the exponent biases differ by 127 - 7; a subnormal
// code is the bf16 subnormal of the same scaled value, +-0 stays +-0). A NaN code becomes a finite
// value (1.875 x 2^-112, signed), which the caller must make up for. Of a code word b0 .. b3 (b0 in
// the low byte): *even = (b0, b2), *odd = (b1, b3), the lower code in the lower half.
constexpr int kE4m3ToBf16ExponentShift = kFloatExponentBias - kE4m3ExponentBias;  // 120
WIDEATTN_HOST_DEVICE inline void e4m3x4_to_scaled_bf16x2x2(uint32_t codes, uint32_t* even, uint32_t* odd) {
    constexpr uint32_t kMagnitudes = 0x07f007f0u, kSigns = 0x80008000u;
    constexpr int kMagnitudeShift = 4, kSignShift = 8;
    *even = ((codes << kMagnitudeShift) & kMagnitudes) | ((codes << kSignShift) & kSigns);
    *odd = ((codes >> kMagnitudeShift) & kMagnitudes) | (codes & kSigns);
}

}  // namespace wideattn::fp8
