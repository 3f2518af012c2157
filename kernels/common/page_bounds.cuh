// page_bounds.cuh - block-table entries the kernels distrust (docs/design.md, "Metadata the
// kernels distrust"): an entry outside [0, num_blocks) names no page of the cache, and its keys
// read as zeros in K and V, as the TMA path's tensor bounds already give. The cp.async paths
// test the entry before forming an address and copy nothing from such a page (zero fill).
#pragma once

#include <cstdint>

namespace wideattn {

// The page a cp.async path substitutes for an entry outside the cache: its keys are zero-filled.
constexpr int32_t kNoPage = -1;

// One unsigned compare: a negative entry wraps above any num_blocks (>= 1, checked on the host).
__device__ __forceinline__ bool page_in_cache(int32_t page, int32_t num_blocks) {
    return static_cast<uint32_t>(page) < static_cast<uint32_t>(num_blocks);
}

}  // namespace wideattn
