// split_range.h - the key range of one split under split-KV (docs/design.md "Split-KV"): the
// arithmetic of restrict_to_split (block_geometry.cuh), host and device, so the CPU tests check
// the ranges the kernels visit.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn {

// Keys [begin, end) of a sequence's visible keys, local to its split.
struct SplitRange {
    int64_t begin;
    int64_t end;
};

// The keys a split boundary is a multiple of: lcm(tile_keys, block_size), so a split starts on a
// key tile and on a page.
WIDEATTN_HOST_DEVICE inline int64_t split_granule(int32_t tile_keys, int32_t block_size) {
    int32_t a = tile_keys, b = block_size;
    while (b != 0) {
        const int32_t r = a % b;
        a = b;
        b = r;
    }
    return static_cast<int64_t>(tile_keys / a) * block_size;
}

// Split `split` of `splits` over keys [0, kv_end) cut in G = ceil(kv_end / granule) granules (the
// last one partial): granules [floor(split G / splits), floor((split + 1) G / splits)), so every
// split holds floor(G / splits) or ceil(G / splits) granules and the last one the partial granule;
// a split without a granule (G < splits) is empty. In 64-bit arithmetic: kv_end may be near 2^31
// and G x (split + 1) near 2^31 x splits.
WIDEATTN_HOST_DEVICE inline SplitRange split_range(int64_t kv_end, int64_t granule, int64_t split, int64_t splits) {
    const int64_t granules = (kv_end + granule - 1) / granule;
    const int64_t begin = granules * split / splits * granule;
    const int64_t end = granules * (split + 1) / splits * granule;
    return {begin < kv_end ? begin : kv_end, end < kv_end ? end : kv_end};
}

}  // namespace wideattn
