// float16.h - IEEE binary16 <-> float conversion (round to nearest even) for logit dumps
// stored as float16. Exact for every binary16 value, including subnormals, inf and NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace wideattn::accuracy {

inline float float16_to_float(uint16_t bits) {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t exponent = (bits >> 10) & 0x1fu;
    const uint32_t mantissa = bits & 0x3ffu;
    uint32_t word;
    if (exponent == 0x1fu) {
        word = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
        word = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        word = sign;
    } else {
        const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24
        std::memcpy(&word, &magnitude, sizeof word);
        word |= sign;
    }
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

inline uint16_t float_to_float16(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    const uint16_t sign = static_cast<uint16_t>((word >> 16) & 0x8000u);
    const uint32_t magnitude = word & 0x7fffffffu;
    if (magnitude >= 0x7f800000u)  // inf or NaN
        return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
    if (magnitude >= 0x477ff000u)  // rounds to >= 65520: overflow to inf
        return static_cast<uint16_t>(sign | 0x7c00u);
    if (magnitude < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
        float abs_value;
        std::memcpy(&abs_value, &magnitude, sizeof abs_value);
        // Adding 0.5 aligns the half subnormal grid (2^-24) with float's last mantissa bits,
        // so the hardware addition performs the round to nearest even.
        const float shifted = abs_value + 0.5f;
        uint32_t shifted_word;
        std::memcpy(&shifted_word, &shifted, sizeof shifted_word);
        return static_cast<uint16_t>(sign | (shifted_word - 0x3f000000u));
    }
    const uint32_t rounding = 0xfffu + ((magnitude >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((magnitude - 0x38000000u + rounding) >> 13));
}

}  // namespace wideattn::accuracy
