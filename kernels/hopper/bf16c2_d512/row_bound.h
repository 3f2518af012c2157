// row_bound.h - the test of the bounded form of the two-CTA Hopper-tier BF16 kernel
// (wgmma_bf16c2mb_d512, Traits::kMaxBound) as plain host/device arithmetic, so the kernel
// (mainloop.cuh, bounded_softmax_step) and its CPU test (tests/test_row_bound.cpp) read the same
// rule: a row's bound is the sum of the two CTAs' partial row maxima (fp32, one rounding), and a
// tile may raise the row's running maximum only where the bound is not at most the running
// maximum plus the rescale threshold (a NaN bound may).
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn::hopper::bf16c2 {

// The bound of a row's maximum of summed scores: own partial maximum + the partner's.
WIDEATTN_HOST_DEVICE inline float row_max_bound(float own_max, float partner_max) { return own_max + partner_max; }

// Whether a tile whose row maxima are bounded by `bound` may grow the running maximum
// `running_max` past `threshold` (the free form rescales where tile max > running max + threshold).
WIDEATTN_HOST_DEVICE inline bool bound_allows_growth(float bound, float running_max, float threshold) {
    return !(bound <= running_max + threshold);
}

}  // namespace wideattn::hopper::bf16c2
