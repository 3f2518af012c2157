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
// find_cta_pair_work_by_head: the same order for a "cta_pair" kernel, whose kCtaPairSize CTAs next
// to each other along x share one token tile (grid.x is kCtaPairSize x the tiles).
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
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

// The head-slowest work item of the token-tile rank block_rank() returns (read after the tile
// count, where the unsplit form has always read blockIdx.x).
template <class BlockRank>
__device__ inline BlockWork find_block_work_by_head_at(const wideattn_prefill_params& p, int32_t tile_tokens,
                                                       BlockRank block_rank) {
    BlockWork work;
    work.kv_head = static_cast<int32_t>(blockIdx.y);
    const int32_t total = count_token_tiles(p, tile_tokens);
    const int32_t rank = block_rank();
    if (rank >= total) {
        work.tile = TokenTile{false, 0, 0, 0, 0, 0};
        return work;
    }
    work.tile = find_token_tile(p, tile_tokens, total - 1 - rank);
    return work;
}

// One block per token tile: rank blockIdx.x.
__device__ inline BlockWork find_block_work_by_head(const wideattn_prefill_params& p, int32_t tile_tokens) {
    return find_block_work_by_head_at(p, tile_tokens, [] { return static_cast<int32_t>(blockIdx.x); });
}

// The CTAs of a "cta_pair" kernel: kCtaPairSize CTAs next to each other along x share a token tile.
__device__ inline BlockWork find_cta_pair_work_by_head(const wideattn_prefill_params& p, int32_t tile_tokens) {
    return find_block_work_by_head_at(p, tile_tokens,
                                      [] { return static_cast<int32_t>(blockIdx.x / kCtaPairSize); });
}

}  // namespace wideattn
