// page_bounds.cuh - block-table entries the kernels distrust (docs/design.md, "Metadata the
// kernels distrust"): an entry outside [0, num_blocks) names no page of the cache, and its keys
// read as zeros in K and V, as the TMA path's tensor bounds already give. The cp.async paths
// test the entry before forming an address and copy nothing from such a page (zero fill); the
// page shift, page index and slot of the lean copies.
#pragma once

#include <cstdint>

namespace wideattn {

// The page a cp.async path substitutes for an entry outside the cache: its keys are zero-filled.
constexpr int32_t kNoPage = -1;

// One unsigned compare: a negative entry wraps above any num_blocks (>= 1, checked on the host).
__device__ __forceinline__ bool page_in_cache(int32_t page, int32_t num_blocks) {
    return static_cast<uint32_t>(page) < static_cast<uint32_t>(num_blocks);
}

// log2(block_size) when block_size is a power of two, else -1: the lean copies' page index by a
// shift and first slot by a mask (decode_bf16_d512's and decode_e4m3_d512's WarpStream).
__device__ __forceinline__ int32_t page_shift_of(int32_t block_size) {
    return (block_size & (block_size - 1)) == 0 ? __ffs(block_size) - 1 : -1;
}

// The block-table index of the page holding key `key`: by the shift where `page_shift` >= 0
// (page_shift_of), else by the division.
__device__ __forceinline__ int32_t page_index_of(int32_t key, int32_t block_size, int32_t page_shift) {
    return page_shift >= 0 ? key >> page_shift : key / block_size;
}

// The slot of key `key` in its page: by a mask where `page_shift` >= 0, else by the remainder.
__device__ __forceinline__ int32_t page_slot_of(int32_t key, int32_t block_size, int32_t page_shift) {
    return page_shift >= 0 ? key & ((1 << page_shift) - 1) : key % block_size;
}

}  // namespace wideattn
