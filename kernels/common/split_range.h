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

// The two forms of the ranges (the build option split_ranges picks one for the kernels and the
// host alike: WIDEATTN_EVEN_SPLIT_RANGES). Both in 64-bit arithmetic: kv_end may be near 2^31 and
// G x (split + 1) near 2^31 x splits.
//
// Rounded shares (the default): every split takes a share of ceil(kv_end / splits) keys rounded up
// to whole granules, the last what is left (shorter, or empty when the shares cover kv_end before
// it).
WIDEATTN_HOST_DEVICE inline SplitRange split_range_rounded(int64_t kv_end, int64_t granule, int64_t split,
                                                           int64_t splits) {
    const int64_t share = ((kv_end + splits - 1) / splits + granule - 1) / granule * granule;
    const int64_t begin = kv_end < share * split ? kv_end : share * split;
    return {begin, begin + (kv_end - begin < share ? kv_end - begin : share)};
}

// Even ranges: keys [0, kv_end) cut in G = ceil(kv_end / granule) granules (the last one partial),
// split `split` takes granules [floor(split G / splits), floor((split + 1) G / splits)), so every
// split holds floor(G / splits) or ceil(G / splits) granules and the last one the partial granule;
// a split without a granule (G < splits) is empty. Measured against the rounded shares on an H100
// (2026-12-05, BENCHMARKS.md): 0.5-0.9% faster at 1 x 32k (no 17th 16-key sub-tile in 31 splits),
// 2-3% slower at 5 tokens x 1 @ 20k (32 splits of 32-key tiles), equal elsewhere; so not the default.
WIDEATTN_HOST_DEVICE inline SplitRange split_range_even(int64_t kv_end, int64_t granule, int64_t split,
                                                        int64_t splits) {
    const int64_t granules = (kv_end + granule - 1) / granule;
    const int64_t begin = granules * split / splits * granule;
    const int64_t end = granules * (split + 1) / splits * granule;
    return {begin < kv_end ? begin : kv_end, end < kv_end ? end : kv_end};
}

#ifndef WIDEATTN_EVEN_SPLIT_RANGES
#define WIDEATTN_EVEN_SPLIT_RANGES 0
#endif

// Split `split` of `splits` over keys [0, kv_end): the form this build uses (above).
WIDEATTN_HOST_DEVICE inline SplitRange split_range(int64_t kv_end, int64_t granule, int64_t split, int64_t splits) {
#if WIDEATTN_EVEN_SPLIT_RANGES
    return split_range_even(kv_end, granule, split, splits);
#else
    return split_range_rounded(kv_end, granule, split, splits);
#endif
}

}  // namespace wideattn
