// bf16.h - host-side bfloat16 <-> float conversion (round to nearest even), shared by the
// CPU reference, the error statistics, the tests and the tools.
#pragma once

#include <cstdint>
#include <cstring>

namespace wideattn {

inline float bf16_to_float(uint16_t bits) {
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

inline uint16_t float_to_bf16(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    if ((word & 0x7f800000u) == 0x7f800000u && (word & 0x007fffffu) != 0)
        return static_cast<uint16_t>((word >> 16) | 0x0040u);  // quiet NaN
    const uint32_t rounding = 0x7fffu + ((word >> 16) & 1u);
    return static_cast<uint16_t>((word + rounding) >> 16);
}

}  // namespace wideattn
