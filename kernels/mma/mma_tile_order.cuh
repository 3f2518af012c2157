// mma_tile_order.cuh - heaviest-first block order for the mma prefill kernel.
//
// The launch grid is the standard one (grid.x = token_tile_count, grid.y = KV heads for
// group 8). The linear block index (blockIdx.y * gridDim.x + blockIdx.x, the order in which
// the hardware dispatches blocks) is remapped so that
//   - the KV head varies fastest: the blocks running at one time are the token tiles' heads
//     side by side (they share the block table and their Q tokens, not K/V: every KV head
//     streams its own prefix). The Hopper kernels measured the opposite order (KV head
//     slowest, kernels/hopper/wgmma_tile_order.cuh) 1-3% faster at Hkv 4; it is not applied
//     here because the mma kernels' time is not in memory (227 TFLOP/s, issue-bound: NOTES.md)
//     and a first try put mma_e4m3_d512 over 255 registers on sm_90a; and
//   - token tiles are taken in reverse order (last tile of the last sequence first): under
//     bottom-right causal masking the last tiles of a sequence see the most keys, so the
//     long blocks start first and the short ones fill the tail of the wave.
// The map is a bijection of [0, gridDim.x * gridDim.y): every (tile, head) is covered
// exactly once; indices past the real tile count exit.
#pragma once

#include <cstdint>

#include "kernels/common/token_tiles.cuh"

namespace wideattn::mma {

struct BlockWork {
    TokenTile tile;
    int32_t kv_head;
};

__device__ inline int32_t count_token_tiles(const wideattn_prefill_params& p, int32_t tile_tokens) {
    int32_t total = 0;
    int32_t q_begin = __ldg(p.cu_seqlens_q);
    for (int32_t s = 0; s < p.num_seqs; ++s) {
        const int32_t q_end = __ldg(p.cu_seqlens_q + s + 1);
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

}  // namespace wideattn::mma
