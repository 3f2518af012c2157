// checked_math.h - overflow-checked 64-bit arithmetic for the host-side checks of extents,
// strides and offsets (validation, tensor-map description, launch geometry): every product and
// sum of caller-supplied values goes through these, so an overflow is a refusal, never wrapped
// arithmetic or undefined behaviour.
#pragma once

#include <cstdint>

namespace wideattn {

// *out = a * b; false (and *out unspecified) when the product does not fit int64.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// *out = a + b; false when the sum does not fit int64.
inline bool checked_add(int64_t a, int64_t b, int64_t* out) { return !__builtin_add_overflow(a, b, out); }

// *out = a * b + c; false when any step does not fit int64.
inline bool checked_mul_add(int64_t a, int64_t b, int64_t c, int64_t* out) {
    int64_t product = 0;
    return checked_mul(a, b, &product) && checked_add(product, c, out);
}

}  // namespace wideattn
