// checked_size.h - overflow-checked arithmetic for every size, count and offset computed from
// input (dataset shapes, options): each function throws AccuracyError naming what was computed
// and the operands instead of wrapping, so a file declaring a vocab of 2^62 or an option of
// 2^52 rows is refused with a message rather than dividing by zero or allocating a wrapped size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"

namespace wideattn::accuracy {

// a * b; throws "<what>: A x B does not fit a 64-bit integer" on overflow.
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
    int64_t product = 0;
    if (__builtin_mul_overflow(a, b, &product))
        throw AccuracyError(what + ": " + std::to_string(a) + " x " + std::to_string(b) +
                            " does not fit a 64-bit integer");
    return product;
}

// a + b; throws "<what>: A + B does not fit a 64-bit integer" on overflow.
inline int64_t checked_add(int64_t a, int64_t b, const std::string& what) {
    int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum))
        throw AccuracyError(what + ": " + std::to_string(a) + " + " + std::to_string(b) +
                            " does not fit a 64-bit integer");
    return sum;
}

// The product of `dims` (1 for none), checked.
inline int64_t checked_product(const std::vector<int64_t>& dims, const std::string& what) {
    int64_t product = 1;
    for (int64_t d : dims) product = checked_mul(product, d, what);
    return product;
}

// ceil(a / b) for a >= 0, b >= 1, without forming a + b - 1.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// `value` (>= 0) as a size_t element count; throws when it is negative or does not fit.
inline size_t checked_size(int64_t value, const std::string& what) {
    if (value < 0 || static_cast<uint64_t>(value) > std::numeric_limits<size_t>::max())
        throw AccuracyError(what + ": " + std::to_string(value) + " is not a valid size");
    return static_cast<size_t>(value);
}

}  // namespace wideattn::accuracy
