// tile_order.cuh - the order in which a prefill kernel's blocks take their (token tile, KV head)
// work items. Both orders run on the standard grid (grid.x = token_tile_count, grid.y = KV heads
// for group 8), and both take token tiles in reverse (last tile of the last sequence first):
// under bottom-right causal masking the last tiles of a sequence see the most keys, so the long
// blocks start first and the short ones fill the tail of the wave. Each order is a bijection of
// [0, gridDim.x * gridDim.y): every (tile, head) is covered exactly once; indices past the real
// tile count exit.
//
// find_block_work (the mma tier): the linear block index (blockIdx.y * gridDim.x + blockIdx.x,
// the order in which the hardware dispatches blocks) is remapped so that the KV head varies
// fastest: the blocks running at one time are the token tiles' heads side by side (they share
// the block table and their Q tokens, not K/V: every KV head streams its own prefix). The
// Hopper order below measured 1-3% faster at Hkv 4; it is not applied to the mma tier because
// its time is not in memory (227 TFLOP/s, issue-bound: kernels/mma/NOTES.md) and a first try put
// mma_e4m3_d512 over 255 registers on sm_90a.
//
// find_block_work_by_head (the Hopper tier): KV head slowest. blockIdx.y is the KV head and
// blockIdx.x the token tile rank, so the blocks running at one time work on one KV head and
// stream the same K/V prefix, whose lines they share in L2 (the mma order runs every KV head at
// once: at Hkv 4 and 16k keys that is 4 x 32 MB of K/V against a 60 MB L2). Measured on the
// H200 against the mma order (BENCHMARKS.md, commit 55773fd): +1.1-1.7% for wgmma_bf16_d512
// and +0.5-3.0% for wgmma_e4m3q_d512 where Hkv = 4, unchanged at Hkv = 1.
//
// find_block_work_mixed (the Hopper prefill blocks): find_block_work_by_head, except in a batch
// that holds both sequences of one token tile (decodes, verifications: each streams a K/V
// prefix no other tile shares, memory-bound) and sequences of several tiles (prompts, chunks:
// tiles of one sequence share their prefix in L2, compute-bound). There the single-tile
// sequences' tiles are spread evenly over a KV head's ranks, between the multi-tile ones (each
// class in reverse order), instead of running as one burst that shares the memory bandwidth
// among many SMs while the rest compute: spread out, fewer of them stream at a time, each
// faster, so they hold SMs for less time.
#pragma once

#include <cstdint>

#include "kernels/common/token_tiles.cuh"

namespace wideattn {

struct BlockWork {
    TokenTile tile;
    int32_t kv_head;
};

__device__ inline int32_t count_token_tiles(const wideattn_prefill_params& p, int32_t tile_tokens) {
    int32_t total = 0;
    int32_t q_begin = clamped_q_bound(p, 0, 0);
    for (int32_t s = 0; s < p.num_seqs; ++s) {
        const int32_t q_end = clamped_q_bound(p, s + 1, q_begin);
        const int32_t q_len = q_end - q_begin;
        total += q_len > 0 ? (q_len + tile_tokens - 1) / tile_tokens : 0;
        q_begin = q_end;
    }
    return total;
}

__device__ inline BlockWork find_block_work(const wideattn_prefill_params& p, int32_t tile_tokens) {
    const int64_t linear = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
    BlockWork work;
    work.kv_head = static_cast<int32_t>(linear % gridDim.y);
    const int64_t rank = linear / gridDim.y;
    const int32_t total = count_token_tiles(p, tile_tokens);
    if (rank >= total) {
        work.tile = TokenTile{false, 0, 0, 0, 0, 0};
        return work;
    }
    work.tile = find_token_tile(p, tile_tokens, total - 1 - static_cast<int32_t>(rank));
    return work;
}

__device__ inline BlockWork find_block_work_by_head(const wideattn_prefill_params& p, int32_t tile_tokens) {
    BlockWork work;
    work.kv_head = static_cast<int32_t>(blockIdx.y);
    const int32_t total = count_token_tiles(p, tile_tokens);
    const int32_t rank = static_cast<int32_t>(blockIdx.x);
    if (rank >= total) {
        work.tile = TokenTile{false, 0, 0, 0, 0, 0};
        return work;
    }
    work.tile = find_token_tile(p, tile_tokens, total - 1 - rank);
    return work;
}

// The token tiles of the single-tile sequences (q_len in [1, tile_tokens]) and of the others.
struct TileClasses {
    int32_t single;
    int32_t multi;
};

__device__ inline TileClasses count_tile_classes(const wideattn_prefill_params& p, int32_t tile_tokens) {
    TileClasses c{0, 0};
    int32_t q_begin = clamped_q_bound(p, 0, 0);
    for (int32_t s = 0; s < p.num_seqs; ++s) {
        const int32_t q_end = clamped_q_bound(p, s + 1, q_begin);
        const int32_t q_len = q_end - q_begin;
        const int32_t tiles = q_len > 0 ? (q_len + tile_tokens - 1) / tile_tokens : 0;
        if (tiles == 1)
            ++c.single;
        else
            c.multi += tiles;
        q_begin = q_end;
    }
    return c;
}

// Tile `index` (in sequence order) among the tiles of the single-tile sequences (single true) or
// among those of the multi-tile sequences.
__device__ inline TokenTile find_class_tile(const wideattn_prefill_params& p, int32_t tile_tokens, bool single,
                                            int32_t index) {
    TokenTile t{false, 0, 0, 0, 0, 0};
    int32_t remaining = index;
    int32_t q_begin = clamped_q_bound(p, 0, 0);
    for (int32_t s = 0; s < p.num_seqs; ++s) {
        const int32_t q_end = clamped_q_bound(p, s + 1, q_begin);
        const int32_t q_len = q_end - q_begin;
        const int32_t tiles = q_len > 0 ? (q_len + tile_tokens - 1) / tile_tokens : 0;
        if ((tiles == 1) == single && tiles > 0) {
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
        }
        q_begin = q_end;
    }
    return t;
}

// Rank r of a KV head's T = S + M ranks (S single-tile, M multi-tile tiles) holds the j-th single
// tile where r = floor(j T / S), j < S; every other rank the multi-tile tile r - ceil(r S / T)
// (the count of single ranks before r). A bijection: the S single ranks are distinct (T >= S).
__device__ inline BlockWork find_block_work_mixed(const wideattn_prefill_params& p, int32_t tile_tokens) {
    BlockWork work;
    work.kv_head = static_cast<int32_t>(blockIdx.y);
    const TileClasses c = count_tile_classes(p, tile_tokens);
    const int32_t total = c.single + c.multi;
    const int32_t rank = static_cast<int32_t>(blockIdx.x);
    if (rank >= total) {
        work.tile = TokenTile{false, 0, 0, 0, 0, 0};
        return work;
    }
    if (c.single == 0 || c.multi == 0) {
        work.tile = find_token_tile(p, tile_tokens, total - 1 - rank);
        return work;
    }
    const int64_t before = (static_cast<int64_t>(rank) * c.single + total - 1) / total;
    const bool single_rank =
        before < c.single && before * total / c.single == static_cast<int64_t>(rank);
    if (single_rank)
        work.tile = find_class_tile(p, tile_tokens, true, c.single - 1 - static_cast<int32_t>(before));
    else
        work.tile = find_class_tile(p, tile_tokens, false, c.multi - 1 - (rank - static_cast<int32_t>(before)));
    return work;
}

}  // namespace wideattn
