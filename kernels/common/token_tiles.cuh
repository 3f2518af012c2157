// token_tiles.cuh - maps a block's blockIdx.x to (sequence, token tile) for the varlen
// launch geometry of kernel_desc.h: sequence s owns ceil(q_len_s / tile_tokens) tiles,
// numbered in sequence order; blocks past the last tile get found == false.
// cu_seqlens_q is read clamped and made monotone (docs/design.md, "Metadata the kernels
// distrust"): sequence s owns rows [q_begin_s, q_end_s) with q_begin_0 = clamp(cu[0], 0,
// total_q) and q_end_s = clamp(cu[s + 1], q_begin_s, total_q), so no value of it can make a
// kernel touch a row outside [0, total_q) or two sequences share a row.
#pragma once

#include <cstdint>

#include "wideattn.h"

namespace wideattn {

struct TokenTile {
    bool found;
    int32_t seq;          // sequence index
    int32_t q_begin;      // first query token of the sequence (row of q / o)
    int32_t q_len;        // new tokens of the sequence
    int32_t tile_begin;   // first token of this tile, relative to the sequence
    int32_t tile_len;     // tokens in this tile (<= tile_tokens)
};

// Entry s of cu_seqlens_q clamped to [lower, total_q].
__device__ __forceinline__ int32_t clamped_q_bound(const wideattn_prefill_params& p, int32_t s, int32_t lower) {
    return min(max(__ldg(p.cu_seqlens_q + s), lower), p.total_q);
}

// Walks cu_seqlens_q; every thread of the block computes the same answer (the values are
// read through the read-only cache). Cost is O(num_seqs) per block, negligible next to a
// tile's attention work.
__device__ inline TokenTile find_token_tile(const wideattn_prefill_params& p, int32_t tile_tokens,
                                            int32_t block_index) {
    TokenTile t{false, 0, 0, 0, 0, 0};
    int32_t remaining = block_index;
    int32_t q_begin = clamped_q_bound(p, 0, 0);
    for (int32_t s = 0; s < p.num_seqs; ++s) {
        const int32_t q_end = clamped_q_bound(p, s + 1, q_begin);
        const int32_t q_len = q_end - q_begin;
        const int32_t tiles = q_len > 0 ? (q_len + tile_tokens - 1) / tile_tokens : 0;
        if (remaining < tiles) {
            t.found = true;
            t.seq = s;
            t.q_begin = q_begin;
            t.q_len = q_len;
            t.tile_begin = remaining * tile_tokens;
            t.tile_len = min(tile_tokens, q_len - t.tile_begin);
            return t;
        }
        remaining -= tiles;
        q_begin = q_end;
    }
    return t;
}

}  // namespace wideattn
